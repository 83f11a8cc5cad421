"""Real SO-101 runs in SAGE's layout as paired command/state arrays, and the fixed held-out rule."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from so101_common.joints import JOINT_NAMES
from so101_common.trajectory import JointTrajectory

__all__ = ["Recording", "RecordingError", "load_recordings", "split_heldout", "HELDOUT_EVERY", "HELDOUT_OFFSET", "HELDOUT_RULE"]

# Held-out rule (fixed before any result was seen): motion folders sorted by name, every fifth
# one starting with the third (indices 2, 7, 12, ...) is validation, never trained or tuned on.
HELDOUT_EVERY = 5
HELDOUT_OFFSET = 2
HELDOUT_RULE = f"motion folders sorted by name, index % {HELDOUT_EVERY} == {HELDOUT_OFFSET}"


class RecordingError(ValueError):
    """A real run that cannot be used (unreadable, no commands, or states not paired with commands)."""


@dataclass(frozen=True)
class Recording:
    """One real run on the command clock: ``command[i]`` was sent at ``time[i]`` and ``position[i]`` measured then."""

    name: str
    time: np.ndarray  # (N,) s
    command: np.ndarray  # (N, J) rad, JOINT_NAMES order
    position: np.ndarray  # (N, J) rad, measured

    @property
    def rate_hz(self) -> float:
        return float(1.0 / np.median(np.diff(self.time)))

    def command_trajectory(self) -> JointTrajectory:
        return JointTrajectory(self.time, self.command, names=JOINT_NAMES)


def _from_run(folder: Path) -> Recording:
    from so101_common import sage

    try:
        command, state = sage.run_to_trajectories(sage.read_run(folder, kind="real"))
    except sage.SageFormatError as err:
        raise RecordingError(str(err)) from err
    command, state = command.reordered(JOINT_NAMES), state.reordered(JOINT_NAMES)
    if len(command) < 10 or len(state) < 10:
        raise RecordingError(f"{folder}: fewer than 10 commands or states")
    if len(state) == len(command) and np.allclose(state.time, command.time):
        position = state.position
    else:  # states on their own clock: bring them onto the command stamps
        position = np.column_stack([np.interp(command.time, state.time, state.position[:, j]) for j in range(len(JOINT_NAMES))])
    if not (np.isfinite(command.position).all() and np.isfinite(position).all()):
        raise RecordingError(f"{folder}: NaN or infinite commands or positions")
    return Recording(folder.name, command.time - command.time[0], command.position, position)


def load_recordings(roots: Sequence[str | Path]) -> list[Recording]:
    """Every SAGE real run under ``roots`` (a run folder, or a folder of them), sorted by name."""
    from so101_common import sage

    recordings: list[Recording] = []
    for root in roots:
        try:
            folders = sage.list_motion_runs(root)
        except sage.SageFormatError as err:
            raise RecordingError(str(err)) from err
        recordings.extend(_from_run(folder) for folder in folders)
    names = [r.name for r in recordings]
    if len(set(names)) != len(names):
        raise RecordingError(f"motion names repeat across {list(map(str, roots))}: {sorted(n for n in set(names) if names.count(n) > 1)}")
    return sorted(recordings, key=lambda r: r.name)


def split_heldout(recordings: Sequence[Recording]) -> tuple[list[Recording], list[Recording]]:
    """``(training, held_out)`` by :data:`HELDOUT_EVERY`/:data:`HELDOUT_OFFSET` over the name-sorted list."""
    ordered = sorted(recordings, key=lambda r: r.name)
    heldout = [r for i, r in enumerate(ordered) if i % HELDOUT_EVERY == HELDOUT_OFFSET]
    names = {r.name for r in heldout}
    return [r for r in ordered if r.name not in names], heldout
