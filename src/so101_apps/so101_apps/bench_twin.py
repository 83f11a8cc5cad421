"""Live gap twin benchmark: the twin's step at 100 Hz beside the driver's bus cycle, measured in the same run.

One step is what the twin does per 10 ms of a 100 Hz graph (:mod:`so101_sim2real.twin`): take one measured
joint state and one policy command, run the two 200 Hz MuJoCo physics steps they allow, pair the state with
the simulated one, update the rolling RMSE. With the shipped sim-delta model (``model_path``) the command
also carries its action chunk and the sim is driven with ``a + Δ`` at the model's 50 Hz. The commands are an
excitation motion; the "measured" arm is the command 60 ms late (the figures do not depend on the gap).

``twin.step_p50`` / ``twin.step_p99`` (ms) against the driver's bus cycle on the virtual bus
(:func:`so101_apps.bench_driver.measure`: one SYNC_WRITE + SYNC_READ with 1 Mbaud wire timing), the cycle the
driver runs at 100 Hz; ``twin.core_fraction_100hz``: mean step time × 100 Hz, the share of one core the
twin's core needs at 100 Hz (ROS message handling not included), beside the driver cycle's share. The
``twin.sim_delta.*`` figures are the same with the model.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from so101_apps.bench_driver import measure as measure_driver
from so101_common.bench import BenchResult, percentile
from so101_common.joints import JOINT_NAMES
from so101_gaponet.chunks import ActionChunk
from so101_gaponet.excitation import excitation_motion
from so101_sim2real.replay.mujoco_backend import MujocoSim, MujocoSimConfig
from so101_sim2real.sim_delta.filter import LiveSimDeltaFilter
from so101_sim2real.twin import GapTwin

__all__ = ["benchmarks", "measure_steps"]

RATE_HZ = 100.0
LAG_STEPS = 6  # the "measured" arm: the command 60 ms late
CHUNK_ROWS = 10  # upcoming commands sent with each command (the motion player's default is of this order)


def measure_steps(seconds: float, model_path: Path | None = None) -> list[float]:
    """Durations (s) of the twin's 100 Hz steps over ``seconds`` of stream (after 1 s of warm-up)."""
    steps = int((seconds + 1.0) * RATE_HZ)
    motion = excitation_motion(0, duration=steps / RATE_HZ + 1.0, rate_hz=RATE_HZ)
    command, stamp = motion.position[:steps], 1000.0 + motion.time[:steps]
    measured = np.vstack([np.repeat(command[:1], LAG_STEPS, axis=0), command[:-LAG_STEPS]])
    velocity = np.gradient(measured, 1.0 / RATE_HZ, axis=0)
    delta = None
    config = MujocoSimConfig()
    if model_path is not None:
        from so101_gaponet.model_file import load_model

        model = load_model(model_path, joints=JOINT_NAMES, role="sim_delta")
        delta = LiveSimDeltaFilter(model.delta, model.metadata, JOINT_NAMES, model.reset_state)
        config = MujocoSimConfig(control_rate_hz=model.metadata.rate_hz)
    twin = GapTwin(MujocoSim(config), delta=delta)
    offsets = [k / RATE_HZ for k in range(CHUNK_ROWS)]
    durations = []
    for k in range(steps):
        start = time.perf_counter()
        twin.on_measured(stamp[k] + 0.002, measured[k], velocity[k])
        if delta is not None:  # as the node does with each chunk message
            delta.chunk = ActionChunk.from_points(stamp[k], offsets, JOINT_NAMES, command[k:k + CHUNK_ROWS].tolist()
                                                  if k + CHUNK_ROWS <= steps else command[-CHUNK_ROWS:].tolist(),
                                                  JOINT_NAMES)
        twin.on_command(stamp[k], command[k])
        durations.append(time.perf_counter() - start)
    return durations[int(RATE_HZ):]


def _results(prefix: str, twin: list[float], driver: list[float]) -> Iterator[BenchResult]:
    baseline = "the driver's bus cycle (virtual bus, 1 Mbaud timing), same run"
    yield BenchResult(f"{prefix}.step_p50", percentile(twin, 50) * 1e3, "ms", percentile(driver, 50) * 1e3, baseline,
                      better="lower")
    yield BenchResult(f"{prefix}.step_p99", percentile(twin, 99) * 1e3, "ms", percentile(driver, 99) * 1e3, baseline,
                      better="lower")
    yield BenchResult(f"{prefix}.core_fraction_100hz", float(np.mean(twin)) * RATE_HZ, "core",
                      float(np.mean(driver)) * RATE_HZ, "the driver's bus cycle at 100 Hz, same run", better="lower")


def benchmarks(seconds: float = 10.0, model_path: Path | None = None) -> Iterator[BenchResult]:
    driver, _ = measure_driver(2.0)
    yield from _results("twin", measure_steps(seconds), driver)
    if model_path is not None:
        yield from _results("twin.sim_delta", measure_steps(seconds, model_path), driver)


if __name__ == "__main__":
    for result in benchmarks(model_path=Path(__file__).resolve().parents[3] / "models" / "so101_sim_delta.onnx"):
        print(result.to_json())
