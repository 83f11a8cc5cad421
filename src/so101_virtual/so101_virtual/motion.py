"""Scripted motions for a hand-moved (leader) virtual arm: built-in, SAGE motion files, or trajectories.

A motion is a function of time ``t`` (s) → joint angles (rad, :data:`JOINT_NAMES` order) that the
virtual hand follows. :func:`builtin_motion` is a smooth multi-joint motion inside the joint limits;
:func:`read_sage_motion` reads a SAGE motion file (header ``Rotation,Pitch,Elbow,Wrist_Pitch,
Wrist_Roll,Jaw``, one row per 50 Hz frame, radians with the jaw as a 0..1 fraction);
:func:`trajectory_motion` plays any :class:`~so101_common.trajectory.JointTrajectory` (linear
interpolation, held at the ends, optionally looped).
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from so101_common.joints import JOINTS, SAGE_JOINT_NAMES, sage_to_rad
from so101_common.recording_checks import check_positions
from so101_common.trajectory import JointTrajectory

__all__ = ["Motion", "MotionError", "builtin_motion", "read_sage_motion", "trajectory_motion", "SAGE_RATE_HZ"]

Motion = Callable[[float], np.ndarray]
SAGE_RATE_HZ = 50.0


class MotionError(ValueError):
    """A motion file cannot be read."""


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


def read_sage_motion(path: str | os.PathLike[str]) -> JointTrajectory:
    """A SAGE motion file as a :class:`JointTrajectory` at 50 Hz (jaw fraction → gripper rad)."""
    path = Path(path)
    try:
        with path.open(newline="") as handle:
            rows = list(csv.reader(handle))
    except OSError as err:
        raise MotionError(f"cannot read motion file {path}: {err}") from err
    if not rows:
        raise MotionError(f"{path}: empty motion file")
    header = [h.strip() for h in rows[0]]
    if header != list(SAGE_JOINT_NAMES):
        raise MotionError(f"{path}: header {header} is not {list(SAGE_JOINT_NAMES)}")
    samples = []
    for number, row in enumerate(rows[1:], start=2):
        if not row or not any(cell.strip() for cell in row):
            continue
        try:
            values = [float(cell) for cell in row]
        except ValueError as err:
            raise MotionError(f"{path}:{number}: {err}") from err
        if len(values) != len(SAGE_JOINT_NAMES) or not all(math.isfinite(v) for v in values):
            raise MotionError(f"{path}:{number}: expected {len(SAGE_JOINT_NAMES)} finite numbers, got {row}")
        samples.append(sage_to_rad(values))
    if not samples:
        raise MotionError(f"{path}: no motion rows")
    check_positions(np.array(samples), path, first_line=2, error=MotionError)
    return JointTrajectory(np.arange(len(samples)) / SAGE_RATE_HZ, np.array(samples))


def trajectory_motion(trajectory: JointTrajectory | Sequence[Sequence[float]], loop: bool = False,
                      rate_hz: float = SAGE_RATE_HZ) -> Motion:
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
        return np.array([np.interp(t, times, positions[:, j]) for j in range(positions.shape[1])])

    return motion
