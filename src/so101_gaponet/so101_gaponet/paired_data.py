"""A small reader (and writer, for fixtures) of the paired real/sim dataset folder (ARCHITECTURE.md).

``dataset.json`` (schema version, rate, joint names, units, episodes with their metadata) and
``episodes/<name>.npz`` with ``time``, ``command``, ``real_*`` and ``sim_*`` arrays (N×J float64,
rad, rad/s, N·m; NaN where unmeasured). ``so101_common.paired_dataset`` owns the format; this package
sits below it in the dependency order, so it reads the documented files directly and only the
fields training needs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["causal_velocity", "DatasetError", "Episode", "PairedDataset", "read_dataset", "write_dataset", "EPISODE_ARRAYS"]

EPISODE_ARRAYS: tuple[str, ...] = ("command", "real_position", "real_velocity", "real_effort",
                                   "sim_position", "sim_velocity", "sim_effort")
DATASET_SCHEMA_VERSION = 1


class DatasetError(ValueError):
    """A paired dataset folder is missing, malformed, or does not fit the training request."""


@dataclass(frozen=True)
class Episode:
    name: str
    time: np.ndarray  # (N,) s
    arrays: dict[str, np.ndarray]  # EPISODE_ARRAYS → (N, J)

    def __getitem__(self, key: str) -> np.ndarray:
        return self.arrays[key]


@dataclass(frozen=True)
class PairedDataset:
    path: Path
    rate_hz: float
    joints: tuple[str, ...]
    episodes: tuple[Episode, ...]
    info: dict[str, Any] = field(default_factory=dict)  # the dataset.json record

    @property
    def profile(self) -> str:
        """The gap profile the dataset was recorded or generated with ('' if not said)."""
        metadata = self.info.get("metadata")
        return str((metadata if isinstance(metadata, dict) else {}).get("profile", self.info.get("profile", "")))


def _first(record: dict[str, Any], keys: Sequence[str], what: str, path: Path) -> Any:
    for key in keys:
        if key in record:
            return record[key]
    raise DatasetError(f"{path}: dataset.json has no {what} (looked for {list(keys)})")


def causal_velocity(position: np.ndarray, time: np.ndarray) -> np.ndarray:
    """Backward-difference velocity (N×J): what a servo or the compensator can know at each sample."""
    velocity = np.zeros_like(position)
    velocity[1:] = np.diff(position, axis=0) / np.diff(time)[:, None]
    return velocity


def read_dataset(path: str | Path) -> PairedDataset:
    """Read a paired dataset folder; raises :class:`DatasetError` with the offending file."""
    root = Path(path)
    meta_path = root / "dataset.json"
    try:
        info = json.loads(meta_path.read_text())
    except FileNotFoundError as err:
        raise DatasetError(f"{root} is not a paired dataset (no dataset.json)") from err
    except (OSError, ValueError) as err:
        raise DatasetError(f"{meta_path}: cannot read: {err}") from err
    if not isinstance(info, dict):
        raise DatasetError(f"{meta_path}: expected a JSON object")
    if info.get("schema_version") != DATASET_SCHEMA_VERSION:
        raise DatasetError(f"{meta_path}: schema_version {info.get('schema_version')!r}, this reader knows {DATASET_SCHEMA_VERSION}")
    rate = float(_first(info, ("rate_hz", "rate"), "rate", meta_path))
    joints = tuple(str(j) for j in _first(info, ("joint_names", "joints"), "joint names", meta_path))
    listed = info.get("episodes")
    if listed:
        entries = [(e["name"], e.get("file")) if isinstance(e, dict) else (str(e), None) for e in listed]
    else:
        entries = [(p.stem, None) for p in sorted((root / "episodes").glob("*.npz"))]
    if not entries:
        raise DatasetError(f"{root}: no episodes")
    episodes = []
    for name, relative in entries:
        file = root / (relative or f"episodes/{name}.npz")
        try:
            with np.load(file) as npz:
                time = np.asarray(npz["time"], dtype=np.float64)
                arrays = {key: np.asarray(npz[key], dtype=np.float64) for key in EPISODE_ARRAYS if key in npz}
        except (OSError, ValueError, KeyError) as err:
            raise DatasetError(f"{file}: cannot read episode: {err}") from err
        for key in ("command", "real_position"):
            if key not in arrays:
                raise DatasetError(f"{file}: missing array {key!r}")
        for key, array in arrays.items():
            if array.shape != (len(time), len(joints)):
                raise DatasetError(f"{file}: {key} has shape {array.shape}, expected ({len(time)}, {len(joints)})")
        episodes.append(Episode(name, time, arrays))
    return PairedDataset(root, rate, joints, tuple(episodes), info)


def write_dataset(path: str | Path, rate_hz: float, joints: Sequence[str], episodes: Sequence[Episode],
                  extra: dict[str, Any] | None = None) -> Path:
    """Write a paired dataset folder in the documented layout (used for generated fixtures)."""
    root = Path(path)
    (root / "episodes").mkdir(parents=True, exist_ok=True)
    for episode in episodes:
        np.savez_compressed(root / "episodes" / f"{episode.name}.npz", time=episode.time, **episode.arrays)
    record = {
        "schema_version": DATASET_SCHEMA_VERSION,
        "format": "so101_sim2real.paired_dataset",
        "rate_hz": rate_hz,
        "joint_names": list(joints),
        "units": {"position": "rad", "velocity": "rad/s", "effort": "N*m", "time": "s"},
        "metadata": dict(extra or {}),
        "episodes": [{"name": e.name, "file": f"episodes/{e.name}.npz", "samples": len(e.time), "metadata": {}}
                     for e in episodes],
    }
    (root / "dataset.json").write_text(json.dumps(record, indent=2))
    return root
