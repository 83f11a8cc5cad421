"""Closed-loop MuJoCo replays of real recordings, through the same backend and filter as ``so101 replay``.

:func:`replay` runs one recording's commands in :class:`so101_sim2real.replay.mujoco_backend.MujocoSim`
(control ticks at the recording's rate, physics 200 Hz, from the real initial pose at rest), with
or without a per-tick command filter, and returns the simulated state on the recording's stamps,
so it compares frame by frame with the real arm (:func:`position_rmse`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from so101_sim2real.sim_delta.recordings import Recording

if TYPE_CHECKING:
    from so101_sim2real.replay.mujoco_backend import CommandFilter

__all__ = ["SimRun", "replay", "position_rmse", "CONTROL_RATE_HZ"]

CONTROL_RATE_HZ = 50.0  # SAGE's SO-101 motions: one command per 20 ms frame


@dataclass(frozen=True)
class SimRun:
    """The simulated arm on the recording's stamps."""

    position: np.ndarray  # (N, J) rad
    velocity: np.ndarray  # (N, J) rad/s


def replay(recording: Recording, command_filter: CommandFilter | None = None,
           control_rate_hz: float = CONTROL_RATE_HZ) -> SimRun:
    """MuJoCo's response to ``recording.command`` (``command_filter``: per-tick ``(t, a, q, q̇) -> a'``)."""
    from so101_sim2real.replay.mujoco_backend import MujocoSim, MujocoSimConfig

    sim = MujocoSim(MujocoSimConfig(control_rate_hz=control_rate_hz, sample="control"))
    state = sim.simulate(recording.command_trajectory(), recording.position[0], command_filter=command_filter)
    columns = range(recording.position.shape[1])
    position = np.column_stack([np.interp(recording.time, state.time, state.position[:, j]) for j in columns])
    velocity = np.column_stack([np.interp(recording.time, state.time, state.velocity[:, j]) for j in columns])
    return SimRun(position, velocity)


def position_rmse(sim_position: np.ndarray, real_position: np.ndarray) -> np.ndarray:
    """``(J,)`` RMS of sim − real position over the run, rad."""
    return np.sqrt(np.mean((sim_position - real_position) ** 2, axis=0))
