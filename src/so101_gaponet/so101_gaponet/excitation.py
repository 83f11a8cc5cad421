"""Excitation motions: the commands a compensator is trained on, unlike the motions it is judged on.

Each joint follows its own smooth random path through waypoints drawn uniformly inside a fraction
of its range, with random dwell times (so slow, gravity-loaded holds, joints held still while others
move, and fast reversals that show lag and backlash all appear), joined by minimum-jerk segments. Velocities stay below ``max_velocity``
so the safety filter passes the commands unchanged, and the motion starts and ends at the zero pose
at rest. A seed fully determines a motion; different seeds give different motions.
"""

from __future__ import annotations

import numpy as np

from so101_common.joints import JOINTS
from so101_common.trajectory import JointTrajectory

__all__ = ["excitation_motion"]


def _minimum_jerk(s: np.ndarray) -> np.ndarray:
    return s**3 * (10.0 - 15.0 * s + 6.0 * s**2)


def _joint_path(rng: np.random.Generator, t: np.ndarray, lower: float, upper: float, max_velocity: float,
                segment_s: tuple[float, float]) -> np.ndarray:
    duration = float(t[-1])
    times = [0.0]
    points = [0.0]
    while times[-1] < duration:
        target = float(rng.uniform(lower, upper))
        # A minimum-jerk segment peaks at 1.875 × its mean speed: keep that below max_velocity.
        shortest = 1.875 * abs(target - points[-1]) / max_velocity
        move = max(float(rng.uniform(*segment_s)), shortest)
        times.append(times[-1] + move)
        points.append(target)
        # no pause, a short one, or a long hold: a joint held still while the others move is a case the
        # compensator must learn to leave alone
        dwell = float(rng.choice([0.0, rng.uniform(0.1, 0.8), rng.uniform(1.0, 4.0)]))
        if dwell > 0:
            times.append(times[-1] + dwell)
            points.append(target)
    path = np.empty_like(t)
    knots = np.asarray(times)
    values = np.asarray(points)
    segment = np.clip(np.searchsorted(knots, t, side="right") - 1, 0, len(knots) - 2)
    span = knots[segment + 1] - knots[segment]
    s = np.clip((t - knots[segment]) / span, 0.0, 1.0)
    path[:] = values[segment] + (values[segment + 1] - values[segment]) * _minimum_jerk(s)
    return path


def excitation_motion(seed: int, duration: float = 20.0, rate_hz: float = 50.0, amplitude: float = 0.6,
                      max_velocity: float = 1.5, segment_s: tuple[float, float] = (0.3, 1.5)) -> JointTrajectory:
    """Command positions (rad) at ``rate_hz`` for ``duration`` s: random minimum-jerk paths per joint.

    ``amplitude`` is the fraction of each joint's range the waypoints are drawn from (centred on the
    range's middle); ``segment_s`` bounds the duration of a move between waypoints.
    """
    if duration <= 0 or rate_hz <= 0 or not 0 < amplitude <= 1 or max_velocity <= 0:
        raise ValueError("duration, rate, amplitude (0..1] and max_velocity must be positive")
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, duration + 0.5 / rate_hz, 1.0 / rate_hz)
    # Raised-cosine envelope (2.5 s, at most a quarter of the motion): start and end at rest at zero,
    # slowly enough that the envelope adds < 1 rad/s to the path's own speed (safety default: 3 rad/s).
    ramp_s = min(2.5, 0.25 * duration)
    ramp = np.clip(np.minimum(t, duration - t) / ramp_s, 0.0, 1.0)
    envelope = 0.5 - 0.5 * np.cos(np.pi * ramp)
    positions = np.zeros((len(t), len(JOINTS)))
    for i, spec in enumerate(JOINTS):
        centre = 0.5 * (spec.lower + spec.upper)
        half = 0.5 * spec.span * amplitude
        path = _joint_path(rng, t, centre - half, centre + half, max_velocity, segment_s)
        positions[:, i] = np.clip(envelope * path, spec.lower, spec.upper)
    return JointTrajectory(t, positions)
