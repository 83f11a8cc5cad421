"""Sim-to-real gap metrics per joint, vectorised over joints.

SAGE's set (rmse, mape over |real| ≥ 0.1, Pearson corr, cosine similarity, max_lag from the argmax of
|cross-correlation| in s with positive = sim lags, and smoothness = mean |d/dt| and var(d/dt) of each
side for velocities and efforts) plus GapONet's: MAE, large-gap ratio (|sim − real| ≥ threshold),
gap IQR and range. ``error = sim − real``. Rows where either side is NaN are left out per joint; a
joint with fewer than two valid rows gets NaN.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy import signal

from so101_common.paired_dataset import PairedEpisode

__all__ = [
    "MetricsError",
    "MetricsConfig",
    "QUANTITIES",
    "COMPARISON_METRICS",
    "SMOOTHNESS_METRICS",
    "compare",
    "episode_metrics",
]

QUANTITIES: tuple[str, ...] = ("position", "velocity", "effort")
COMPARISON_METRICS: tuple[str, ...] = (
    "rmse", "mae", "mape", "corr", "cos_sim", "max_lag", "large_gap_ratio", "gap_iqr", "gap_range",
)
SMOOTHNESS_METRICS: tuple[str, ...] = (
    "sim_smoothness_mean", "sim_smoothness_var", "real_smoothness_mean", "real_smoothness_var",
)
_MAPE_FLOOR = 0.1  # SAGE leaves out |real| < 0.1 from the percentage error


class MetricsError(ValueError):
    """Signals of mismatched shapes or a bad metrics configuration."""


@dataclass(frozen=True)
class MetricsConfig:
    """Thresholds of the large-gap ratio per quantity and the effort sign convention."""

    # |sim − real| at or above these counts as a large gap (rad, rad/s, N·m)
    large_gap_thresholds: Mapping[str, float] = field(
        default_factory=lambda: {"position": 0.05, "velocity": 0.5, "effort": 0.2})
    # compare |sim effort| with real effort when the real side reports unsigned current estimates (SAGE)
    unsigned_real_effort: bool = False

    def __post_init__(self) -> None:
        for quantity in QUANTITIES:
            value = self.large_gap_thresholds.get(quantity)
            if value is None or not (math.isfinite(value) and value > 0):
                raise MetricsError(f"large_gap_thresholds[{quantity!r}] must be a positive number, got {value}")


def compare(sim: np.ndarray, real: np.ndarray, dt: float, large_gap_threshold: float,
            smoothness: bool = False) -> dict[str, np.ndarray]:
    """Metrics of ``sim`` against ``real`` ((N, J) each, sampled every ``dt`` s) → {metric: (J,)}."""
    sim = np.asarray(sim, dtype=np.float64)
    real = np.asarray(real, dtype=np.float64)
    if sim.ndim == 1:
        sim, real = sim[:, None], real[:, None]
    if sim.shape != real.shape or sim.ndim != 2:
        raise MetricsError(f"sim {sim.shape} and real {real.shape} must be equal (N, J) arrays")
    if not dt > 0:
        raise MetricsError(f"dt must be positive, got {dt}")
    valid = np.isfinite(sim) & np.isfinite(real)
    out: dict[str, np.ndarray] = {}
    complete = valid.all(axis=0)
    names = COMPARISON_METRICS + (SMOOTHNESS_METRICS if smoothness else ())
    for name in names:
        out[name] = np.full(sim.shape[1], np.nan)
    if complete.any():  # the common case: whole columns valid, computed in one vectorised pass
        _fill(out, _compare_block(sim[:, complete], real[:, complete], dt, large_gap_threshold, smoothness), complete)
    for j in np.flatnonzero(~complete):  # columns with holes: their own valid rows
        rows = valid[:, j]
        if np.count_nonzero(rows) >= 2:
            block = _compare_block(sim[rows, j:j + 1], real[rows, j:j + 1], dt, large_gap_threshold, smoothness)
            _fill(out, block, np.arange(sim.shape[1]) == j)
            if smoothness:  # derivatives only between neighbouring valid rows, never across a hole
                for side, values in (("sim", sim[:, j]), ("real", real[:, j])):
                    rate = np.diff(np.where(rows, values, np.nan)) / dt
                    rate = rate[np.isfinite(rate)]
                    out[f"{side}_smoothness_mean"][j] = np.abs(rate).mean() if len(rate) else np.nan
                    out[f"{side}_smoothness_var"][j] = rate.var() if len(rate) else np.nan
    return out


def episode_metrics(episode: PairedEpisode, dt: float, config: MetricsConfig = MetricsConfig()
                    ) -> dict[str, dict[str, np.ndarray]]:
    """{quantity: {metric: (J,)}} for positions, velocities and efforts of one paired episode."""
    result = {}
    for quantity in QUANTITIES:
        sim = episode.side("sim", quantity)
        if quantity == "effort" and config.unsigned_real_effort:
            sim = np.abs(sim)
        result[quantity] = compare(sim, episode.side("real", quantity), dt,
                                   config.large_gap_thresholds[quantity], smoothness=quantity != "position")
    return result


def _fill(out: dict[str, np.ndarray], block: dict[str, np.ndarray], columns: np.ndarray) -> None:
    for name, values in block.items():
        out[name][columns] = values


def _compare_block(sim: np.ndarray, real: np.ndarray, dt: float, threshold: float,
                   smoothness: bool) -> dict[str, np.ndarray]:
    err = sim - real
    abs_err = np.abs(err)
    n = len(sim)
    with np.errstate(divide="ignore", invalid="ignore"):
        big = np.abs(real) >= _MAPE_FLOOR
        ratio = np.where(big, np.abs(err / np.where(big, real, 1.0)), 0.0)
        counts = big.sum(axis=0)
        mape = np.where(counts > 0, ratio.sum(axis=0) / np.maximum(counts, 1) * 100.0, np.nan)
        sc, rc = sim - sim.mean(axis=0), real - real.mean(axis=0)
        corr = (sc * rc).sum(axis=0) / np.sqrt((sc ** 2).sum(axis=0) * (rc ** 2).sum(axis=0))
        cos = (sim * real).sum(axis=0) / (np.linalg.norm(sim, axis=0) * np.linalg.norm(real, axis=0))
    # SAGE: correlate(sim, real) on the raw signals, peak of |·|, lag index − (N − 1), times dt.
    xcorr = signal.fftconvolve(sim, real[::-1], mode="full", axes=0)
    max_lag = (np.argmax(np.abs(xcorr), axis=0) - (n - 1)) * dt
    q75, q25 = np.percentile(err, [75, 25], axis=0)
    out = {
        "rmse": np.sqrt(np.mean(err ** 2, axis=0)),
        "mae": abs_err.mean(axis=0),
        "mape": mape,
        "corr": corr,
        "cos_sim": cos,
        "max_lag": max_lag.astype(np.float64),
        "large_gap_ratio": (abs_err >= threshold).mean(axis=0),
        "gap_iqr": q75 - q25,
        "gap_range": err.max(axis=0) - err.min(axis=0),
    }
    if smoothness:
        for side, values in (("sim", sim), ("real", real)):
            rate = np.diff(values, axis=0) / dt
            out[f"{side}_smoothness_mean"] = np.abs(rate).mean(axis=0)
            out[f"{side}_smoothness_var"] = rate.var(axis=0)
    return out
