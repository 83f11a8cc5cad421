"""Recorded motions for ``so101 fit-profile``: SAGE real run folders and bags → :class:`Recording`
(command and the state reported right after it, per command frame), and the held-out split.

SAGE real runs record the state right after each command with the same stamp; a bag's state stream
(``/joint_states``) is interpolated onto the stamps of its command stream (``/joint_command``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from so101_common import sage, topics
from so101_common.recording_checks import check_recording
from so101_common.trajectory import JointTrajectory
from so101_recorder.bag_reader import read_topic_pair
from so101_recorder.errors import RecorderError
from so101_virtual.sysid.recording import Recording, RecordingError

__all__ = ["load_sage_recordings", "load_bag_recordings", "split_holdout", "COMMAND_TOPIC", "STATE_TOPIC"]

COMMAND_TOPIC = topics.absolute(topics.JOINT_COMMAND)  # what the driver was told (after the compensator and safety filter)
STATE_TOPIC = topics.absolute(topics.JOINT_STATES)


def _on_command_times(name: str, command: JointTrajectory, state: JointTrajectory, source: str) -> Recording:
    if len(command) == 0 or len(state) == 0:
        raise RecordingError(f"{source}: no commands or no measured states")
    position = np.column_stack([np.interp(command.time, state.time, state.position[:, j])
                                for j in range(state.position.shape[1])])
    return Recording(name, command.time, command.position, position, source)


def load_sage_recordings(folders: Sequence[str | Path]) -> list[Recording]:
    """Every SAGE real run under ``folders`` (a run folder, or a folder of them); named
    ``<source>/<motion>`` after the layout ``output/real/<robot>/<source>/<motion>/``."""
    out = []
    for folder in folders:
        for run_dir in sage.list_motion_runs(folder):
            run = sage.read_run(run_dir, kind="real")
            command, state = sage.run_to_trajectories(run)
            name = f"{run_dir.resolve().parent.name}/{run_dir.name}"
            out.append(_on_command_times(name, command, state, str(run_dir)))
    return out


def load_bag_recordings(paths: Sequence[str | Path], command_topic: str = COMMAND_TOPIC,
                        state_topic: str = STATE_TOPIC) -> list[Recording]:
    """One recording per bag, named after the bag: its commands and the measured state at their stamps."""
    out = []
    for path in paths:
        path = Path(path)
        try:
            command, state = read_topic_pair(path, command_topic, state_topic)
        except RecorderError as err:
            raise RecordingError(str(err) if str(path) in str(err) else f"cannot read bag {path}: {err}") from err
        if state is None:
            raise RecordingError(f"bag {path} has no topic {state_topic}: nothing to fit the commands against")
        check_recording(command.time, command.position, f"bag {path} {command_topic}", command.names, error=RecordingError)
        check_recording(state.time, state.position, f"bag {path} {state_topic}", state.names, allow_nan=True,
                        error=RecordingError)
        out.append(_on_command_times(path.stem, command, state, str(path)))
    return out


def split_holdout(recordings: Sequence[Recording], every: int = 5, names: Sequence[str] = ()
                  ) -> tuple[list[Recording], list[Recording]]:
    """``(fit, held_out)``. With ``names``, the recordings named so (full ``source/motion`` name or the
    motion alone) are held out; otherwise every ``every``-th in name order, starting with the first
    (``every`` 0: none). Duplicate names are refused (the split must be unambiguous)."""
    ordered = sorted(recordings, key=lambda r: r.name)
    seen: set[str] = set()
    for rec in ordered:
        if rec.name in seen:
            raise RecordingError(f"two recordings are named {rec.name!r} ({rec.source}); give each motion once")
        seen.add(rec.name)
    if names:
        wanted = set(names)
        unknown = wanted - {r.name for r in ordered} - {r.name.split("/")[-1] for r in ordered}
        if unknown:
            raise RecordingError(f"--holdout names no recording: {', '.join(sorted(unknown))}")
        held = [r for r in ordered if r.name in wanted or r.name.split("/")[-1] in wanted]
    elif every > 0:
        held = ordered[::every]
    else:
        held = []
    held_ids = {id(r) for r in held}
    fit = [r for r in ordered if id(r) not in held_ids]
    return fit, held
