"""Benchmarks of the virtual SO-101's physics (``so101 bench``, JSON lines).

``virtual.physics_cpu_per_simulated_s``: CPU seconds the arm's physics takes per simulated second
(six firmware loops, their registers and MuJoCo at the profile's 1 kHz), with torque on and every
joint moving; beside the baseline of MuJoCo's own steps over the same simulated time (the floor under
the firmware and register layer). Below 1 it keeps up with wall time on an idle core; under the
demo's load on two cores every tenth matters (the thread that falls behind makes the servos' answers
stale).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator

import mujoco

from so101_common.bench import BenchResult
from so101_feetech.control_table import Register
from so101_virtual.robot import VirtualSO101

__all__ = ["benchmarks"]

_GOAL_STEPS = 300  # each servo's goal moves this far from where it is, every 0.3 s


def _physics_cpu(simulated_s: float) -> float:
    robot = VirtualSO101("default")
    for memory in robot.memories:
        memory.set(Register.Torque_Enable, 1)
    robot.step(0.1)
    start = time.process_time()
    for k in range(round(simulated_s / 0.1)):
        if k % 3 == 0:
            for memory in robot.memories:
                sign = 1 if k % 6 == 0 else -1
                memory.set(Register.Goal_Position, memory.get(Register.Present_Position) + sign * _GOAL_STEPS)
        robot.step(0.1)
    return (time.process_time() - start) / simulated_s


def _mujoco_cpu(simulated_s: float) -> float:
    physics = VirtualSO101("default").physics
    steps = round(simulated_s / physics.dt)
    start = time.process_time()
    for _ in range(steps):
        mujoco.mj_step(physics.model, physics.data)
    return (time.process_time() - start) / simulated_s


def benchmarks(simulated_s: float = 2.0, repeats: int = 5) -> Iterator[BenchResult]:
    # medians of several runs: the machines this runs on are shared, single runs vary by a third
    physics = statistics.median(_physics_cpu(simulated_s) for _ in range(repeats))
    floor = statistics.median(_mujoco_cpu(simulated_s) for _ in range(repeats))
    yield BenchResult("virtual.physics_cpu_per_simulated_s", physics, "s/s", floor,
                      "MuJoCo's own steps over the same simulated time", better="lower")
