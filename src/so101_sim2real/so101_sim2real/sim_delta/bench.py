"""Sim-delta benchmarks, each beside a baseline measured in the same run.

- Δ inference per replay tick with the shipped sim-delta model (the replay's filter: history
  update, command look-ahead, model, clipping), beside the same filter with a zero Δ function.
  Target: p99 ≤ 0.2 ms.
- Training time (MLP, the shipped architecture) on a small fixed set (three synthetic lagged-arm
  runs of 20 s, :mod:`so101_sim2real.sim_delta.synthetic`), beside the per-joint linear baseline
  on the same set.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from so101_common.bench import BenchResult, percentile, time_calls
from so101_common.joints import JOINT_NAMES
from so101_gaponet.model_file import load_model

__all__ = ["benchmarks"]

STEPS = 3000
TARGET_P99_MS = 0.2


def _filter_times(delta_fn, metadata, reset_state=None) -> list[float]:
    from so101_sim2real.sim_delta.filter import SimDeltaFilter

    rng = np.random.default_rng(0)
    commands = rng.uniform(-0.5, 0.5, (STEPS, len(JOINT_NAMES)))
    states = rng.uniform(-0.5, 0.5, (STEPS, 2, len(JOINT_NAMES)))
    tick = SimDeltaFilter(delta_fn, metadata, np.arange(STEPS) * 0.02, commands, reset_state)
    counter = iter(range(10 * STEPS))

    def step() -> None:
        i = next(counter) % STEPS
        tick(i * 0.02, commands[i], states[i, 0], states[i, 1])

    time_calls(step, 200)
    return time_calls(step, STEPS)


def benchmarks(model_path: Path) -> Iterator[BenchResult]:
    """``model_path``: the sim-delta model to time (``so101 bench`` passes the shipped one)."""
    import time

    from so101_sim2real.sim_delta.synthetic import lagged_arm_recording
    from so101_sim2real.sim_delta.trainer import SimDeltaConfig, train_sim_delta

    model = load_model(model_path, role="sim_delta")
    with_model = _filter_times(model.delta, model.metadata, model.reset_state)
    zero = _filter_times(lambda history, commands: np.zeros(len(JOINT_NAMES)), model.metadata, lambda: None)
    yield BenchResult(name="sim_delta.tick_p99", value=percentile(with_model, 99) * 1e3, unit="ms",
                      baseline=percentile(zero, 99) * 1e3, baseline_name="the same filter with Δ = 0 (no model), same run",
                      better="lower", target=TARGET_P99_MS)
    recordings = [lagged_arm_recording(f"bench{i}", 20.0, i) for i in range(3)]
    seconds = {}
    for arch in ("mlp", "linear"):
        start = time.perf_counter()
        train_sim_delta(recordings, SimDeltaConfig(arch=arch, epochs=None if arch == "linear" else 10, sample_stride=1))
        seconds[arch] = time.perf_counter() - start
    yield BenchResult(name="sim_delta.train_s", value=seconds["mlp"], unit="s", baseline=seconds["linear"],
                      baseline_name="per-joint linear (ridge) on the same 3 × 20 s synthetic runs, same run",
                      better="lower")

