"""Paired real/sim datasets: a folder with ``dataset.json`` and ``episodes/<name>.npz``.

The one implementation of the format: ``so101 pair`` writes it, ``so101 analyze`` and GapONet
training read it. Every episode sits on one fixed-rate grid; arrays are (N, 6) float64 in
:data:`JOINT_NAMES` order, rad / rad·s⁻¹ / N·m, NaN where a side did not measure a quantity.
``dataset.json`` is validated by :class:`DatasetIndex` (pydantic, unknown keys refused), so a bad
index is one :class:`DatasetError` line naming the file and the key. :func:`format_markdown` documents the
layout from these definitions (``so101_common``'s README); bump :data:`SCHEMA_VERSION` whenever it changes.
"""

from __future__ import annotations

import json
import logging
import math
import re
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator

from so101_common.atomic_output import staged_folder
from so101_common.joints import JOINT_NAMES
from so101_common.schema import SchemaError, StrictModel, load_json, validate

__all__ = [
    "SCHEMA_VERSION",
    "FORMAT",
    "ARRAY_KEYS",
    "UNITS",
    "DatasetError",
    "DatasetIndex",
    "EpisodeEntry",
    "FaultSpan",
    "PairedEpisode",
    "PairedDataset",
    "format_markdown",
]

_LOG = logging.getLogger(__name__)

SCHEMA_VERSION: Literal[1] = 1
FORMAT = "so101_sim2real.paired_dataset"  # the value of dataset.json's "format" (kept from schema version 1)
ARRAY_KEYS: tuple[str, ...] = (
    "command",
    "real_position",
    "real_velocity",
    "real_effort",
    "sim_position",
    "sim_velocity",
    "sim_effort",
)
ARRAY_MEANINGS: dict[str, str] = {
    "time": "seconds from the episode's start, strictly increasing, one fixed-rate grid",
    "command": "the commanded position the sim was driven with (the recording's command topic)",
    "real_position": "the real arm's measured position",
    "real_velocity": "the real arm's measured velocity (NaN where not measured)",
    "real_effort": "the real arm's effort (NaN where not measured)",
    "sim_position": "the simulated arm's position",
    "sim_velocity": "the simulated arm's velocity",
    "sim_effort": "the simulated arm's effort",
}
UNITS: dict[str, str] = {
    "time": "s",
    "command": "rad",
    "real_position": "rad",
    "real_velocity": "rad/s",
    "real_effort": "N*m",
    "sim_position": "rad",
    "sim_velocity": "rad/s",
    "sim_effort": "N*m",
}
_NAME_PATTERN = r"^[A-Za-z0-9_.-]+$"
_NAME_RE = re.compile(_NAME_PATTERN)


class DatasetError(ValueError):
    """A paired dataset is missing, corrupt, of another schema, or an episode is inconsistent."""


class FaultSpan(StrictModel):
    """A servo fault seen while an episode was recorded (episode metadata ``faults``: a list of these).

    Faults are not gaps: pairing keeps the samples, reports mark the span, training leaves it out.
    ``start``/``end`` are seconds on the episode's time axis; ``end`` None = until the episode ended.
    """

    joint: str = Field(description='joint name, or "bus" for a fault of the bus as a whole')
    fault: str = Field(description="what the servo or driver reported: overload, overheat, voltage, lost, ...")
    start: float = Field(description="s on the episode's time axis")
    end: float | None = Field(None, description="s on the episode's time axis; null: until the episode ended")
    message: str = Field("", description="the report's text")


class EpisodeEntry(StrictModel):
    """One episode in ``dataset.json``."""

    name: str = Field(pattern=_NAME_PATTERN, description="the episode's name: letters, digits, _ . -")
    file: str = Field(description="its arrays, relative to the dataset folder: episodes/<name>.npz")
    samples: int = Field(ge=2, description="samples on its time grid (every array's length)")
    metadata: dict[str, Any] = Field(default_factory=dict, description="sources, motion, robot id, clock fit; "
                                     "faults: a list of fault spans; truncated: one line per input bag that was cut")


