"""Episode metadata: who recorded what, with which calibration and software, and how it ended.

Stored twice with every bag: as ``episode.yaml`` next to the MCAP file (written when the episode
starts, rewritten when it stops or is recovered, so a crashed episode still has it) and, once the
bag is closed, as the ``so101.episode`` entry of rosbag2's ``custom_data`` in ``metadata.yaml``
(and so inside the MCAP file's own ``rosbag2`` metadata record).

The records are pydantic dataclasses (:data:`so101_common.schema.STRICT_DATACLASS`): the writer
updates topic counters per message at plain-dataclass speed, and reading ``episode.yaml`` validates
it, so a bad file is one :class:`~so101_recorder.errors.RecorderError` line naming the file and key.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import socket
import subprocess
import typing
from dataclasses import asdict, field
from functools import lru_cache
from importlib import metadata as _importlib_metadata
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic.dataclasses import dataclass

from so101_common.paired_dataset import FaultSpan
from so101_common.schema import STRICT_DATACLASS, SchemaError, read_yaml, validate
from so101_recorder.errors import RecorderError, io_error

__all__ = [
    "SafeLoader",
    "EPISODE_FILE",
    "CUSTOM_DATA_KEY",
    "SCHEMA_VERSION",
    "EpisodeMetadata",
    "FileRef",
    "TopicStats",
    "software_version",
    "file_ref",
    "load_episode",
    "iso_utc",
]

SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available: 10x faster
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

EPISODE_FILE = "episode.yaml"
CUSTOM_DATA_KEY = "so101.episode"
SCHEMA_VERSION: Literal[1] = 1
Status = Literal["recording", "complete", "failed", "recovered"]
STATUSES: tuple[str, ...] = typing.get_args(Status)


@dataclass(config=STRICT_DATACLASS)
class FileRef:
    """A file the episode depended on, with the SHA-256 of its content at recording time."""

    path: str  # as given (absolute when it resolved to a file)
    sha256: str | None = None  # None when the name is not a readable file (e.g. a gap profile name)


@dataclass(config=STRICT_DATACLASS)
class TopicStats:
    """What one topic contributed to an episode."""

    type: str  # ROS type, e.g. sensor_msgs/msg/JointState
    count: int = 0  # messages written
    bytes: int = 0  # serialized payload bytes written
    first_ns: int | None = None  # bag timestamp (receive time) of the first message
    last_ns: int | None = None  # ... and of the last


@dataclass(config=STRICT_DATACLASS)
class EpisodeMetadata:
    """Everything needed to know later where an episode came from. Times: ns since the epoch."""

    name: str  # bag directory name, ``<timestamp>_<task>_<NNN>``
    robot_id: str  # the arm (LeRobot calibration id), e.g. "follower" or "virtual_follower"
    task: str  # motion or task name
    calibration: FileRef | None = None  # calibration file used by the driver
    gap_profile: FileRef | None = None  # virtual robot's gap profile (name or file); None on real hardware
    notes: str = ""  # operator notes
    operator: str = ""  # who (or which fleet job) recorded it; fleet catalogues group by it
    software: dict[str, str | None] = field(default_factory=dict)  # package, version, git_rev
    host: str = field(default_factory=socket.gethostname)
    start_time_ns: int = 0  # wall clock when recording started
    stop_time_ns: int | None = None  # wall clock when it stopped (or last message, after recovery)
    status: Status = "recording"
    error: str | None = None  # why it failed, when it did
    topics: dict[str, TopicStats] = field(default_factory=dict)
    recovery: dict[str, Any] | None = None  # what recovery found, when the bag was recovered
    # servo faults reported on /diagnostics while recording (so101_common.servo_faults); start/end are
    # seconds on the ROS clock that stamps the recorded messages (header stamps), end None = still on at stop
    faults: list[FaultSpan] = field(default_factory=list)
    schema_version: Literal[1] = SCHEMA_VERSION

    @property
    def message_count(self) -> int:
        return sum(t.count for t in self.topics.values())

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["faults"] = [span.model_dump() for span in self.faults]
        record["start_time"] = iso_utc(self.start_time_ns)
        record["stop_time"] = iso_utc(self.stop_time_ns) if self.stop_time_ns is not None else None
        return record

    def to_yaml(self) -> str:
        return yaml.dump(self.to_dict(), Dumper=_Dumper, sort_keys=False, allow_unicode=True)

    @classmethod
    def from_dict(cls, record: Any, source: str = "episode metadata") -> EpisodeMetadata:
        """Validate a record as :meth:`to_dict` wrote it (the derived ISO times are dropped)."""
        if isinstance(record, dict):
            record = {k: v for k, v in record.items() if k not in ("start_time", "stop_time")}
        try:
            return validate(cls, record, source)
        except SchemaError as err:
            raise RecorderError(str(err)) from None

    def save(self, bag_dir: Path) -> Path:
        """Write ``episode.yaml`` into ``bag_dir`` atomically (temporary file, then rename)."""
        path = Path(bag_dir) / EPISODE_FILE
        tmp = path.with_suffix(".yaml.tmp")
        try:
            tmp.write_text(self.to_yaml(), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as err:
            raise io_error("write episode metadata", path, err) from err
        return path


def load_episode(bag_dir: Path | str) -> EpisodeMetadata | None:
    """The episode metadata stored with a bag, or None if it has no ``episode.yaml``."""
    path = Path(bag_dir) / EPISODE_FILE
    if not path.is_file():
        return None
    try:
        record = read_yaml(path)
    except SchemaError as err:
        raise RecorderError(str(err)) from None
    return EpisodeMetadata.from_dict(record, str(path))


def iso_utc(ns: int) -> str:
    return _dt.datetime.fromtimestamp(ns / 1e9, tz=_dt.UTC).isoformat(timespec="milliseconds")


def file_ref(name: str | os.PathLike[str] | None, *, must_exist: bool) -> FileRef | None:
    """Reference a file by path and content hash. Names that are not files are kept as given
    unless ``must_exist`` (a calibration file that cannot be read is an error, not a silent gap)."""
    if name is None or str(name) == "":
        return None
    path = Path(name).expanduser()
    if path.is_file():
        digest = hashlib.sha256()
        try:
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 16), b""):
                    digest.update(block)
        except OSError as err:
            raise io_error("read", path, err) from err
        return FileRef(str(path.resolve()), digest.hexdigest())
    if must_exist:
        raise RecorderError(f"cannot read {path}: no such file")
    return FileRef(str(name), None)


@lru_cache(maxsize=1)
def software_version() -> dict[str, str | None]:
    """This package's version and, when it runs from a git checkout, the commit (``+dirty`` if modified)."""
    try:
        version = _importlib_metadata.version("so101_recorder")
    except _importlib_metadata.PackageNotFoundError:
        version = None
    return {"package": "so101_recorder", "version": version, "git_rev": _git_rev(Path(__file__).resolve().parent)}


def _git_rev(where: Path) -> str | None:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=where, capture_output=True,
                             text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{rev}+dirty" if dirty else rev or None
