"""How well an arm tracks its commands, and how far a simulated arm is from a recorded one.

All figures are pooled over several recordings per joint (frames of every recording together), so a
long motion counts more than a short one and a joint that barely moves in one motion does not make
its figures noisy:

- :func:`tracking_rmse`: command→state RMSE, ``√mean((state − command)²)`` over all frames;
- :func:`tracking_lag`: the shift (frames, sub-frame by a parabola through the peak) that maximises
  the cross-covariance of command and state, summed over recordings (SAGE's ``max_lag``; positive:
  the state follows the command);
- :func:`state_rmse`: simulated against recorded state, ``√mean((sim − real)²)``;
- :func:`time_shift`: how many frames the simulated state runs behind the recorded one, from the
  state error regressed on the recorded velocity (``sim(t) ≈ real(t − d)`` ⇒ ``sim − real ≈ −d·v``).
  Unlike the cross-covariance peak it needs no ±25-frame search, so it holds on the few-second
  windows the fit scores, where slow motions make the command→state cross-covariance flat.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["tracking_rmse", "tracking_lag", "state_rmse", "time_shift", "MAX_LAG_FRAMES"]

MAX_LAG_FRAMES = 25  # half a second at 50 Hz: beyond any servo lag, short of the motions' periods


def _pooled(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    a = np.concatenate([np.asarray(x, dtype=np.float64) for x, _ in pairs])
    b = np.concatenate([np.asarray(y, dtype=np.float64) for _, y in pairs])
    return a, b


def tracking_rmse(commands: Sequence[np.ndarray], states: Sequence[np.ndarray]) -> np.ndarray:
    """Per-joint command→state RMSE (rad) pooled over recordings (each (N, J))."""
    command, state = _pooled(list(zip(commands, states, strict=True)))
    return np.sqrt(np.mean((state - command) ** 2, axis=0))


def state_rmse(sims: Sequence[np.ndarray], reals: Sequence[np.ndarray]) -> np.ndarray:
    """Per-joint RMSE (rad) between simulated and recorded states, pooled over recordings."""
    sim, real = _pooled(list(zip(sims, reals, strict=True)))
    return np.sqrt(np.mean((sim - real) ** 2, axis=0))


def time_shift(sims: Sequence[np.ndarray], reals: Sequence[np.ndarray]) -> np.ndarray:
    """Per joint, frames by which the simulated state lags the recorded one (negative: leads),
    pooled over recordings: ``−Σ (sim − real)·v / Σ v²`` with ``v`` the recorded state's change per
    frame (central differences). 0 for a joint that never moves."""
    num = den = np.zeros(np.asarray(reals[0]).shape[1])
    for sim, real in zip(sims, reals, strict=True):
        r = np.asarray(real, dtype=np.float64)
        if len(r) < 3:
            continue
        v = np.gradient(r, axis=0)
        num = num + np.sum((np.asarray(sim, dtype=np.float64) - r) * v, axis=0)
        den = den + np.sum(v * v, axis=0)
    return np.where(den > 0.0, -num / np.where(den > 0.0, den, 1.0), 0.0)


def tracking_lag(commands: Sequence[np.ndarray], states: Sequence[np.ndarray],
                 max_lag: int = MAX_LAG_FRAMES) -> np.ndarray:
    """Per-joint lag of the state behind the command, in frames (NaN for a joint that never moves)."""
    joints = np.asarray(commands[0]).shape[1]
    cov = np.zeros((2 * max_lag + 1, joints))
    for command, state in zip(commands, states, strict=True):
        c = np.asarray(command, dtype=np.float64)
        s = np.asarray(state, dtype=np.float64)
        n = len(c)
        if n <= 2 * max_lag:
            continue
        c = c - c.mean(axis=0)
        s = s - s.mean(axis=0)
        for i, shift in enumerate(range(-max_lag, max_lag + 1)):
            if shift >= 0:
                cov[i] += np.sum(c[: n - shift] * s[shift:], axis=0)
            else:
                cov[i] += np.sum(c[-shift:] * s[: n + shift], axis=0)
    lags = np.full(joints, np.nan)
    for j in range(joints):
        column = cov[:, j]
        if not np.any(column > 0.0):
            continue
        i = int(np.argmax(column))
        offset = 0.0
        if 0 < i < len(column) - 1:  # parabola through the peak and its neighbours
            left, mid, right = column[i - 1], column[i], column[i + 1]
            curvature = left - 2.0 * mid + right
            if curvature < 0.0:
                offset = 0.5 * (left - right) / curvature
        lags[j] = i - max_lag + offset
    return lags
