"""Compensator training data and held-out closed-loop evaluation on the virtual SO-101, in simulated time.

The same loop as the deploy chain, without DDS or a wall clock: per 20 ms frame the virtual arm's own
physics and firmware (:class:`so101_virtual.sysid.simulate.ArmPlant`) report their position, the
compensator core computes the command (with the motion's future as its look-ahead, as the motion
player's action chunk gives it), and the plant gets it as its new goal. The reference is what the
MuJoCo replay sim does with the policy's commands (the gap the compensator exists to close), so a
result reads "real-arm-vs-sim RMSE without → with compensation", per joint.

Used by ``so101 train-compensator`` (the shipped default model) and by the tests; the demo runs the
same comparison through ROS on the virtual arm.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from so101_common.joints import JOINT_NAMES, JOINTS
from so101_common.paired_dataset import PairedDataset, PairedEpisode
from so101_common.trajectory import JointTrajectory
from so101_gaponet.compensator import Compensator, CompensatorConfig
from so101_gaponet.runtime import GapModel
from so101_sim2real.replay.mujoco_backend import MujocoSim, MujocoSimConfig
from so101_virtual.profiles import GapProfile, load_profile, profile_from_dict
from so101_virtual.sysid.simulate import ArmPlant

__all__ = ["JointResult", "MotionResult", "closed_loop", "excitation_dataset", "perturbed_profile", "reference",
           "evaluate", "pooled"]

RATE_HZ = 50.0

Controller = Callable[[int, np.ndarray], np.ndarray]


def reference(motion: JointTrajectory) -> np.ndarray:
    """(N, J) rad: the MuJoCo replay sim's position at each command stamp for ``motion``'s commands."""
    sim = MujocoSim(MujocoSimConfig(control_rate_hz=RATE_HZ, sample="control"))
    state = sim.simulate(motion, motion.position[0])
    return np.asarray(state.position[:len(motion.time)])


def closed_loop(profile: GapProfile | str, motion: JointTrajectory, model: GapModel | None = None,
                feedback_gain: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(reported positions, sent commands)`` (N, J) of the virtual arm playing ``motion``.

    With ``model`` the compensator core sits in the loop and reads the motion's upcoming commands;
    without, the commands go straight to the arm.
    """
    plant = ArmPlant(profile, motion.position[0])
    count = len(motion.time)
    reported = np.zeros((count, len(JOINTS)))
    sent = np.zeros_like(reported)
    compensator = None
    if model is not None:
        gains = None if feedback_gain is None else (feedback_gain,) * len(JOINTS)
        compensator = Compensator(CompensatorConfig(joints=JOINT_NAMES, feedback_gain=gains), model)
    ahead = model.metadata.future_steps - 1 if model is not None else 0
    padded = np.vstack([motion.position, np.repeat(motion.position[-1:], ahead, axis=0)])
    for k in range(count):
        reported[k] = plant.read(float(motion.time[k]))
        if compensator is None:
            sent[k] = motion.position[k]
        else:
            compensator.update_measured(reported[k], stamp=float(motion.time[k]))
            sent[k] = compensator.compensate(motion.position[k], now=float(motion.time[k]),
                                             upcoming=padded[k + 1:k + 1 + ahead]).command
        plant.send(sent[k])
    return reported, sent


def excitation_dataset(profile: GapProfile | str, motions: Sequence[JointTrajectory], names: Sequence[str]) -> PairedDataset:
    """A paired dataset of ``motions`` played uncompensated on the virtual arm, beside the MuJoCo replay."""
    loaded = load_profile(profile)
    dataset = PairedDataset(rate_hz=RATE_HZ, metadata={"profile": loaded.name, "source": "virtual SO-101, simulated time"})
    for name, motion in zip(names, motions, strict=True):
        real, _ = closed_loop(loaded, motion)
        sim = reference(motion)
        nan = np.full_like(real, np.nan)
        dataset.add(PairedEpisode(name=name, time=motion.time - motion.time[0], command=motion.position,
                                  real_position=real, real_velocity=nan, real_effort=nan,
                                  sim_position=sim, sim_velocity=nan, sim_effort=nan,
                                  metadata={"profile": loaded.name, "motion": name}))
    return dataset