class DatasetIndex(StrictModel):
    """``dataset.json``: what the folder holds and in which units."""

    schema_version: Literal[1] = Field(description="1 (another version is refused: re-pair the recordings)")
    format: Literal["so101_sim2real.paired_dataset"] = Field(description="so101_sim2real.paired_dataset")
    rate_hz: float = Field(gt=0, description="rate of every episode's time grid (Hz)")
    joint_names: tuple[str, ...] = Field(description="the column order of every array: the joint spec's names")
    units: dict[str, str] = Field(description="each array's unit (the table below)")
    metadata: dict[str, Any] = Field(default_factory=dict, description="dataset-wide notes: tool, sources, ...")
    episodes: list[EpisodeEntry] = Field(description="the episodes, each an object as below")

    @field_validator("joint_names")
    @classmethod
    def _joint_spec_order(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if value != JOINT_NAMES:
            raise ValueError(f"must be the joint spec's {list(JOINT_NAMES)}")
        return value

    @field_validator("units")
    @classmethod
    def _documented_units(cls, value: dict[str, str]) -> dict[str, str]:
        if value != UNITS:
            raise ValueError(f"must be {UNITS}")
        return value

    @field_validator("episodes")
    @classmethod
    def _unique_names(cls, value: list[EpisodeEntry]) -> list[EpisodeEntry]:
        names = [e.name for e in value]
        if len(set(names)) != len(names):
            raise ValueError(f"episode names must be unique, got {names}")
        return value


@dataclass
class PairedEpisode:
    """One motion, real and sim side by side on one time grid."""

    name: str  # file stem under episodes/ (letters, digits, _ . -)
    time: np.ndarray  # (N,) s from the episode start, strictly increasing
    command: np.ndarray  # (N, J) commanded position, rad
    real_position: np.ndarray  # (N, J) rad
    real_velocity: np.ndarray  # (N, J) rad/s, NaN where unmeasured
    real_effort: np.ndarray  # (N, J) N·m, NaN where unmeasured
    sim_position: np.ndarray  # (N, J) rad
    sim_velocity: np.ndarray  # (N, J) rad/s
    sim_effort: np.ndarray  # (N, J) N·m
    metadata: dict[str, Any] = field(default_factory=dict)  # JSON-able: sources, motion, robot id, clock fit, …

    def __post_init__(self) -> None:
        if not _NAME_RE.match(self.name):
            raise DatasetError(f"episode name {self.name!r} must use only letters, digits, '_', '.', '-'")
        self.time = np.asarray(self.time, dtype=np.float64).reshape(-1)
        n = len(self.time)
        if n < 2 or not np.all(np.diff(self.time) > 0):
            raise DatasetError(f"episode {self.name}: time must hold at least 2 strictly increasing samples")
        for key in ARRAY_KEYS:
            value = np.asarray(getattr(self, key), dtype=np.float64)
            if value.shape != (n, len(JOINT_NAMES)):
                raise DatasetError(f"episode {self.name}: {key} has shape {value.shape}, expected ({n}, {len(JOINT_NAMES)})")
            setattr(self, key, value)
        try:
            json.dumps(self.metadata, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise DatasetError(f"episode {self.name}: metadata must be plain JSON (no NaN): {err}") from err

    def __len__(self) -> int:
        return len(self.time)

    def faults(self) -> list[FaultSpan]:
        """The fault spans in ``metadata["faults"]`` (validated; an empty list when there are none)."""
        raw = self.metadata.get("faults", [])
        try:
            return [validate(FaultSpan, span, f"episode {self.name}: metadata faults[{i}]") for i, span in enumerate(raw)]
        except SchemaError as err:
            raise DatasetError(str(err)) from None

    def fault_mask(self) -> np.ndarray:
        """(N,) bool, True on samples inside any fault span (what training leaves out)."""
        mask = np.zeros(len(self.time), dtype=bool)
        for span in self.faults():
            end = math.inf if span.end is None else span.end
            mask |= (self.time >= span.start) & (self.time <= end)
        return mask

    def arrays(self) -> dict[str, np.ndarray]:
        """``time`` and every array in :data:`ARRAY_KEYS`, as stored in the episode's npz."""
        return {"time": self.time} | {key: getattr(self, key) for key in ARRAY_KEYS}

    def side(self, side: str, quantity: str) -> np.ndarray:
        """``side`` in (real, sim), ``quantity`` in (position, velocity, effort)."""
        return getattr(self, f"{side}_{quantity}")


@dataclass
class PairedDataset:
    """Episodes sharing one rate and joint order; ``save``/``load`` to a folder."""

    rate_hz: float  # grid rate of every episode
    episodes: list[PairedEpisode] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)  # dataset-wide notes (tool, created from, …)
    joint_names: tuple[str, ...] = JOINT_NAMES  # column order of every array
    path: Path | None = field(default=None, compare=False)  # the folder it was loaded from or saved to

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate_hz) and self.rate_hz > 0):
            raise DatasetError(f"rate_hz must be positive, got {self.rate_hz}")
        if tuple(self.joint_names) != JOINT_NAMES:
            raise DatasetError(f"joint_names must be {list(JOINT_NAMES)}, got {list(self.joint_names)}")
        names = [e.name for e in self.episodes]
        if len(set(names)) != len(names):
            raise DatasetError(f"episode names must be unique, got {names}")

    def __iter__(self) -> Iterator[PairedEpisode]:
        return iter(self.episodes)

    def __len__(self) -> int:
        return len(self.episodes)

    def episode(self, name: str) -> PairedEpisode:
        for episode in self.episodes:
            if episode.name == name:
                return episode
        raise DatasetError(f"no episode {name!r}; have {[e.name for e in self.episodes]}")

    def add(self, episode: PairedEpisode) -> None:
        if any(e.name == episode.name for e in self.episodes):
            raise DatasetError(f"episode {episode.name!r} already in the dataset")
        self.episodes.append(episode)

    # ------------------------------------------------------------------------------------------- files

    def save(self, path: str | Path) -> Path:
        """Write ``dataset.json`` and ``episodes/<name>.npz``: complete or absent (written under a temporary
        name, published when all is written, the index last: :func:`so101_common.atomic_output.staged_folder`)."""
        path = Path(path)
        with staged_folder(path, marker="dataset.json") as staging:
            self._write(staging)
        self.path = path
        _LOG.info("wrote %d episodes to %s", len(self.episodes), path)
        return path

    def _write(self, path: Path) -> None:
        (path / "episodes").mkdir(parents=True, exist_ok=True)
        for episode in self.episodes:
            np.savez_compressed(path / "episodes" / f"{episode.name}.npz", allow_pickle=False, **episode.arrays())
        index = DatasetIndex(
            schema_version=SCHEMA_VERSION,
            format=FORMAT,
            rate_hz=self.rate_hz,
            joint_names=self.joint_names,
            units=UNITS,
            metadata=self.metadata,
            episodes=[EpisodeEntry(name=e.name, file=f"episodes/{e.name}.npz", samples=len(e), metadata=e.metadata)
                      for e in self.episodes],
        )
        (path / "dataset.json").write_text(json.dumps(index.model_dump(mode="json"), indent=2, allow_nan=False) + "\n")

    @classmethod
    def load(cls, path: str | Path, episodes: Sequence[str] | None = None) -> PairedDataset:
        """Read a dataset folder (all episodes, or those named)."""
        path = Path(path)
        index_path = path / "dataset.json"
        if not index_path.is_file():
            raise DatasetError(f"{path} is not a paired dataset: {index_path} is missing")
        try:
            index = load_json(index_path, DatasetIndex)
        except SchemaError as err:
            raise DatasetError(str(err)) from None
        entries = index.episodes
        if episodes is not None:
            wanted = set(episodes)
            unknown = wanted - {e.name for e in entries}
            if unknown:
                raise DatasetError(f"{index_path}: episodes: no episodes {sorted(unknown)}")
            entries = [e for e in entries if e.name in wanted]
        loaded = [_load_episode(path, entry) for entry in entries]
        return cls(rate_hz=index.rate_hz, episodes=loaded, metadata=dict(index.metadata),
                   joint_names=index.joint_names, path=path)


