"""Read recorded bags fast: JointState topics straight into :class:`JointTrajectory`.

``Bag(path)`` opens an episode (the bag directory or its ``.mcap`` file). MCAP storage is read
with :mod:`so101_recorder.mcap_scan` (memory-mapped, no per-message Python work on intact chunks)
and JointState topics are decoded with :mod:`so101_recorder.cdr`; a bag without its footer (a
killed recorder) is read up to where its data ends and reported as truncated (``so101 record
--recover`` rewrites it into a complete bag). sqlite3 bags are read through rosbags.

Sample time is the message's header stamp (``time_source="header"``, default) or the recorder's
receive time (``"receive"``, the bag timestamp), in seconds since the epoch.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel
from rosbags.rosbag2 import Reader
from rosbags.rosbag2.errors import ReaderError

from so101_common import topics
from so101_common.joints import JOINT_NAMES
from so101_common.schema import SchemaError, read_yaml, validate
from so101_common.trajectory import JointTrajectory
from so101_recorder.cdr import JointStateBatch, decode_joint_states, pack_messages
from so101_recorder.errors import BagReadError, RecorderError
from so101_recorder.mcap_scan import McapScan, scan_mcap
from so101_recorder.metadata import EpisodeMetadata, load_episode
from so101_recorder.msgtypes import TypeLibrary

JOINT_STATES_TOPIC = topics.absolute(topics.JOINT_STATES)  # its name in a bag recorded without a namespace

__all__ = ["Bag", "RawMessages", "JointStateRead", "JOINT_STATE_TYPE", "read_joint_states", "load_joint_states",
           "read_episode", "read_topic_pair", "bag_files"]

LOG = logging.getLogger(__name__)
JOINT_STATE_TYPE = "sensor_msgs/msg/JointState"
TIME_SOURCES = ("header", "receive")


class Rosbag2FileInfo(BaseModel):
    """The part of rosbag2's ``metadata.yaml`` this reader uses. The format is rosbag2's, not ours, so
    keys it may add in later versions are ignored rather than refused."""

    relative_file_paths: list[str]
    storage_identifier: str = "mcap"


class Rosbag2Metadata(BaseModel):
    rosbag2_bagfile_information: Rosbag2FileInfo


@dataclass
class RawMessages:
    """One topic's serialized messages: ``buffer[starts[i]:starts[i] + lengths[i]]`` received at ``log_time[i]``."""

    topic: str
    msgtype: str
    log_time: np.ndarray  # int64 ns
    buffer: np.ndarray  # uint8
    starts: np.ndarray  # int64
    lengths: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.starts)

    def __iter__(self):
        for start, length in zip(self.starts.tolist(), self.lengths.tolist(), strict=True):
            yield self.buffer[start:start + length].tobytes()


@dataclass
class JointStateRead:
    """A JointState topic read into a trajectory, with what had to be left out and why."""

    topic: str
    trajectory: JointTrajectory
    messages: int = 0  # messages of the topic in the bag
    corrupt: int = 0  # not decodable as JointState: skipped
    malformed: int = 0  # decodable, but array lengths do not match the names (or names repeat): skipped
    dropped_time: int = 0  # samples whose time did not increase (duplicates, out of order): dropped
    missing_joints: tuple[str, ...] = ()  # requested joints no message carried (columns are NaN)
    truncated: bool = False  # the bag ended without its index (killed recorder): read up to the cut
    problems: list[str] = field(default_factory=list)

    @property
    def used(self) -> int:
        return len(self.trajectory)


