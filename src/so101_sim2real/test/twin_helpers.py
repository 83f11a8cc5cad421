"""Runs of the virtual SO-101 in simulated time for the twin's tests: the policy's commands at 50 Hz, the
measured joint states at 100 Hz, each stamped as a ROS graph would stamp them (no DDS, no wall clock)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from so101_gaponet.excitation import excitation_motion
from so101_sim2real.twin import GapSample, GapTwin
from so101_sim2real.twin_band import GapSeries
from so101_virtual.profiles import GapProfile
from so101_virtual.sysid.simulate import ArmPlant

STATE_PERIOD = 0.01  # s: the driver's 100 Hz
STATE_PHASE = 0.0023  # s: the driver's cycle is not in phase with the policy


@dataclass(frozen=True)
class ArmRun:
    command_time: np.ndarray  # (N,) s
    command: np.ndarray  # (N, J) rad
    state_time: np.ndarray  # (M,) s
    position: np.ndarray  # (M, J) rad, as the servos report it
    velocity: np.ndarray  # (M, J) rad/s, finite differences of the reported positions

    def events(self) -> list[tuple[float, str, int]]:
        """Every message in the order of its stamp: ("command" | "state", index)."""
        return sorted([(float(t), "state", i) for i, t in enumerate(self.state_time)]
                      + [(float(t), "command", i) for i, t in enumerate(self.command_time)])


def arm_run(profile: GapProfile | str, seed: int, seconds: float, origin: float = 1000.0) -> ArmRun:
    """An excitation motion played on the virtual arm with ``profile`` (stamps from ``origin`` s)."""
    motion = excitation_motion(seed, duration=seconds)
    plant = ArmPlant(profile, motion.position[0])
    state_time = np.arange(STATE_PHASE, float(motion.time[-1]), STATE_PERIOD)
    positions = np.empty((len(state_time), motion.position.shape[1]))
    run = ArmRun(motion.time + origin, motion.position, state_time + origin, positions, np.zeros_like(positions))
    for when, kind, index in run.events():
        if kind == "state":
            positions[index] = plant.read(when - origin)
        else:
            plant.read(when - origin)
            plant.send(motion.position[index])
    run.velocity[1:] = np.diff(positions, axis=0) / STATE_PERIOD
    return run


def feed(twin: GapTwin, run: ArmRun) -> list[GapSample]:
    """Every message of ``run`` to the twin in stamp order; the samples it paired."""
    out: list[GapSample] = []
    for when, kind, index in run.events():
        if kind == "state":
            out += twin.on_measured(when, run.position[index], run.velocity[index])
        else:
            out += twin.on_command(when, run.command[index])
    return out


def gap_series(name: str, samples: list[GapSample]) -> GapSeries:
    time = np.array([s.stamp for s in samples])
    return GapSeries(name, time, np.array([s.position_gap for s in samples]), np.array([s.velocity_gap for s in samples]),
                     np.ones(len(time), dtype=bool))