def _load_episode(root: Path, entry: EpisodeEntry) -> PairedEpisode:
    file = root / entry.file
    if not file.is_file():
        raise DatasetError(f"episode {entry.name!r}: {file} is missing")
    try:
        with np.load(file, allow_pickle=False) as data:
            arrays = {key: np.array(data[key]) for key in ("time", *ARRAY_KEYS)}
    except KeyError as err:
        raise DatasetError(f"episode {entry.name!r}: {file} lacks array {err}") from err
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        raise DatasetError(f"episode {entry.name!r}: {file} is corrupt: {err}") from err
    episode = PairedEpisode(name=entry.name, metadata=dict(entry.metadata), **arrays)
    if len(episode) != entry.samples:
        raise DatasetError(f"episode {entry.name!r}: {file} holds {len(episode)} samples, dataset.json says {entry.samples}")
    return episode


def format_markdown() -> str:
    """The format's reference tables (``dataset.json``, an episode entry, a fault span, the npz arrays), generated
    from the definitions above so the documentation cannot drift from the code."""
    blocks = []
    for title, model in (("`dataset.json`", DatasetIndex), ("an entry of `episodes`", EpisodeEntry),
                         ("a span of an episode's `metadata.faults`", FaultSpan)):
        lines = [f"**{title}**", "", "| key | meaning |", "|---|---|"]
        lines += [f"| `{name}` | {info.description} |" for name, info in model.model_fields.items()]
        blocks.append("\n".join(lines))
    shape = f"(N, {len(JOINT_NAMES)}) float64 in `joint_names` order"
    lines = ["**`episodes/<name>.npz`**", "", "| array | unit | meaning |", "|---|---|---|",
             f"| `time` | {UNITS['time']} | (N,) float64, {ARRAY_MEANINGS['time']} |"]
    lines += [f"| `{key}` | {UNITS[key]} | {shape}: {ARRAY_MEANINGS[key]} |" for key in ARRAY_KEYS]
    blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
