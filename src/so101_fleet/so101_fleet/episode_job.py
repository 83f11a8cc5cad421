"""One episode through the pipeline: read the bag → replay its commands in simulation → pair → analyse.

:func:`process_episode` is what a Ray task (or the in-process loop) runs for one catalogue row. It
holds one episode in memory at a time and writes its results under ``OUT/episodes/<robot_id>/<name>/``:
a one-episode paired dataset (``dataset.json`` + ``episodes/<name>.npz``, the format of ``so101 pair``)
and, last, ``summary.json`` (the gap summary of ``so101 analyze`` plus the episode's fleet fields).
``summary.json`` is the "done" mark: it is written atomically after everything else, so a rerun skips
exactly the episodes that finished, and a worker killed mid-episode leaves no mark.

Bad input never raises: the outcome says what was wrong (:data:`ERROR_KINDS`), and the run report
collects it. Checks made before pairing: a duplicate of another catalogued episode, a bag that
cannot be read, a bag without the state or the command stream, joint names that are not the
SO-101's, and clock jumps (header stamps that go backwards, or jump forward while the bag's receive
times do not). A truncated bag (recorder killed) is paired from what its complete chunks hold, with
a warning.
"""

from __future__ import annotations

import json
import math
import os
import resource
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from so101_common import topics
from so101_common.joints import JOINT_NAMES
from so101_fleet.recorder_adapter import Bag, BagReadError, JointStateRead, RecorderError
from so101_fleet.sim2real_adapter import PIPELINE_ERRORS, gap_summary, pair_with_mujoco

__all__ = ["ProcessConfig", "EpisodeTask", "EpisodeOutcome", "ERROR_KINDS", "SUMMARY_FILE", "process_episode",
           "episode_dir", "is_done"]

SUMMARY_FILE = "summary.json"
SUMMARY_FORMAT = "so101_fleet.episode_summary/1"
ERROR_KINDS: dict[str, str] = {
    "duplicate": "the same episode is catalogued under another path (processed there)",
    "unreadable": "the bag cannot be read (not MCAP, truncated before any message, I/O error)",
    "no_state": "the bag has no measured joint states",
    "no_commands": "the bag has no command stream to replay",
    "unknown_joints": "joint names that are not the SO-101's",
    "clock_jump": "header stamps go backwards or jump while the receive times do not",
    "unpairable": "replay, alignment or metrics failed on the data",
    "worker_died": "the worker process running the episode died (killed, out of memory)",
    "internal": "an unexpected error in the pipeline (a bug: please report it with the episode)",
}
_JUMP_S = 1.0  # a forward step of the header stamps above this is checked against the receive times


@dataclass(frozen=True)
class ProcessConfig:
    sim: str = "mujoco"
    rate_hz: float = 50.0  # grid of the paired datasets
    state_topic: str = topics.absolute(topics.JOINT_STATES)
    command_topic: str = topics.absolute(topics.JOINT_COMMAND)

    def __post_init__(self) -> None:
        if self.sim != "mujoco":
            raise ValueError(f"--sim {self.sim!r}: the fleet pipeline replays in the built-in MuJoCo only "
                             "(Isaac Sim runs one episode at a time through its ROS 2 bridge: so101 replay --sim isaac)")
        if not (math.isfinite(self.rate_hz) and self.rate_hz > 0):
            raise ValueError(f"rate must be positive, got {self.rate_hz}")


@dataclass(frozen=True)
class EpisodeTask:
    """What a worker needs of a catalogue row."""

    episode_id: str
    path: str
    robot_id: str
    name: str
    task: str = ""
    start_time_ns: int | None = None
    truncated: bool = False
    duplicate_of: str | None = None


