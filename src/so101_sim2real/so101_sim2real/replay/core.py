"""Replay sources and outputs, and the command schedule of a live replay (no rclpy).

A replay source is a recorded command stream plus the real initial state the simulator must start
from: a bag (command topic, default ``/joint_command``; state topic for the initial state), a SAGE
motion file (50 Hz frames, starting from its first frame) or a SAGE real run folder (``control.csv``
from the measured state at the first command). Outputs: a rosbag2 (MCAP) bag written with the
recorder's writer from raw CDR, or a SAGE sim run folder.

:class:`ReplaySchedule` is the live side: which command is due at a given elapsed time, with an
extra first command that puts the simulator at the real initial state and a settle time before
the recorded stream starts.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rosbags.typesys import Stores, get_typestore

from so101_common import sage, topics
from so101_common.joints import JOINT_NAMES
from so101_common.recording_checks import check_recording
from so101_common.trajectory import JointTrajectory, measured_at
from so101_recorder.bag_reader import Bag, read_topic_pair
from so101_recorder.bag_writer import EpisodeWriter
from so101_recorder.errors import RecorderError
from so101_recorder.metadata import EpisodeMetadata

__all__ = [
    "ReplayError",
    "ReplaySource",
    "ReplaySchedule",
    "LiveReplay",
    "JOINT_STATE_TYPE",
    "load_bag_source",
    "load_motion_source",
    "load_sage_real_source",
    "joint_state_cdr",
    "write_replay_bag",
    "write_sage_sim_run",
    "write_sage_real_run",
]

_LOG = logging.getLogger(__name__)

JOINT_STATE_TYPE = "sensor_msgs/msg/JointState"
COMMAND_TOPIC = topics.absolute(topics.JOINT_COMMAND)
STATE_TOPIC = topics.absolute(topics.JOINT_STATES)
SIM_COMMAND_TOPIC = topics.SIM_COMMAND
SIM_STATE_TOPIC = topics.SIM_STATES


class ReplayError(ValueError):
    """A replay source or output that cannot be used (missing topic, empty stream, unwritable path)."""


@dataclass
class ReplaySource:
    """What to replay: a command stream on its own clock and the real state it started from."""

    name: str  # motion / episode name (bag stem, motion file stem, SAGE motion folder)
    command: JointTrajectory  # targets, rad, JOINT_NAMES order, strictly increasing times (s)
    initial_position: np.ndarray  # (J,) rad, the real arm's state at the first command
    metadata: dict[str, object] = field(default_factory=dict)  # where it came from (format, path, topics)

    def __post_init__(self) -> None:
        if len(self.command) == 0:
            raise ReplayError(f"{self.name}: the command stream is empty")
        self.command = self.command.reordered(JOINT_NAMES)
        self.initial_position = np.asarray(self.initial_position, dtype=np.float64).reshape(-1)
        if self.initial_position.shape != (len(JOINT_NAMES),) or not np.isfinite(self.initial_position).all():
            raise ReplayError(f"{self.name}: initial position must be {len(JOINT_NAMES)} finite values")


def _state_at(state: JointTrajectory, when: float) -> np.ndarray:
    """The measured position at ``when``, each joint from its finite readings (NaN for a joint without any)."""
    return measured_at(when, state.time, state.position)


def load_bag_source(path: str | Path, command_topic: str = COMMAND_TOPIC, state_topic: str = STATE_TOPIC) -> ReplaySource:
    """A recorded bag: its command stream, starting from the measured state (or the first command)."""
    path = Path(path)
    try:
        bag = Bag(path)
        command, state = read_topic_pair(bag, command_topic, state_topic)
    except RecorderError as err:
        raise ReplayError(str(err) if str(path) in str(err) else f"cannot read bag {path}: {err}") from err
    if bag.truncation:
        _LOG.warning("replaying only up to the cut: %s", bag.truncation)
    if len(command) == 0:
        raise ReplayError(f"bag {path}: topic {command_topic} holds no usable joint commands")
    check_recording(command.time, command.position, f"bag {path} {command_topic}", command.names, error=ReplayError)
    if state is not None:
        check_recording(state.time, state.position, f"bag {path} {state_topic}", state.names, allow_nan=True,
                        error=ReplayError)
    first = command.position[0]
    initial = _state_at(state, float(command.time[0])) if state is not None and len(state) else np.full_like(first, np.nan)
    unmeasured = ~np.isfinite(initial)
    if unmeasured.any():
        joints = "every joint" if unmeasured.all() else ", ".join(n for n, u in zip(command.names, unmeasured, strict=True) if u)
        _LOG.warning("bag %s has no measured state of %s on %s: starting it from the first command", path, joints,
                     state_topic)
        initial = np.where(unmeasured, first, initial)
    return ReplaySource(path.name, command, initial, {"format": "bag", "path": str(path), "truncated": bag.truncation,
                                                       "command_topic": command_topic, "state_topic": state_topic})


def load_motion_source(path: str | Path) -> ReplaySource:
    """A SAGE motion file (50 Hz frames from t = 0), starting at rest at its first frame."""
    try:
        command = sage.read_motion_file(path)
    except sage.SageFormatError as err:
        raise ReplayError(str(err)) from err
    if len(command) == 0:
        raise ReplayError(f"motion file {path} has no frames")
    return ReplaySource(Path(path).stem, command, command.position[0], {"format": "sage_motion", "path": str(path)})


def load_sage_real_source(folder: str | Path) -> ReplaySource:
    """A SAGE real run folder: its ``control.csv`` commands from the measured state at the first one."""
    try:
        run = sage.read_run(folder, kind="real")
        command, state = sage.run_to_trajectories(run)
    except sage.SageFormatError as err:
        raise ReplayError(str(err)) from err
    if len(command) == 0 or len(state) == 0:
        raise ReplayError(f"SAGE run {folder} has no commands or no measured states")
    return ReplaySource(Path(folder).name, command, _state_at(state, float(command.time[0])),
                        {"format": "sage_real", "path": str(folder)})


# ----------------------------------------------------------------------------------------------- outputs

_TYPESTORE = get_typestore(Stores.ROS2_JAZZY)


def joint_state_cdr(stamp: float, names: tuple[str, ...], position: np.ndarray,
                    velocity: np.ndarray | None = None, effort: np.ndarray | None = None) -> bytes:
    """One ``sensor_msgs/JointState`` as CDR bytes (NaN-only velocity/effort are left empty)."""
    types = _TYPESTORE.types
    sec = math.floor(stamp)
    nanosec = min(round((stamp - sec) * 1e9), 999_999_999)
    header = types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=int(sec), nanosec=nanosec),
                                          frame_id="")

    def array(values: np.ndarray | None) -> np.ndarray:
        if values is None or np.isnan(values).all():
            return np.empty(0, dtype=np.float64)
        return np.ascontiguousarray(values, dtype=np.float64)

    message = types[JOINT_STATE_TYPE](header=header, name=list(names), position=array(position),
                                      velocity=array(velocity), effort=array(effort))
    return bytes(_TYPESTORE.serialize_cdr(message, JOINT_STATE_TYPE))


def write_replay_bag(path: str | Path, source: ReplaySource, applied: JointTrajectory, state: JointTrajectory,
                     command_topic: str = SIM_COMMAND_TOPIC, state_topic: str = SIM_STATE_TOPIC,
                     robot_id: str = "mujoco_so101", notes: str = "") -> Path:
    """A sim bag: the applied commands and the simulated joint states, stamped on the source's clock; complete or
    absent (staged: written under a temporary name, renamed when finished)."""
    path = Path(path)
    if path.exists():
        raise ReplayError(f"output {path} already exists; choose a new path")
    metadata = EpisodeMetadata(name="", robot_id=robot_id, task=source.name, notes=notes)
    streams = [(float(t), command_topic, applied, i) for i, t in enumerate(applied.time)]
    streams += [(float(t), state_topic, state, i) for i, t in enumerate(state.time)]
    streams.sort(key=lambda item: (item[0], item[1]))
    try:
        with EpisodeWriter(path, metadata, staged=True) as writer:
            for stamp, topic, trajectory, index in streams:
                data = joint_state_cdr(stamp, trajectory.names, trajectory.position[index],
                                       trajectory.velocity[index], trajectory.effort[index])
                writer.write(topic, JOINT_STATE_TYPE, data, max(0, round(stamp * 1e9)))
    except RecorderError as err:
        raise ReplayError(f"cannot write sim bag {path}: {err}") from err
    return path


def write_sage_sim_run(folder: str | Path, applied: JointTrajectory, state: JointTrajectory) -> Path:
    """A SAGE ``output/sim/<robot>/<source>/<motion>/`` run folder; times shifted to start at 0 s as SAGE's sim."""
    folder = Path(folder)
    origin = float(applied.time[0])
    run = sage.run_from_trajectories(applied.shifted(-origin), state.shifted(-origin), "sim")
    sage.write_run(run, folder)
    return folder


