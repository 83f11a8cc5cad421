"""Scripted command motions: built-in smooth sweeps, or motion files, sampled at any time.

A motion is a :class:`~so101_common.trajectory.JointTrajectory` of command positions (rad);
the motion player node publishes it as if it were a policy, which is how the demo and the
sim-to-real loop drive the arm without a trained policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from so101_common.joints import JOINTS
from so101_common.parameters import parameter
from so101_common.trajectory import JointTrajectory, rows_at

__all__ = ["BUILTIN_MOTIONS", "EXCITATION_PREFIX", "MotionError", "MotionPlayerParameters", "builtin_motion", "excitation_seed", "load_motion",
           "sample", "sample_times"]

BUILTIN_MOTIONS = ("sweep", "wave", "hold")


class MotionError(ValueError):
    """A motion name or file that cannot be played."""


@dataclass(frozen=True)
class MotionPlayerParameters:
    """Parameters of the motion player node (defaults, descriptions, ranges)."""

    motion: str = parameter("sweep", f"built-in motion ({', '.join(BUILTIN_MOTIONS)}), excitation-<seed> or a SAGE motion file")
    duration: float = parameter(0.0, "s of a built-in motion; 0 = the motion's default", low=0.0, high=3600.0)
    rate_hz: float = parameter(50.0, "publish rate of the motion's commands (Hz)", low=0.1, high=1000.0)
    loop: bool = parameter(False, "start over at the end instead of holding the last pose")
    start_delay: float = parameter(0.0, "s between start and the motion's first sample", low=0.0, high=3600.0)
    autostart: bool = parameter(True, "play at once; false: wait for ~/start")
    hold_start_pose: bool = parameter(False, "while not playing, command the motion's first pose (the arm waits there)")
    chunk_steps: int = parameter(10, "upcoming commands published with each command on output_chunk (the "
                                     "compensator's look-ahead, as a policy's action chunk); 0 = none", low=0, high=1000)


def builtin_motion(name: str = "sweep", duration: float = 12.0, rate_hz: float = 50.0,
                   amplitude: float = 0.35) -> JointTrajectory:
    """A smooth, limit-respecting motion starting and ending at the zero pose.

    ``amplitude`` is the fraction of each joint's half-range used. ``sweep`` moves every joint on
    its own frequency (rich excitation for gap measurement); ``wave`` lifts the arm and waves the
    wrist; ``hold`` stays at the zero pose (gravity sag, static gap).
    """
    if name not in BUILTIN_MOTIONS:
        raise MotionError(f"unknown motion {name!r}; built-in motions are {list(BUILTIN_MOTIONS)}")
    if duration <= 0 or rate_hz <= 0 or not 0 <= amplitude <= 1:
        raise MotionError("duration and rate must be positive and amplitude within 0..1")
    t = np.arange(0.0, duration + 0.5 / rate_hz, 1.0 / rate_hz)
    # Raised-cosine envelope (15 % of the motion, at least 1.5 s, at most half) so the motion starts
    # and ends at rest, gently enough for the safety filter's default velocity bound.
    ramp_s = min(max(0.15 * duration, 1.5), 0.5 * duration)
    ramp = np.clip(np.minimum(t, duration - t) / ramp_s, 0.0, 1.0)
    envelope = 0.5 - 0.5 * np.cos(np.pi * ramp)
    positions = np.zeros((len(t), len(JOINTS)))
    for i, spec in enumerate(JOINTS):
        centre = 0.5 * (spec.lower + spec.upper)
        half = 0.5 * spec.span * amplitude
        if name == "sweep":
            positions[:, i] = centre * envelope + half * envelope * np.sin(2 * np.pi * (0.15 + 0.07 * i) * t)
        elif name == "wave":
            raised = {"shoulder_lift": -0.6, "elbow_flex": 0.8}.get(spec.name, 0.0)  # rad: arm up
            wiggle = half * np.sin(2 * np.pi * 0.4 * t) if spec.name in ("wrist_flex", "wrist_roll") else 0.0
            positions[:, i] = envelope * (raised + wiggle)
        else:
            positions[:, i] = 0.0
        positions[:, i] = np.clip(positions[:, i], spec.lower, spec.upper)
    return JointTrajectory(t, positions)


EXCITATION_PREFIX = "excitation-"  # excitation-<seed>: a compensator's training motion (so101_gaponet.excitation)


def excitation_seed(name: str) -> int | None:
    """The seed of an ``excitation-<seed>`` motion name, else None."""
    digits = name[len(EXCITATION_PREFIX):] if name.startswith(EXCITATION_PREFIX) else ""
    return int(digits) if digits.isdigit() else None


def load_motion(source: str, rate_hz: float = 50.0, duration: float = 0.0) -> JointTrajectory:
    """A built-in motion name (``duration`` s, 0 = its default), ``excitation-<seed>`` (a training motion,
    default 30 s), or a SAGE motion file (``.txt``, 50 Hz rows, radians, jaw 0..1; its own length)."""
    if source in BUILTIN_MOTIONS:
        return builtin_motion(source, duration=duration or 12.0, rate_hz=rate_hz)
    seed = excitation_seed(source)
    if seed is not None:
        from so101_gaponet.excitation import excitation_motion

        return excitation_motion(seed, duration=duration or 30.0, rate_hz=rate_hz)
    path = Path(source)
    if not path.is_file():
        raise MotionError(f"motion {source!r} is neither a built-in motion {list(BUILTIN_MOTIONS)}, "
                          f"{EXCITATION_PREFIX}<seed>, nor a file")
    from so101_common.sage import read_motion_file  # the SAGE format lives with the other SAGE I/O

    return read_motion_file(path)


def sample(motion: JointTrajectory, t: float) -> np.ndarray:
    """Command positions at time ``t`` (s from the motion's start), linearly interpolated, held at the ends."""
    return sample_times(motion, np.array([t]))[0]


def sample_times(motion: JointTrajectory, times: np.ndarray) -> np.ndarray:
    """``(len(times), J)``: :func:`sample` at each of ``times`` (a player's action chunk is a dozen times a tick)."""
    return rows_at(motion.time[0] + np.asarray(times, dtype=float), motion.time, motion.position)