@dataclass
class EpisodeOutcome:
    episode_id: str
    status: str  # "done", "skipped" (done before), "error"
    kind: str | None = None  # one of ERROR_KINDS when status is "error"
    message: str = ""
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0  # wall time of the episode's work in the worker
    worker_peak_rss_mb: float | None = None  # the worker process's peak resident memory so far
    worker_pid: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _EpisodeError(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def episode_dir(out_root: Path | str, task: EpisodeTask) -> Path:
    return Path(out_root) / "episodes" / (task.robot_id or "unknown") / task.name


def is_done(out_root: Path | str, task: EpisodeTask) -> bool:
    return (episode_dir(out_root, task) / SUMMARY_FILE).is_file()


def process_episode(task: EpisodeTask, out_root: str, config: ProcessConfig) -> EpisodeOutcome:
    """Replay, pair and analyse one episode; never raises for bad data (see the module doc)."""
    start = time.perf_counter()
    outcome = EpisodeOutcome(task.episode_id, "done", worker_pid=os.getpid())
    try:
        if task.duplicate_of:
            raise _EpisodeError("duplicate", f"duplicate of {task.duplicate_of}")
        if is_done(out_root, task):
            outcome.status = "skipped"
        else:
            _run(task, Path(out_root), config, outcome)
    except _EpisodeError as err:
        outcome.status, outcome.kind, outcome.message = "error", err.kind, str(err)
    except PIPELINE_ERRORS as err:
        outcome.status, outcome.kind, outcome.message = "error", "unpairable", str(err)
    except (RecorderError, OSError) as err:
        outcome.status, outcome.kind, outcome.message = "error", "unreadable", str(err)
    except Exception as err:  # one episode's bug must not end the fleet's run: reported as internal
        outcome.status, outcome.kind, outcome.message = "error", "internal", f"{type(err).__name__}: {err}"
    outcome.seconds = time.perf_counter() - start
    outcome.worker_peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return outcome


def _run(task: EpisodeTask, out_root: Path, config: ProcessConfig, outcome: EpisodeOutcome) -> None:
    try:
        bag = Bag(task.path)
        topics = bag.topics
    except BagReadError as err:
        raise _EpisodeError("unreadable", str(err)) from err
    if config.state_topic not in topics:
        raise _EpisodeError("no_state", f"no {config.state_topic} in the bag (topics: {sorted(topics)})")
    if config.command_topic not in topics:
        raise _EpisodeError("no_commands", f"no {config.command_topic} in the bag (topics: {sorted(topics)})")
    state = _read(bag, config.state_topic)
    command = _read(bag, config.command_topic)
    if bag.truncated:
        outcome.warnings.append(f"truncated bag: paired from the {state.used} state samples its complete chunks hold")
    _check_clock(bag, config.state_topic, state)
    metadata = {"format": "bag", "path": task.path, "state_topic": config.state_topic,
                "command_topic": config.command_topic, "effort_unsigned": False}
    faults = bag.episode.faults if bag.episode is not None else []
    dataset = pair_with_mujoco(task.name, state.trajectory, command.trajectory, config.rate_hz, metadata, faults)
    target = episode_dir(out_root, task)
    dataset.metadata.update({"created_by": "so101 fleet process", "episode_id": task.episode_id,
                             "robot_id": task.robot_id})
    dataset.save(target)
    summary = gap_summary(dataset, target)
    summary.update({"fleet_format": SUMMARY_FORMAT, "episode_id": task.episode_id, "robot_id": task.robot_id,
                    "task": task.task, "start_time_ns": task.start_time_ns, "bag": task.path,
                    "warnings": outcome.warnings})
    tmp = target / (SUMMARY_FILE + ".tmp")
    tmp.write_text(json.dumps(summary, indent=1, allow_nan=False))
    tmp.replace(target / SUMMARY_FILE)


def _read(bag: Bag, topic: str) -> JointStateRead:
    read = bag.joint_states(topic, names=JOINT_NAMES)
    if read.missing_joints:
        found = bag.joint_states(topic, names=None).trajectory.names
        unknown = sorted(set(found) - set(JOINT_NAMES))
        raise _EpisodeError("unknown_joints", f"{topic}: joint names {unknown or list(found)} are not the SO-101's "
                                              f"{list(JOINT_NAMES)} (missing {list(read.missing_joints)})")
    if read.used < 2:
        raise _EpisodeError("unreadable", f"{topic}: {read.used} usable messages of {read.messages}")
    return read


def _check_clock(bag: Bag, topic: str, read: JointStateRead) -> None:
    if read.dropped_time:
        raise _EpisodeError("clock_jump", f"{topic}: {read.dropped_time} header stamps went backwards or repeated")
    stamps = read.trajectory.time
    steps = np.diff(stamps)
    jump = int(np.argmax(steps))
    if steps[jump] <= _JUMP_S:
        return
    received = bag.joint_states(topic, names=JOINT_NAMES, time_source="receive").trajectory.time
    if len(received) == len(stamps) and received[jump + 1] - received[jump] > 0.5 * steps[jump]:
        return  # the receive times jump too: a gap in the stream, not in the clock
    raise _EpisodeError("clock_jump", f"{topic}: header stamps jump by {steps[jump]:.3f} s at "
                                      f"{stamps[jump] - stamps[0]:.3f} s into the episode, the receive times do not")