def bag_files(path: Path | str) -> tuple[Path, list[Path], str]:
    """``(bag_dir, storage files, storage id)`` of a bag directory or a single ``.mcap`` file."""
    path = Path(path)
    if path.is_file():
        return path.parent, [path], "mcap" if path.suffix == ".mcap" else "sqlite3"
    if not path.is_dir():
        raise BagReadError(f"cannot read bag {path}: no such file or directory")
    meta = path / "metadata.yaml"
    if meta.is_file():
        try:
            info = validate(Rosbag2Metadata, read_yaml(meta), str(meta)).rosbag2_bagfile_information
            files = [path / name for name in info.relative_file_paths]
            if all(f.is_file() for f in files):
                return path, files, info.storage_identifier
        except SchemaError as err:
            LOG.warning("ignoring unreadable bag metadata (reading the .mcap files instead): %s", err)
    files = sorted(path.glob("*.mcap"))
    if files:
        return path, files, "mcap"
    if sorted(path.glob("*.db3")):
        raise BagReadError(f"cannot read sqlite3 bag {path} without its metadata.yaml")
    raise BagReadError(f"{path} holds no bag: no metadata.yaml and no .mcap file")


class Bag:
    """An episode bag opened for reading (see the module doc). Cheap to open; topics read on demand."""

    def __init__(self, path: Path | str) -> None:
        self.path, self.files, self.storage = bag_files(path)
        self.episode: EpisodeMetadata | None = load_episode(self.path)
        self.scans: list[McapScan] = [scan_mcap(f) for f in self.files] if self.storage == "mcap" else []
        self._types = TypeLibrary()

    @property
    def truncated(self) -> bool:
        return any(scan.truncated for scan in self.scans)

    @property
    def truncation(self) -> str | None:
        """One line saying where the bag is cut and how to rebuild it; None for a complete bag."""
        cut = [scan for scan in self.scans if scan.truncated]
        if not cut:
            return None
        where = "; ".join(_cut_position(scan) for scan in cut)
        return f"{self.path} is truncated at {where}; `so101 record --recover {self.path}` rebuilds it"

    @property
    def problems(self) -> list[str]:
        return [f"{scan.path.name}: {p}" for scan in self.scans for p in scan.problems]

    @property
    def topics(self) -> dict[str, str]:
        """Topic → ROS type."""
        if self.storage != "mcap":
            with self._rosbags() as reader:
                return {c.topic: c.msgtype for c in reader.connections}
        found: dict[str, str] = {}
        for scan in self.scans:
            for topic, msgtype in scan.topics().items():
                found.setdefault(topic, msgtype)
        return found

    def message_counts(self) -> dict[str, int]:
        return {topic: len(self.raw(topic)) for topic in self.topics}

    def raw(self, topic: str) -> RawMessages:
        """The serialized messages of ``topic`` in the order they were recorded."""
        msgtype = self.topics.get(topic)
        if msgtype is None:
            raise BagReadError(f"bag {self.path} has no topic {topic}; it has {sorted(self.topics)}")
        if self.storage != "mcap":
            with self._rosbags() as reader:
                connections = [c for c in reader.connections if c.topic == topic]
                items = [(t, bytes(d)) for _c, t, d in reader.messages(connections=connections)]
            buffer, starts, lengths = pack_messages([d for _t, d in items])
            return RawMessages(topic, msgtype, np.array([t for t, _d in items], np.int64), buffer, starts, lengths)
        parts = [(scan, scan.topic_messages(topic)) for scan in self.scans]
        parts = [(scan, found) for scan, found in parts if len(found)]
        if len(parts) == 1:
            scan, found = parts[0]
            return RawMessages(topic, msgtype, found.log_time, scan.buffer, found.starts, found.lengths)
        messages = [scan.data(s, n) for scan, found in parts for s, n in zip(found.starts, found.lengths, strict=True)]
        log_time = np.concatenate([found.log_time for _s, found in parts]) if parts else np.zeros(0, np.int64)
        return RawMessages(topic, msgtype, log_time, *pack_messages(messages))

    def joint_states(self, topic: str = JOINT_STATES_TOPIC, *, names: Sequence[str] | None = JOINT_NAMES,
                     time_source: str = "header") -> JointStateRead:
        """Decode a JointState topic into a trajectory in ``names`` order (None: the first message's order)."""
        if time_source not in TIME_SOURCES:
            raise RecorderError(f"time_source must be one of {TIME_SOURCES}, got {time_source!r}")
        if topic not in self.topics and self.truncated:  # the cut came before the topic's first message
            names = tuple(names or ())
            empty = JointTrajectory(np.zeros(0), np.zeros((0, len(names))), names=names)
            return JointStateRead(topic, empty, missing_joints=names, truncated=True,
                                  problems=[f"no {topic} message before the cut", *self.problems])
        raw = self.raw(topic)
        if raw.msgtype != JOINT_STATE_TYPE:
            raise BagReadError(f"topic {topic} in {self.path} is {raw.msgtype}, not {JOINT_STATE_TYPE}")
        batch = decode_joint_states(raw.buffer, raw.starts, raw.lengths)
        read = _to_trajectory(topic, batch, raw.log_time, names, time_source)
        read.truncated = self.truncated
        read.problems = batch.errors + self.problems + read.problems
        return read

    def deserialize(self, topic: str) -> list[tuple[int, Any]]:
        """``(receive time ns, message)`` for every message of ``topic``, through rosbags' generic decoder
        (for low-rate topics like ``/diagnostics``; use :meth:`joint_states` for joint states)."""
        raw = self.raw(topic)
        typestore = self._types.typestore
        if raw.msgtype not in typestore.fielddefs:
            self._register_from_bag(raw.msgtype)
        return [(int(t), typestore.deserialize_cdr(data, raw.msgtype)) for t, data in zip(raw.log_time, raw, strict=True)]

    def _register_from_bag(self, msgtype: str) -> None:
        for scan in self.scans:
            for schema in scan.schemas.values():
                if schema.name == msgtype and schema.encoding == "ros2msg":
                    self._types.register_definition(msgtype, schema.data.decode("utf-8"))
                    return
        self._types.definition(msgtype)

    def _rosbags(self) -> Reader:
        try:
            reader = Reader(self.path)
            reader.open()
        except (ReaderError, OSError) as err:
            raise BagReadError(f"cannot read bag {self.path}: {err}") from err
        return reader


