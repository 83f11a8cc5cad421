"""Action chunks (ROS-free): the policy's upcoming commands, resampled on the compensator's clock."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from so101_common.joints import reorder
from so101_common.trajectory import rows_at

__all__ = ["ActionChunk"]


@dataclass(frozen=True)
class ActionChunk:
    """Commands (K, J) rad at absolute times (K,) s on the node's clock, strictly increasing."""

    time: np.ndarray
    position: np.ndarray

    @classmethod
    def from_points(cls, start: float, offsets: Sequence[float], names: Sequence[str],
                    points: Sequence[Sequence[float]], joints: Sequence[str]) -> ActionChunk:
        """From a trajectory message's fields; raises ``ValueError`` on bad names, shapes, NaN or times."""
        if not points:
            raise ValueError("the chunk has no points")
        position = np.array([reorder(names, point, joints) for point in points], dtype=np.float64)
        time = start + np.asarray(offsets, dtype=np.float64)
        if not (np.isfinite(position).all() and np.isfinite(time).all()):
            raise ValueError("the chunk holds NaN or inf")
        if len(time) > 1 and not np.all(np.diff(time) > 0):
            raise ValueError("the chunk's time_from_start must increase strictly")
        return cls(time, position)

    def upcoming(self, now: float, period: float, rows: int) -> np.ndarray | None:
        """Commands at ``now + period``, ``now + 2·period`` … (``rows`` of them), linearly interpolated and
        held at the chunk's last point; None when the chunk ended before ``now + period`` (stale)."""
        if rows <= 0 or self.time[-1] < now + period:
            return None
        return rows_at(now + period * np.arange(1, rows + 1), self.time, self.position)
