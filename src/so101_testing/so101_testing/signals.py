"""Checks on recorded signals that tolerate a loaded test machine."""

from __future__ import annotations

import numpy as np

__all__ = ["best_lagged_correlation"]


def best_lagged_correlation(leader: np.ndarray, follower: np.ndarray, max_lag: int = 30) -> float:
    """The highest correlation of ``follower`` with ``leader`` delayed by 0 … ``max_lag − 1`` samples.

    A loaded machine delays an arm's response by a varying few samples, and a servo that missed a
    reply leaves a NaN: both are ignored here, a response of a different shape is not.
    """
    best = -1.0
    for lag in range(max_lag):
        a, b = leader[: len(leader) - lag], follower[lag:]
        seen = np.isfinite(a) & np.isfinite(b)
        if seen.sum() > 2 and np.ptp(a[seen]) > 0 and np.ptp(b[seen]) > 0:
            best = max(best, float(np.corrcoef(a[seen], b[seen])[0, 1]))
    return best