def write_sage_real_run(folder: str | Path, command: JointTrajectory, state: JointTrajectory, start: float,
                        stop: float) -> Path:
    """A SAGE ``output/real/<robot>/<source>/<motion>/`` run folder from a recording between ``start`` and
    ``stop`` (s on the recording's clock): as SAGE's real runs, one state row per command, stamped alike
    (the state interpolated onto the command stamps), times in µs from ``start`` (CONTROL_MODE_ENABLE at 0,
    MOTION_START at the first command, DISABLE at ``stop``)."""
    command = command.slice_time(start, stop)
    if len(command) < 2 or len(state) < 2:
        raise ReplayError(f"{folder}: fewer than two commands or states between {start:.3f} and {stop:.3f} s")
    at = command.time
    columns = range(state.position.shape[1])
    on_commands = JointTrajectory(
        at, np.column_stack([np.interp(at, state.time, state.position[:, j]) for j in columns]),
        np.column_stack([np.interp(at, state.time, state.velocity[:, j]) for j in columns]),
        np.column_stack([np.interp(at, state.time, state.effort[:, j]) for j in columns]), state.names)
    events = [("CONTROL_MODE_ENABLE", 0.0), ("MOTION_START", float(at[0]) - start), ("DISABLE", stop - start)]
    run = sage.run_from_trajectories(command.shifted(-start), on_commands.shifted(-start), "real", events)
    sage.write_run(run, folder)
    return Path(folder)