@dataclass
class JointResult:
    """One joint on one motion: real-vs-sim position RMSE (rad) without and with compensation."""

    before: float
    after: float

    @property
    def cut_percent(self) -> float:
        return 100.0 * (1.0 - self.after / self.before) if self.before > 0 else 0.0


@dataclass
class MotionResult:
    profile: str
    motion: str
    joints: dict[str, JointResult] = field(default_factory=dict)
    squared: dict[str, tuple[float, float, int]] = field(default_factory=dict)  # sums for pooling

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "motion": self.motion,
                "joints": {n: {"before": r.before, "after": r.after, "cut_percent": r.cut_percent}
                           for n, r in self.joints.items()}}


def evaluate(profile: GapProfile | str, motions: Sequence[tuple[str, JointTrajectory]], model: GapModel,
             feedback_gain: float | None = None) -> list[MotionResult]:
    """Per motion and joint: real-vs-sim RMSE of the virtual arm without and with ``model``."""
    loaded = load_profile(profile)
    results = []
    for name, motion in motions:
        sim = reference(motion)
        before, _ = closed_loop(loaded, motion)
        after, _ = closed_loop(loaded, motion, model, feedback_gain)
        result = MotionResult(loaded.name, name)
        for j, joint in enumerate(JOINT_NAMES):
            b = float(np.sum((before[:, j] - sim[:, j]) ** 2))
            a = float(np.sum((after[:, j] - sim[:, j]) ** 2))
            result.squared[joint] = (b, a, len(sim))
            result.joints[joint] = JointResult(math.sqrt(b / len(sim)), math.sqrt(a / len(sim)))
        results.append(result)
    return results


def pooled(results: Sequence[MotionResult]) -> dict[str, JointResult]:
    """Per joint, RMSE over every frame of every result (each motion weighted by its length)."""
    out = {}
    for joint in JOINT_NAMES:
        b = sum(r.squared[joint][0] for r in results)
        a = sum(r.squared[joint][1] for r in results)
        n = sum(r.squared[joint][2] for r in results)
        out[joint] = JointResult(math.sqrt(b / n), math.sqrt(a / n))
    return out


# The joint figures a real arm's gear train and motor vary in from unit to unit (log-normal factors).
_VARIED = ("backlash", "coulomb_friction", "output_friction", "viscous_friction", "stall_torque", "no_load_speed",
           "armature")


def perturbed_profile(base: GapProfile | str, seed: int, spread: float = 0.3) -> GapProfile:
    """An arm drawn around ``base``: each joint's mechanics and the loop gains scaled by log-normal factors.

    For "profiles the model was not developed on": seeds the developer never looked at give arms
    nobody tuned for.
    """
    loaded = load_profile(base)
    rng = np.random.default_rng(seed)
    joints: dict[str, dict[str, float]] = {}
    for name in JOINT_NAMES:
        params = loaded.joint(name)
        joints[name] = {key: float(getattr(params, key)) * float(np.exp(rng.normal(0.0, spread))) for key in _VARIED}
        joints[name]["no_load_speed"] = max(joints[name]["no_load_speed"], 0.5)
    firmware = {key: float(getattr(loaded.firmware, key)) * float(np.exp(rng.normal(0.0, spread)))
                for key in ("p_gain", "d_gain", "acceleration_unit")}
    data = {"name": f"{loaded.name}~{seed}", "description": f"{loaded.name} with mechanics drawn by seed {seed}",
            "seed": seed, "firmware": firmware, "joints": joints}
    return profile_from_dict(data, source=f"perturbed {loaded.name} seed {seed}", base=loaded)