def _cut_position(scan: McapScan) -> str:
    size = scan.path.stat().st_size
    if scan.stopped_at is None:  # the data ends cleanly but the summary and footer never came
        return f"the end of {scan.path.name} ({size} bytes, no footer: the recorder was stopped before closing it)"
    return f"byte {scan.stopped_at} of {size} of {scan.path.name}"


def _to_trajectory(topic: str, batch: JointStateBatch, log_time: np.ndarray, names: Sequence[str] | None,
                   time_source: str) -> JointStateRead:
    n = batch.count
    if names is None:
        names = batch.groups[0].layout.names if batch.groups else ()
    names = tuple(names)
    column = {name: j for j, name in enumerate(names)}
    out = [np.full((n, len(names)), np.nan) for _ in range(3)]
    usable = batch.valid
    problems: list[str] = []
    seen: set[str] = set()
    for group in batch.groups:
        layout = group.layout
        joints = len(layout.names)
        if len(set(layout.names)) != joints or any(c not in (0, joints) for c in layout.counts):
            usable[group.rows] = False
            problems.append(f"{len(group.rows)} messages with names {list(layout.names)} and array lengths "
                            f"{list(layout.counts)}: skipped")
            continue
        src = [i for i, name in enumerate(layout.names) if name in column]
        dst = [column[layout.names[i]] for i in src]
        seen.update(layout.names[i] for i in src)
        for target, values, count in zip(out, (group.position, group.velocity, group.effort), layout.counts, strict=True):
            if count and src:
                target[np.ix_(group.rows, np.asarray(dst))] = values[:, src]
    malformed = int(n - len(batch.corrupt) - usable.sum())
    if time_source == "header":
        time = batch.sec.astype(np.float64) + batch.nanosec.astype(np.float64) * 1e-9
    else:
        time = log_time.astype(np.float64) * 1e-9
    rows = np.flatnonzero(usable)
    rows = rows[np.argsort(time[rows], kind="stable")]
    keep = np.ones(len(rows), dtype=bool)
    if len(rows) > 1:
        keep[1:] = np.diff(time[rows]) > 0
    rows = rows[keep]
    trajectory = JointTrajectory(time[rows], out[0][rows], out[1][rows], out[2][rows], names)
    missing = tuple(name for name in names if name not in seen)
    dropped = int((~keep).sum())
    if dropped:
        problems.append(f"{dropped} samples whose {time_source} time did not increase: dropped")
    return JointStateRead(topic, trajectory, messages=n, corrupt=len(batch.corrupt), malformed=malformed,
                          dropped_time=dropped, missing_joints=missing, problems=problems)


