"""Time-stamped joint samples in the one joint order: the exchange type between bags, SAGE files,
simulators, paired datasets and metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from so101_common.joints import JOINT_NAMES, JointSpecError

__all__ = ["JointTrajectory", "causal_velocity", "measured_at", "rows_at"]


@dataclass(init=False)
class JointTrajectory:
    """``N`` samples of ``J`` joints. Units: s, rad, rad/s, N·m (REP-103); NaN where not measured.

    ``time`` is strictly increasing seconds on the trajectory's own clock (bag stamps, SAGE µs/1e6,
    simulation time); aligning two clocks is the pairing step's job, not this type's. The
    constructor takes anything array-like and stores float64 arrays; velocity and effort not given
    are NaN.
    """

    time: np.ndarray  # (N,)
    position: np.ndarray  # (N, J)
    velocity: np.ndarray  # (N, J)
    effort: np.ndarray  # (N, J)
    names: tuple[str, ...]

    def __init__(self, time: ArrayLike, position: ArrayLike, velocity: ArrayLike | None = None,
                 effort: ArrayLike | None = None, names: Sequence[str] = JOINT_NAMES) -> None:
        self.names = tuple(names)
        self.time = np.asarray(time, dtype=np.float64).reshape(-1)
        self.position = _as_matrix(position, "position", len(self.time), len(self.names))
        n, j = self.position.shape
        self.velocity = np.full((n, j), np.nan) if velocity is None else _as_matrix(velocity, "velocity", n, j)
        self.effort = np.full((n, j), np.nan) if effort is None else _as_matrix(effort, "effort", n, j)

    def __len__(self) -> int:
        return len(self.time)

    @property
    def duration(self) -> float:
        return float(self.time[-1] - self.time[0]) if len(self.time) else 0.0

    def reordered(self, names: Sequence[str] = JOINT_NAMES) -> JointTrajectory:
        """The same samples with columns in ``names`` order (every name must be present)."""
        missing = [n for n in names if n not in self.names]
        if missing:
            raise JointSpecError(f"trajectory lacks joints {missing}; it has {list(self.names)}")
        index = [self.names.index(n) for n in names]
        return JointTrajectory(self.time.copy(), self.position[:, index], self.velocity[:, index],
                               self.effort[:, index], tuple(names))

    def slice_time(self, start: float, stop: float) -> JointTrajectory:
        """Samples with ``start <= time <= stop``."""
        keep = (self.time >= start) & (self.time <= stop)
        return JointTrajectory(self.time[keep], self.position[keep], self.velocity[keep], self.effort[keep], self.names)

    def shifted(self, offset: float) -> JointTrajectory:
        """The same samples with ``offset`` seconds added to every time."""
        return JointTrajectory(self.time + offset, self.position, self.velocity, self.effort, self.names)


def _as_matrix(values: object, what: str, rows: int, cols: int) -> np.ndarray:
    matrix = np.asarray(values, dtype=np.float64)
    if matrix.shape != (rows, cols):
        raise JointSpecError(f"{what} has shape {matrix.shape}, expected ({rows}, {cols})")
    return matrix


def rows_at(when: np.ndarray, time: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``(len(when), J)``: ``rows`` (N, J) at times ``time`` (N,, strictly increasing) linearly interpolated at each
    of ``when``, held at the first and last row outside them. Every joint in one pass (per joint, ``np.interp``
    copies the joint's column each call: the motion player sampled its action chunk 72 times a tick that way)."""
    when = np.asarray(when, dtype=np.float64)
    if len(time) == 1:
        return np.repeat(rows, len(when), axis=0)
    after = np.clip(np.searchsorted(time, when, side="right"), 1, len(time) - 1)
    before = after - 1
    share = np.clip((when - time[before]) / (time[after] - time[before]), 0.0, 1.0)
    return rows[before] + share[:, None] * (rows[after] - rows[before])


def measured_at(when: float, time: np.ndarray, position: np.ndarray) -> np.ndarray:
    """Each joint's position (J,) at ``when``: linear interpolation over that joint's finite readings of ``time``
    (N,) and ``position`` (N, J), clamped to their ends; a servo that did not answer reads NaN, so a joint without
    any finite reading is NaN."""
    read = np.isfinite(position)
    return np.array([np.interp(when, time[read[:, j]], position[read[:, j], j]) if read[:, j].any() else np.nan
                     for j in range(position.shape[1])])


def causal_velocity(position: np.ndarray, time: np.ndarray) -> np.ndarray:
    """Backward-difference velocity (N×J, first row 0): what a servo or a controller can know at each sample."""
    velocity = np.zeros_like(position)
    velocity[1:] = np.diff(position, axis=0) / np.diff(time)[:, None]
    return velocity
