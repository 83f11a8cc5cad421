"""Scripted motions for a hand-moved (leader) virtual arm: built-in, or any trajectory (a SAGE motion file
through :func:`so101_common.sage.read_motion_file`).

A motion is a function of time ``t`` (s) → joint angles (rad, :data:`JOINT_NAMES` order) that the
virtual hand follows. :func:`builtin_motion` is a smooth multi-joint motion inside the joint limits;
:func:`trajectory_motion` plays any :class:`~so101_common.trajectory.JointTrajectory` (linear
interpolation, held at the ends, optionally looped).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from so101_common.joints import JOINTS
from so101_common.sage import MOTION_RATE_HZ
from so101_common.trajectory import JointTrajectory, rows_at

__all__ = ["Motion", "builtin_motion", "trajectory_motion"]

Motion = Callable[[float], np.ndarray]


def builtin_motion(amplitude: float = 0.6, period: float = 8.0) -> Motion:
    """Smooth motion of every joint: sums of sines at incommensurate rates, ``amplitude`` of each
    joint's half range around its middle, starting at rest in the middle (a cosine ramp-in)."""
    mids = np.array([(j.lower + j.upper) / 2 for j in JOINTS])
    halves = np.array([(j.upper - j.lower) / 2 for j in JOINTS]) * amplitude
    rates = np.array([1.0, 0.8, 1.3, 1.7, 0.6, 2.1]) * 2 * math.pi / period
    phases = np.array([0.0, 1.1, 2.3, 0.7, 1.9, 0.4])

    def motion(t: float) -> np.ndarray:
        ramp = 0.5 - 0.5 * math.cos(math.pi * min(t / 2.0, 1.0))
        wave = 0.7 * np.sin(rates * t + phases) + 0.3 * np.sin(2.3 * rates * t) - 0.7 * np.sin(phases)
        return mids + ramp * halves * np.clip(wave, -1.0, 1.0)

    return motion


def trajectory_motion(trajectory: JointTrajectory | Sequence[Sequence[float]], loop: bool = False,
                      rate_hz: float = MOTION_RATE_HZ) -> Motion:
    """Play a trajectory (or rows of joint angles at ``rate_hz``) from its first sample."""
    if not isinstance(trajectory, JointTrajectory):
        rows = np.asarray(trajectory, dtype=float)
        trajectory = JointTrajectory(np.arange(len(rows)) / rate_hz, rows)
    trajectory = trajectory.reordered()
    times = trajectory.time - trajectory.time[0]
    positions = trajectory.position
    duration = float(times[-1]) if len(times) else 0.0

    def motion(t: float) -> np.ndarray:
        if loop and duration > 0.0:
            t = t % duration
        return rows_at(np.array([t]), times, positions)[0]

    return motion