def load_joint_states(bag: Bag | Path | str, topic: str = JOINT_STATES_TOPIC, *, names: Sequence[str] | None = JOINT_NAMES,
                      time_source: str = "header") -> JointStateRead:
    """Read a JointState topic with its report (counts of what was skipped, truncation)."""
    bag = bag if isinstance(bag, Bag) else Bag(bag)
    return bag.joint_states(topic, names=names, time_source=time_source)


def read_joint_states(bag: Bag | Path | str, topic: str = JOINT_STATES_TOPIC, *, names: Sequence[str] | None = JOINT_NAMES,
                      time_source: str = "header") -> JointTrajectory:
    """A JointState topic as a :class:`JointTrajectory` (s, rad, rad/s, N·m; NaN where not measured).

    Skipped messages and truncation are logged as warnings; use :func:`load_joint_states` for the counts.
    """
    read = load_joint_states(bag, topic, names=names, time_source=time_source)
    if read.truncated or read.corrupt or read.malformed or read.dropped_time or read.missing_joints:
        LOG.warning("%s: %d of %d messages used (corrupt %d, malformed %d, time not increasing %d)%s%s",
                    topic, read.used, read.messages, read.corrupt, read.malformed, read.dropped_time,
                    f"; no data for {list(read.missing_joints)}" if read.missing_joints else "",
                    "; bag is truncated (recorder killed?)" if read.truncated else "")
    return read.trajectory


def read_episode(bag: Bag | Path | str, *, names: Sequence[str] | None = JOINT_NAMES,
                 time_source: str = "header") -> dict[str, JointTrajectory]:
    """Every JointState topic of a bag (measured state, leader, the command chain) as trajectories."""
    bag = bag if isinstance(bag, Bag) else Bag(bag)
    return {topic: read_joint_states(bag, topic, names=names, time_source=time_source)
            for topic, msgtype in bag.topics.items() if msgtype == JOINT_STATE_TYPE}


def read_topic_pair(path: Bag | Path | str, required: str, optional: str, *, names: Sequence[str] | None = JOINT_NAMES,
                    ) -> tuple[JointTrajectory, JointTrajectory | None]:
    """Two JointState topics of one bag: ``required`` (a :class:`BagReadError` naming the topics the
    bag does have when it is absent, or where it is cut when it is truncated before that topic) and
    ``optional`` (``None`` when absent), e.g. states + commands. A truncated bag is read up to the cut:
    check :attr:`Bag.truncation` (pass a :class:`Bag` to keep it)."""
    bag = path if isinstance(path, Bag) else Bag(path)
    topics = bag.topics
    if required not in topics:
        if bag.truncation:
            raise BagReadError(f"no {required} message before the cut: {bag.truncation}")
        raise BagReadError(f"bag {bag.path} has no topic {required}; it has {sorted(topics)}")
    first = read_joint_states(bag, required, names=names)
    second = read_joint_states(bag, optional, names=names) if optional in topics else None
    return first, second
