"""GapONet benchmarks, each beside a baseline measured in the same run.

- Compensator step latency with the shipped compensator, beside a passthrough step. A step is what
  the node does per policy command: history update, model, clipping, output. Target: p99 ≤ 0.2 ms.
(The sim-delta model's benchmarks: :mod:`so101_sim2real.sim_delta.bench`.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from so101_common.bench import BenchResult, percentile, time_calls
from so101_common.joints import JOINT_NAMES
from so101_gaponet.compensator import Compensator, CompensatorConfig
from so101_gaponet.model_file import load_model

__all__ = ["benchmarks"]

STEPS = 3000
TARGET_P99_MS = 0.2


def _step_times(comp: Compensator) -> list[float]:
    rng = np.random.default_rng(0)
    positions = rng.uniform(-0.5, 0.5, (STEPS, len(JOINT_NAMES)))
    velocities = rng.uniform(-1.0, 1.0, (STEPS, len(JOINT_NAMES)))
    counter = iter(range(10 * STEPS))

    def step() -> None:
        i = next(counter) % STEPS
        comp.update_measured(positions[i], velocities[i], stamp=i * 0.02)
        comp.compensate(positions[i] + 0.01, now=i * 0.02)

    time_calls(step, 200)  # warm caches and the backend before measuring
    return time_calls(step, STEPS)


def benchmarks(model_path: Path) -> Iterator[BenchResult]:
    """``model_path``: the compensator to time (``so101 bench`` passes the shipped one)."""
    model = load_model(model_path)
    config = CompensatorConfig(joints=JOINT_NAMES)
    passthrough = _step_times(Compensator(config))
    with_model = _step_times(Compensator(config, model))
    for q in (50, 99):
        yield BenchResult(
            name=f"gaponet.step_latency_p{q}", value=percentile(with_model, q) * 1e3, unit="ms",
            baseline=percentile(passthrough, q) * 1e3, baseline_name="passthrough step (no model), same run",
            better="lower", target=TARGET_P99_MS if q == 99 else None,
        )

