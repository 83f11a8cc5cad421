"""Pairing real and sim runs (bags, SAGE folders, or the built-in MuJoCo) into a paired dataset.

The real input is a bag, one SAGE real run folder, or a SAGE root holding many (every motion becomes
one episode). The sim input is a bag, a SAGE sim folder/root (motions matched by name), or
``mujoco``: the in-process MuJoCo backend replays each real command stream from the real initial
state. ``so101 pair`` (:mod:`so101_sim2real.cli.pair`) and the demo call :func:`pair_inputs` /
:func:`pair_runs`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from so101_common import sage, topics
from so101_common.paired_dataset import FaultSpan, PairedDataset, PairedEpisode
from so101_common.servo_faults import format_fault
from so101_common.trajectory import JointTrajectory, measured_at
from so101_sim2real.pairing.align import AlignConfig, AlignmentError, ClockFit, align_episode

if TYPE_CHECKING:
    from so101_sim2real.replay.mujoco_backend import MujocoSim

__all__ = ["MUJOCO", "Run", "PairError", "load_runs", "pair_runs", "pair_inputs", "mujoco_replayer"]

_LOG = logging.getLogger(__name__)
MUJOCO = "mujoco"


class PairError(ValueError):
    """Inputs that cannot be paired: unknown format, missing topics or motions."""


@dataclass
class Run:
    """One recorded run on its own clock, in SI units and the one joint order."""

    name: str  # motion name (SAGE folder) or bag stem
    state: JointTrajectory  # measured positions / velocities / efforts
    command: JointTrajectory | None  # commanded positions, if recorded
    window: tuple[float, float] | None = None  # part to keep on this run's clock (SAGE: MOTION_START..DISABLE)
    metadata: dict[str, Any] = field(default_factory=dict)  # provenance for the episode's metadata
    faults: list[FaultSpan] = field(default_factory=list)  # servo faults while it ran, on this run's clock


def load_runs(path: str | Path, kind: str, state_topic: str, command_topic: str) -> list[Run]:
    """A bag or SAGE folder/root → runs (one per motion)."""
    path = Path(path)
    if not path.exists():
        raise PairError(f"{kind} input {path} does not exist")
    if path.suffix == ".mcap" or (path / "metadata.yaml").is_file() or any(path.glob("*.mcap")):
        return [_load_bag(path, kind, state_topic, command_topic)]
    try:
        folders = sage.list_motion_runs(path)
    except sage.SageFormatError as err:
        raise PairError(f"{path} is neither a bag nor a SAGE run folder: {err}") from err
    return [_load_sage(folder, kind) for folder in folders]


def pair_runs(real_runs: list[Run], sim: list[Run] | Callable[[Run], tuple[Run, ClockFit]],
              config: AlignConfig, progress: bool = True) -> PairedDataset:
    """Pair each real run with its sim run (same name, or the only one) or with a simulated replay."""
    dataset = PairedDataset(rate_hz=config.rate_hz, metadata={"created_by": "so101 pair"})
    by_name = {} if callable(sim) else {r.name: r for r in sim}
    for real in tqdm(real_runs, desc="pairing", unit="episode", disable=not progress or len(real_runs) < 2):
        clock = None
        if callable(sim):
            sim_run, clock = sim(real)
        elif len(by_name) == 1 and len(real_runs) == 1:
            sim_run = next(iter(by_name.values()))
        elif real.name in by_name:
            sim_run = by_name[real.name]
        else:
            raise PairError(f"no sim run for motion {real.name!r}; sim has {sorted(by_name)}")
        metadata = {"motion": real.name, "real": real.metadata, "sim": sim_run.metadata,
                    "truncated": [f"{side}: {note}" for side, run in (("real", real), ("sim", sim_run))
                                  if (note := run.metadata.get("truncated"))]}
        for note in metadata["truncated"]:
            _LOG.warning("motion %s: %s", real.name, note)
        metadata["real_effort_unsigned"] = bool(real.metadata.get("effort_unsigned"))
        prior = None
        if real.window is not None and sim_run.metadata.get("format") == "sage":
            # a SAGE sim run starts its clock at the motion start: that is the real MOTION_START
            prior = real.window[0] - float((sim_run.command if sim_run.command is not None else sim_run.state).time[0])
        try:
            episode = align_episode(_episode_name(real.name), real.state, sim_run.state, real.command,
                                    sim_run.command, config, real.window, clock, metadata, prior)
        except AlignmentError as err:
            raise PairError(f"motion {real.name}: {err}") from err
        _mark_faults(episode, real.faults)
        dataset.add(episode)
    return dataset


def pair_inputs(real: str | Path, sim: str | Path, config: AlignConfig, real_topic: str = topics.absolute(topics.JOINT_STATES),
                command_topic: str = topics.absolute(topics.JOINT_COMMAND), sim_topic: str = topics.SIM_STATES,
                sim_command_topic: str = topics.SIM_COMMAND, progress: bool = True) -> PairedDataset:
    """Pair the runs under ``real`` with those under ``sim`` (a bag, a SAGE folder/root, or :data:`MUJOCO`)."""
    real_runs = load_runs(real, "real", real_topic, command_topic)
    if str(sim) == MUJOCO:
        sim_runs: list[Run] | Callable[[Run], tuple[Run, ClockFit]] = mujoco_replayer()
    else:
        sim_runs = load_runs(Path(sim), "sim", sim_topic, sim_command_topic)
    dataset = pair_runs(real_runs, sim_runs, config, progress)
    dataset.metadata.update({"real": str(real), "sim": str(sim)})
    return dataset


# ----------------------------------------------------------------------------------------------- helpers


def _load_sage(folder: Path, kind: str) -> Run:
    recording = sage.read_run(folder, kind=kind)
    command, state = sage.run_to_trajectories(recording)
    start, stop = recording.event_time("MOTION_START"), recording.event_time("DISABLE")
    window = (start, stop) if start is not None and stop is not None else None
    parts = folder.resolve().parts
    metadata = {"format": "sage", "path": str(folder), "robot": parts[-3] if len(parts) >= 3 else "",
                "motion_source": parts[-2] if len(parts) >= 2 else "",
                # SAGE's real torques are unsigned current estimates; its sim torques are signed
                "effort_unsigned": kind == "real"}
    return Run(folder.name, state, command, window, metadata)


def _load_bag(path: Path, kind: str, state_topic: str, command_topic: str) -> Run:
    from so101_recorder.bag_reader import Bag, read_topic_pair
    from so101_recorder.errors import RecorderError

    try:
        bag = Bag(path)
        state, command = read_topic_pair(bag, state_topic, command_topic)
    except RecorderError as err:
        raise PairError(f"cannot read {kind} bag {path}: {err}") from err
    metadata = {"format": "bag", "path": str(path), "state_topic": state_topic,
                "command_topic": command_topic if command is not None else None, "effort_unsigned": False,
                "truncated": bag.truncation}
    return Run(path.stem, state, command, None, metadata, list(bag.episode.faults) if bag.episode is not None else [])


def _mark_faults(episode: PairedEpisode, faults: list[FaultSpan]) -> None:
    """The run's fault spans on the episode's time axis (cut to it), as ``metadata["faults"]``: pairing keeps
    the faulted samples, reports mark them, training leaves them out."""
    start, duration = episode.metadata["grid_start_real_clock_s"], float(episode.time[-1])
    marked = []
    for span in faults:
        begin, end = span.start - start, None if span.end is None else span.end - start
        if end is not None and end < 0.0:
            continue
        # a fault reported as the recording ended still marks the episode (at its end)
        moved = span.model_copy(update={"start": min(max(begin, 0.0), duration),
                                        "end": None if end is None or end > duration else end})
        _LOG.warning("episode %s: %s", episode.name, format_fault(moved))
        marked.append(moved.model_dump())
    if marked:
        episode.metadata["faults"] = marked


def mujoco_replayer(sim: MujocoSim | None = None) -> Callable[[Run], tuple[Run, ClockFit]]:
    """Replay each real command stream in the built-in MuJoCo backend, from the real initial state.

    ``sim``: replay in this (already compiled) simulator instead of a fresh one per run; a replay resets
    it completely, so the result is the same, without compiling the model again (fleet workers)."""
    try:
        from so101_sim2real.replay.mujoco_backend import replay_trajectory
    except ImportError as err:
        raise PairError("--sim mujoco needs so101_sim2real.replay.mujoco_backend.replay_trajectory, "
                        f"which is not available yet: {err}") from err

    def replay(real: Run) -> tuple[Run, ClockFit]:
        if real.command is None:
            raise PairError(f"real run {real.name} has no command stream to replay")
        command = real.command if real.window is None else real.command.slice_time(*real.window)
        # the first measurement of each joint: servos that did not answer the recording's first reads are NaN there
        # (a bus dropout as it started), and the replay needs a finite start
        initial = measured_at(float(real.state.time[0]), real.state.time, real.state.position)
        state = replay_trajectory(command, initial) if sim is None else sim.simulate(command, initial)
        # the replay is stamped on the real clock by construction: identity map
        identity = ClockFit(0.0, 0.0, float(command.time[0]), 1.0, "mujoco replay (same clock)")
        return Run(real.name, state, command, None, {"format": "mujoco"}), identity

    return replay


def _episode_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "episode"
