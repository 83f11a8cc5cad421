"""Data-side benchmarks: paired-episode build and metrics throughput, each beside a naive baseline run now."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import numpy as np

from so101_common.bench import BenchResult
from so101_common.trajectory import JointTrajectory
from so101_sim2real.analysis.metrics import compare
from so101_sim2real.pairing.align import resample

__all__ = ["benchmarks"]

_SECONDS = 60.0  # one minute of 50 Hz real data against 200 Hz sim data, like a SAGE motion


def benchmarks() -> Iterator[BenchResult]:
    real_state, sim_state = _streams()
    grid = real_state.time[0] + np.arange(0, _SECONDS - 1, 0.02)

    vectorised = _best_time(lambda: resample(sim_state, grid))
    loop = _best_time(lambda: _loop_resample(sim_state, grid), repeats=1)
    yield BenchResult("sim2real.resample_60s", vectorised * 1e3, "ms", loop * 1e3,
                      "per-sample Python loop resampling onto the same grid", better="lower")

    sim, real = sim_state.position[:3000], real_state.position[:3000]
    fast = _best_time(lambda: compare(sim, real, 0.02, 0.05, smoothness=True))
    slow = _best_time(lambda: _loop_metrics(sim, real), repeats=1)
    yield BenchResult("sim2real.metrics_3000x6", fast * 1e3, "ms", slow * 1e3,
                      "per-joint Python loops (rmse, mae, corr, lag only)", better="lower")


def _streams() -> tuple[JointTrajectory, JointTrajectory]:
    rng = np.random.default_rng(0)
    knots = rng.normal(scale=0.3, size=(int(_SECONDS) * 2 + 2, 6))

    def motion(t: np.ndarray) -> np.ndarray:
        return np.stack([np.interp(t, np.arange(len(knots)) * 0.5, knots[:, j]) for j in range(6)], 1)

    t_real = np.arange(0, _SECONDS, 0.02)
    t_sim = np.arange(0, _SECONDS, 0.005)
    real_state = JointTrajectory(1000 + t_real, motion(t_real - 0.1))
    sim_state = JointTrajectory(t_sim, motion(t_sim - 0.02), np.zeros((len(t_sim), 6)), np.zeros((len(t_sim), 6)))
    return real_state, sim_state


def _best_time(work: Callable[[], object], repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def _loop_resample(traj: JointTrajectory, grid: np.ndarray) -> np.ndarray:
    """The naive way: walk the source for every grid sample and joint."""
    out = np.empty((len(grid), traj.position.shape[1]))
    k = 0
    for i, t in enumerate(grid):
        while k + 1 < len(traj.time) - 1 and traj.time[k + 1] <= t:
            k += 1
        w = (t - traj.time[k]) / (traj.time[k + 1] - traj.time[k])
        for j in range(traj.position.shape[1]):
            out[i, j] = traj.position[k, j] * (1 - w) + traj.position[k + 1, j] * w
    return out


def _loop_metrics(sim: np.ndarray, real: np.ndarray) -> list[dict[str, float]]:
    results = []
    for j in range(sim.shape[1]):
        s, r = list(sim[:, j]), list(real[:, j])
        n = len(s)
        err = [a - b for a, b in zip(s, r, strict=True)]
        results.append({
            "rmse": (sum(e * e for e in err) / n) ** 0.5,
            "mae": sum(abs(e) for e in err) / n,
            "corr": float(np.corrcoef(s, r)[0, 1]),
            "max_lag": float(np.argmax(np.abs(np.correlate(s, r, mode="full")))),
        })
    return results
