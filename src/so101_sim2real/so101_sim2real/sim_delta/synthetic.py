"""A 'real arm' with a known gap for tests and benchmarks: MuJoCo itself, driven late and offset.

The run's commands are smooth multisines; the 'real' positions are MuJoCo's response to the same
commands ``lag`` frames late plus a constant per-joint ``offset``. The ideal sim-delta is therefore
known: ``Δ(t) = a(t − lag) − a(t) + offset``.
"""

from __future__ import annotations

import numpy as np

from so101_common.joints import JOINTS
from so101_sim2real.sim_delta.recordings import Recording
from so101_sim2real.sim_delta.rollout import CONTROL_RATE_HZ, replay

__all__ = ["LAG_FRAMES", "OFFSET", "multisine_commands", "lagged_arm_recording", "known_delta"]

LAG_FRAMES = 3
OFFSET = np.array([0.0, 0.03, -0.02, 0.01, 0.0, 0.0])  # rad, a sag-like constant gap on three joints


def multisine_commands(seconds: float, seed: int) -> np.ndarray:
    """``(N, J)`` smooth commands around each joint's mid-range: three sines per joint, 0.1–0.8 Hz."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * CONTROL_RATE_HZ)) / CONTROL_RATE_HZ
    centre = np.array([(j.lower + j.upper) / 2 for j in JOINTS])
    signal = np.zeros((len(t), len(JOINTS)))
    for _ in range(3):
        amplitude = rng.uniform(0.03, 0.08, len(JOINTS))
        frequency = rng.uniform(0.1, 0.8, len(JOINTS))
        signal += amplitude * np.sin(2 * np.pi * frequency * t[:, None] + rng.uniform(0, 2 * np.pi, len(JOINTS)))
    return centre + signal


def known_delta(command: np.ndarray, lag: int = LAG_FRAMES, offset: np.ndarray = OFFSET) -> np.ndarray:
    """The ideal Δ for :func:`lagged_arm_recording`'s arm: ``a(t − lag) − a(t) + offset``."""
    late = np.vstack([np.repeat(command[:1], lag, axis=0), command[:-lag]])
    return late + offset - command


def lagged_arm_recording(name: str, seconds: float, seed: int, lag: int = LAG_FRAMES,
                         offset: np.ndarray = OFFSET) -> Recording:
    """A recording of the lagged, offset 'real arm' for :func:`multisine_commands`."""
    command = multisine_commands(seconds, seed)
    time = np.arange(len(command)) / CONTROL_RATE_HZ
    driven = command + known_delta(command, lag, offset)
    real = replay(Recording(name, time, driven, np.repeat(driven[:1], len(time), axis=0))).position
    return Recording(name, time, command, real)
