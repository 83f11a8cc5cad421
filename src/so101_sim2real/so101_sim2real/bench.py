"""so101_sim2real benchmarks: MuJoCo in-process replay speed (beside a naive stepping loop) and the data side."""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np

from so101_common.bench import BenchResult
from so101_common.joints import JOINTS
from so101_common.trajectory import JointTrajectory
from so101_sim2real.bench_data import benchmarks as data_benchmarks
from so101_sim2real.replay.mujoco_backend import MujocoSim

__all__ = ["benchmarks"]

_SECONDS = 20.0  # replayed motion length: a 50 Hz sinusoid sweep on every joint


def _motion() -> JointTrajectory:
    time_s = np.arange(0.0, _SECONDS, 0.02)
    phase = np.arange(len(JOINTS))
    position = 0.4 * np.sin(time_s[:, None] * (1.0 + 0.3 * phase) + phase)
    return JointTrajectory(time_s, position)


def _naive_replay(sim: MujocoSim, command: JointTrajectory) -> None:
    """The baseline: one mj_step per Python call, reading the state back after each, as a simple loop would."""
    sim.reset(command.position[0])
    rows = []
    k = 0
    steps = int((command.time[-1] - command.time[0]) / sim.config.physics_dt) + 1
    for i in range(steps):
        t = command.time[0] + i * sim.config.physics_dt
        while k + 1 < len(command) and command.time[k + 1] <= t + 1e-9:
            k += 1
        sim.step_command(command.position[k])
        rows.append((sim.position(), sim.velocity(), sim.effort()))


def benchmarks() -> Iterator[BenchResult]:
    sim = MujocoSim()
    command = _motion()
    fast = min(_timed(lambda: sim.simulate(command, command.position[0])) for _ in range(3))
    naive = _timed(lambda: _naive_replay(sim, command))
    yield BenchResult("sim2real.mujoco_replay_speed", _SECONDS / fast, "x realtime", _SECONDS / naive,
                      "Python loop: one mj_step + state read per call", better="higher", target=200.0)
    yield from data_benchmarks()


def _timed(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start
