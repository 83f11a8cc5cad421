"""The one place so101_fleet touches :mod:`so101_recorder` (bag writing, episode metadata, MCAP scanning).

Re-point these imports when the recorder's public API moves; nothing else in this package imports
``so101_recorder``.
"""

from __future__ import annotations

from so101_recorder.bag_reader import Bag, JointStateRead
from so101_recorder.bag_writer import EpisodeWriter
from so101_recorder.errors import BagReadError, RecorderError
from so101_recorder.mcap_scan import McapScan, scan_mcap
from so101_recorder.metadata import (
    CUSTOM_DATA_KEY,
    EPISODE_FILE,
    EpisodeMetadata,
    SafeLoader,
    file_ref,
)

__all__ = [
    "CUSTOM_DATA_KEY",
    "EPISODE_FILE",
    "Bag",
    "BagReadError",
    "JointStateRead",
    "EpisodeMetadata",
    "EpisodeWriter",
    "McapScan",
    "RecorderError",
    "SafeLoader",
    "file_ref",
    "scan_mcap",
]
