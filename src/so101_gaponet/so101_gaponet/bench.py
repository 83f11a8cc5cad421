"""GapONet benchmarks, each beside a baseline measured in the same run.

- Compensator step latency with the shipped compensator, beside a passthrough step. A step is what
  the node does per policy command: history update, model, clipping, output. Target: p99 ≤ 0.2 ms.
- Sim-delta Δ inference per replay tick with the shipped sim-delta model (the replay's filter:
  history update, command look-ahead, model, clipping), beside the same filter with a zero Δ
  function. Target: p99 ≤ 0.2 ms.
- Sim-delta training time (MLP, the shipped architecture) on a small fixed set (three synthetic
  lagged-arm runs of 20 s, :mod:`so101_gaponet.sim_delta.synthetic`), beside the per-joint linear
  baseline on the same set.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from so101_description.joints import JOINT_NAMES
from so101_gaponet.compensator import Compensator, CompensatorConfig
from so101_gaponet.make_default import DEFAULT_MODEL as SHIPPED_MODEL
from so101_gaponet.model_file import load_model
from so101_gaponet.sim_delta.cli import SHIPPED_SIM_DELTA
from so101_testing.bench import BenchResult, percentile, time_calls

__all__ = ["benchmarks", "SHIPPED_MODEL", "SHIPPED_SIM_DELTA"]

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


def _filter_times(delta_fn, metadata) -> list[float]:
    from so101_gaponet.sim_delta.filter import SimDeltaFilter

    rng = np.random.default_rng(0)
    commands = rng.uniform(-0.5, 0.5, (STEPS, len(JOINT_NAMES)))
    states = rng.uniform(-0.5, 0.5, (STEPS, 2, len(JOINT_NAMES)))
    tick = SimDeltaFilter(delta_fn, metadata, np.arange(STEPS) * 0.02, commands)
    counter = iter(range(10 * STEPS))

    def step() -> None:
        i = next(counter) % STEPS
        tick(i * 0.02, commands[i], states[i, 0], states[i, 1])

    time_calls(step, 200)
    return time_calls(step, STEPS)


def _sim_delta_benchmarks(model_path: Path) -> Iterator[BenchResult]:
    import time

    from so101_gaponet.sim_delta.synthetic import lagged_arm_recording
    from so101_gaponet.sim_delta.trainer import SimDeltaConfig, train_sim_delta

    model = load_model(model_path, role="sim_delta")
    with_model = _filter_times(model.delta, model.metadata)
    zero = _filter_times(lambda history, commands: np.zeros(len(JOINT_NAMES)), model.metadata)
    yield BenchResult(name="gaponet.sim_delta_tick_p99", value=percentile(with_model, 99) * 1e3, unit="ms",
                      baseline=percentile(zero, 99) * 1e3, baseline_name="the same filter with Δ = 0 (no model), same run",
                      better="lower", target=TARGET_P99_MS)
    recordings = [lagged_arm_recording(f"bench{i}", 20.0, i) for i in range(3)]
    seconds = {}
    for arch in ("mlp", "linear"):
        start = time.perf_counter()
        train_sim_delta(recordings, SimDeltaConfig(arch=arch, epochs=None if arch == "linear" else 10, sample_stride=1))
        seconds[arch] = time.perf_counter() - start
    yield BenchResult(name="gaponet.sim_delta_train_s", value=seconds["mlp"], unit="s", baseline=seconds["linear"],
                      baseline_name="per-joint linear (ridge) on the same 3 × 20 s synthetic runs, same run",
                      better="lower")


def benchmarks(model_path: Path = SHIPPED_MODEL, sim_delta_path: Path = SHIPPED_SIM_DELTA) -> Iterator[BenchResult]:
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
    yield from _sim_delta_benchmarks(sim_delta_path)


if __name__ == "__main__":
    for result in benchmarks():
        print(result.to_json())