# ----------------------------------------------------------------------------------------------- live schedule


@dataclass
class ReplaySchedule:
    """Which command a live replay sends at elapsed time ``t`` (s since it started).

    ``[0, settle_s)``: the real initial position (the sim is driven there first); then the recorded
    stream at its original timing, command ``k`` due at ``settle_s + (time[k] - time[0])``.
    """

    source: ReplaySource
    settle_s: float = 1.0  # s holding the initial position before the recorded stream starts

    def __post_init__(self) -> None:
        if not (math.isfinite(self.settle_s) and self.settle_s >= 0):
            raise ReplayError(f"settle_s must be >= 0, got {self.settle_s}")
        self._offsets = self.source.command.time - self.source.command.time[0] + self.settle_s

    @property
    def duration(self) -> float:
        """Elapsed time at which the last command is due."""
        return float(self._offsets[-1])

    def due(self, elapsed: float) -> tuple[int, np.ndarray]:
        """``(index, target)``: index −1 while settling (target = initial position), else the latest due command."""
        index = int(np.searchsorted(self._offsets, elapsed, side="right")) - 1
        if index < 0:
            return -1, self.source.initial_position
        return index, self.source.command.position[index]

    def finished(self, elapsed: float) -> bool:
        return elapsed >= self.duration


class LiveReplay:
    """A live replay: the schedule, which command to send now, and the sim bag it records into.

    Times are seconds on the replay node's clock (sim time with ``use_sim_time``). The node calls
    :meth:`start` once the simulator is up, :meth:`tick` on a timer (each due command is returned
    once), :meth:`record` for every message to keep, and :meth:`close` at the end.
    """

    def __init__(self, schedule: ReplaySchedule, out: str | Path, robot_id: str = "isaac_so101",
                 tail_s: float = 0.5) -> None:
        if Path(out).exists():
            raise ReplayError(f"output {out} already exists; choose a new path")
        self.schedule = schedule
        self.tail_s = tail_s  # s recorded after the last command, so the sim's response to it is kept
        self.writer = EpisodeWriter(out, EpisodeMetadata(name="", robot_id=robot_id, task=schedule.source.name,
                                                         notes=f"sim replay of {schedule.source.metadata}"),
                                    staged=True)  # the sim bag appears at `out` when the replay is complete
        self._start: float | None = None
        self._sent = -2  # index of the last command returned (-1: the initial-state command)

    @property
    def started(self) -> bool:
        return self._start is not None

    def start(self, now: float) -> None:
        try:
            self.writer.open()
        except RecorderError as err:
            raise ReplayError(f"cannot open sim bag: {err}") from err
        self._start = now

    def tick(self, now: float) -> list[np.ndarray]:
        """The targets to publish now, in order: each command once (the initial state first); none when idle.

        When the timer lags behind the stream, every command that fell due since the last tick is returned."""
        if self._start is None:
            return []
        index, _ = self.schedule.due(now - self._start)
        targets = [self.schedule.source.initial_position if k < 0 else self.schedule.source.command.position[k]
                   for k in range(max(self._sent + 1, -1), index + 1)]
        self._sent = max(self._sent, index)
        return targets

    def finished(self, now: float) -> bool:
        return self._start is not None and now - self._start >= self.schedule.duration + self.tail_s

    def record(self, topic: str, msgtype: str, data: bytes, stamp_ns: int) -> None:
        if self.writer.is_open:
            try:
                self.writer.write(topic, msgtype, data, stamp_ns)
            except RecorderError as err:
                raise ReplayError(f"cannot write sim bag: {err}") from err

    def close(self) -> Path:
        if self.writer.is_open:
            self.writer.close()
        return self.writer.path
