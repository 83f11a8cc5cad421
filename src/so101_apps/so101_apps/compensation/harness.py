"""Compensator training data and held-out closed-loop evaluation on the virtual SO-101, in simulated time.

The same loop as the deploy chain, without DDS or a wall clock: per 20 ms frame the compensator core
reads the newest position the driver has delivered from the virtual arm's own physics and firmware
(:class:`so101_virtual.sysid.simulate.ArmPlant`), computes the command (with the motion's future as
its look-ahead, as the motion player's action chunk gives it), the deployment's safety filter
(``config/safety.yaml``: position, velocity and acceleration bounds, the leash to the measured arm) bounds
it, and the plant gets that as its new goal once the bus is free. The bus is the driver's
(:class:`DriverBus`): a read cycle at up to 100 Hz that takes the profile's adapter latency (and jitter)
on top of the wire time, so on a slow bus the positions arrive late and less often and a goal may wait for
the read in progress, as through ROS. The reference is what the MuJoCo replay sim does with the policy's
commands (the gap the compensator exists to close), so a result reads "real-arm-vs-sim RMSE without → with compensation", per joint.

Used by ``so101 train-compensator`` (the shipped default model) and by the tests; the demo runs the
same comparison through ROS on the virtual arm.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from so101_bringup.share import config_dir
from so101_common.joints import JOINT_NAMES, JOINTS
from so101_common.paired_dataset import PairedDataset, PairedEpisode
from so101_common.trajectory import JointTrajectory
from so101_gaponet.compensator import Compensator, CompensatorConfig
from so101_gaponet.runtime import GapModel
from so101_safety.config import SafetyConfig, load_config
from so101_safety.core import SafetyFilter
from so101_sim2real.replay.mujoco_backend import MujocoSim, MujocoSimConfig
from so101_virtual.profiles import GapProfile, load_profile, profile_from_dict
from so101_virtual.sysid.simulate import ArmPlant

__all__ = ["DriverBus", "LoopRun", "ServoFault", "JointResult", "MotionResult", "Stability", "closed_loop", "move_and_hold", "stability", "excitation_dataset", "perturbed_profile", "reference",
           "evaluate", "pooled"]

RATE_HZ = 50.0
DRIVER_RATE_HZ = 100.0  # the driver node's default rate_hz
# s: a sync read of the six servos beside the adapter latency (wire time, host handling). Measured with the
# driver core on the virtual bus: 2.1 ms per cycle at 0.1 ms latency, 14.3 ms at 12 ms, 17.3 ms at 15 ms.
READ_OVERHEAD_S = 0.002
WRITE_S = 0.0005  # s: a sync write of six goals (no reply)

Controller = Callable[[int, np.ndarray], np.ndarray]


class ServoFault(RuntimeError):
    """A servo's protection tripped while a motion played (faults are not gaps: nothing to judge or train on)."""

    def __init__(self, profile: str, joint: str, status: int, when: float) -> None:
        self.profile, self.joint, self.status, self.when = profile, joint, status, when
        super().__init__(f"{profile}: {joint} tripped a protection (status {status}) at {when:.2f} s")


class DriverBus:
    """When the driver reads the arm and when a goal reaches it, in simulated time.

    The driver's read cycle runs on a 100 Hz clock that skips the ticks a late cycle overran (as a ROS
    timer does); a cycle takes ``latency + U(0, jitter) + READ_OVERHEAD_S`` (the profile's ``bus``). The servos
    sample their position when the request arrives (the cycle's start) and the driver delivers it at the
    cycle's end. A goal is written as the command arrives (the driver's ``write_on_command``), after the
    read in progress if there is one. ``seed`` sets the clock's phase against the commands and the jitter.
    """

    def __init__(self, profile: GapProfile, seed: int = 0) -> None:
        self.latency, self.jitter = float(profile.bus.latency), float(profile.bus.jitter)
        self._rng = np.random.default_rng(seed)
        self._period = 1.0 / DRIVER_RATE_HZ
        self._tick = float(self._rng.uniform(0.0, self._period))
        self._reads: list[tuple[float, float]] = []  # (start, end) of the cycles scheduled so far
        self._given = 0  # reads handed out by reads_until

    @property
    def cycle_rate_hz(self) -> float:
        """The read rate the schedule so far achieved."""
        if len(self._reads) < 2:
            return DRIVER_RATE_HZ
        return (len(self._reads) - 1) / (self._reads[-1][0] - self._reads[0][0])

    def _schedule(self, until: float) -> None:
        while not self._reads or self._reads[-1][0] <= until:
            start = self._tick if not self._reads else max(self._tick, self._reads[-1][1])
            end = start + self.latency + float(self._rng.uniform(0.0, self.jitter)) + READ_OVERHEAD_S
            self._reads.append((start, end))
            self._tick += self._period * max(1, math.ceil((end - self._tick) / self._period))

    def apply_time(self, when: float) -> float:
        """When a goal sent at ``when`` reaches the servos."""
        self._schedule(when)
        busy = max((end for start, end in self._reads if start <= when < end), default=when)
        return max(when, busy) + WRITE_S

    def reads_until(self, when: float) -> list[tuple[float, float]]:
        """The (start, end) of the reads starting by ``when`` not handed out before, in order."""
        self._schedule(when)
        count = sum(1 for start, _ in self._reads[self._given:] if start <= when)
        out = self._reads[self._given:self._given + count]
        self._given += count
        return out


@functools.cache
def deployment_safety() -> SafetyConfig:
    """The safety filter's bounds as the deploy graph runs it (``config/safety.yaml``)."""
    return load_config(config_dir() / "safety.yaml")


def reference(motion: JointTrajectory) -> np.ndarray:
    """(N, J) rad: the MuJoCo replay sim's position at each command stamp for ``motion``'s commands."""
    sim = MujocoSim(MujocoSimConfig(control_rate_hz=RATE_HZ, sample="control"))
    state = sim.simulate(motion, motion.position[0])
    return np.asarray(state.position[:len(motion.time)])


class LoopRun(NamedTuple):
    """One motion played in :func:`closed_loop`, (N, J) per frame of the motion."""

    measured: np.ndarray  # rad: the arm's position at the frame, from the servos' samples at the instants they were taken
    sent: np.ndarray  # rad: what the policy or the compensator sent (the arm gets it through the safety filter)
    delivered: np.ndarray  # rad: the newest position the driver had delivered by the frame (what the compensator saw)


def closed_loop(profile: GapProfile | str, motion: JointTrajectory, model: GapModel | None = None,
                feedback_gain: float | None = None, seed: int = 0,
                compensator: Compensator | None = None) -> LoopRun:
    """The virtual arm playing ``motion`` (:class:`LoopRun`); the arm gets the sent commands through the safety
    filter (:func:`deployment_safety`).

    The compensator sees, at each frame, the newest position the driver has delivered by then (:class:`DriverBus`,
    ``seed`` its phase and jitter). What is recorded is the position at the frame itself, interpolated between the
    servos' samples at the instants they were taken, as the recorder's pairing makes of the driver's joint states
    (stamped when the servos sampled them): on a slow bus a sample arrives a round trip after it was taken, and
    that lag is the compensator's to live with, not a gap of the arm. With ``model`` (or a ready
    ``compensator``) the compensator core sits in the loop and reads the motion's upcoming commands; without, the
    commands go straight to the arm. A servo protection that trips raises :class:`ServoFault`. Positions and goals
    are in the driver's units (the arm's LeRobot calibration: ``wrist_roll``'s zero lies between two encoder steps).
    """
    loaded = load_profile(profile)
    plant = ArmPlant(loaded, motion.position[0], calibrated=True)
    bus = DriverBus(loaded, seed)
    count = len(motion.time)
    delivered = np.zeros((count, len(JOINTS)))
    sent = np.zeros_like(delivered)
    if compensator is None and model is not None:
        gains = None if feedback_gain is None else (feedback_gain,) * len(JOINTS)
        compensator = Compensator(CompensatorConfig(joints=JOINT_NAMES, feedback_gain=gains), model)
    ahead = compensator.future_steps - 1 if compensator is not None else 0
    padded = np.vstack([motion.position, np.repeat(motion.position[-1:], ahead, axis=0)])
    start = float(motion.time[0])
    newest, newest_stamp = plant.read(0.0), 0.0  # at rest at the first command's pose
    newest_effort = plant.efforts()
    samples: list[tuple[float, np.ndarray]] = [(0.0, newest)]  # (when the servos sampled it, position)
    pending: list[tuple[float, float, np.ndarray, np.ndarray]] = []  # (delivery, sampled, position, effort) of reads under way
    # stepped on each command as it arrives, as the node forwards a command stream at the policy's rate
    bounds = SafetyFilter(deployment_safety())
    bounds.on_measured(JOINT_NAMES, newest.tolist(), efforts=newest_effort.tolist(), stamp=0.0)
    for k in range(count):
        now = float(motion.time[k]) - start
        applied = bus.apply_time(now)
        for read_start, read_end in bus.reads_until(applied):
            position = plant.read(read_start)
            samples.append((read_start, position))
            pending.append((read_end, read_start, position, plant.efforts()))
            status = plant.status()
            if any(status):
                joint = next(k for k, bits in enumerate(status) if bits)
                raise ServoFault(loaded.name, JOINT_NAMES[joint], status[joint], read_start)
        fresh = False
        while pending and pending[0][0] <= now:
            _, newest_stamp, newest, newest_effort = pending.pop(0)
            fresh = True
        delivered[k] = newest
        if fresh:  # with the servos' loads, as the node takes joint_states: a servo reporting none for long is limp
            bounds.on_measured(JOINT_NAMES, newest.tolist(), efforts=newest_effort.tolist(), stamp=now)
        if compensator is None:
            sent[k] = motion.position[k]
        else:
            if fresh:
                compensator.update_measured(newest, stamp=newest_stamp, effort=newest_effort)
            sent[k] = compensator.compensate(motion.position[k], now=now, upcoming=padded[k + 1:k + 1 + ahead]).command
        bounds.on_command(JOINT_NAMES, sent[k].tolist(), now)
        safe = bounds.step(now)
        assert safe is not None  # every joint is measured from the start
        if compensator is not None:
            compensator.goal_reached(np.asarray(safe.positions))
        plant.read(applied)
        plant.send(np.asarray(safe.positions))
    stamps = np.array([when for when, _ in samples])
    positions = np.array([position for _, position in samples])
    frames = motion.time - start
    measured = np.column_stack([np.interp(frames, stamps, positions[:, j]) for j in range(len(JOINTS))])
    return LoopRun(measured, sent, delivered)


def excitation_dataset(profile: GapProfile | str, motions: Sequence[JointTrajectory], names: Sequence[str],
                       seed: int = 0) -> PairedDataset:
    """A paired dataset of ``motions`` played uncompensated on the virtual arm, beside the MuJoCo replay
    (motion ``i``'s bus phase from ``seed + i``)."""
    loaded = load_profile(profile)
    dataset = PairedDataset(rate_hz=RATE_HZ, metadata={"profile": loaded.name, "source": "virtual SO-101, simulated time"})
    for index, (name, motion) in enumerate(zip(names, motions, strict=True)):
        real = closed_loop(loaded, motion, seed=seed + index).measured
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
    # a servo protection that tripped: "uncompensated: …" (the arm cannot play this motion; nothing judged) or
    # "compensated: …" (compensation drove a servo into its protection: a failure); '' = none
    fault: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "motion": self.motion, "fault": self.fault,
                "joints": {n: {"before": r.before, "after": r.after, "cut_percent": r.cut_percent}
                           for n, r in self.joints.items()}}


def evaluate(profile: GapProfile | str, motions: Sequence[tuple[str, JointTrajectory]], model: GapModel,
             feedback_gain: float | None = None, config: CompensatorConfig | None = None,
             seed: int = 0) -> list[MotionResult]:
    """Per motion and joint: real-vs-sim RMSE of the virtual arm without and with ``model`` (a compensator core
    with ``config``, default: every setting the model's, no guard; ``seed``: the bus phase, the same for both)."""
    loaded = load_profile(profile)
    results = []
    for name, motion in motions:
        sim = reference(motion)
        result = MotionResult(loaded.name, name)
        results.append(result)
        try:
            before = closed_loop(loaded, motion, seed=seed).measured
        except ServoFault as fault:
            result.fault = f"uncompensated: {fault}"
            continue
        try:
            compensator = None if config is None else Compensator(config, model)
            after = closed_loop(loaded, motion, model, feedback_gain, seed=seed, compensator=compensator).measured
        except ServoFault as fault:
            result.fault = f"compensated: {fault}"
            continue
        for j, joint in enumerate(JOINT_NAMES):
            b = float(np.sum((before[:, j] - sim[:, j]) ** 2))
            a = float(np.sum((after[:, j] - sim[:, j]) ** 2))
            result.squared[joint] = (b, a, len(sim))
            result.joints[joint] = JointResult(math.sqrt(b / len(sim)), math.sqrt(a / len(sim)))
    return results


def pooled(results: Sequence[MotionResult]) -> dict[str, JointResult]:
    """Per joint, RMSE over every frame of every result without a fault (each motion weighted by its length)."""
    judged = [r for r in results if not r.fault]
    out = {}
    for joint in JOINT_NAMES:
        b = sum(r.squared[joint][0] for r in judged)
        a = sum(r.squared[joint][1] for r in judged)
        n = sum(r.squared[joint][2] for r in judged)
        out[joint] = JointResult(math.sqrt(b / n), math.sqrt(a / n)) if n else JointResult(math.nan, math.nan)
    return out


def move_and_hold(rate_hz: float = RATE_HZ) -> JointTrajectory:
    """Every joint: 1 s out by 15 % of its span and back half way (a reversal), then held for 4 s."""
    t = np.arange(0.0, 6.0, 1.0 / rate_hz)
    centre = np.array([(j.lower + j.upper) / 2 for j in JOINTS])
    reach = np.array([0.15 * (j.upper - j.lower) for j in JOINTS])
    shape = np.interp(t, [0.0, 1.0, 2.0, 6.0], [0.0, 1.0, 0.5, 0.5])
    return JointTrajectory(t, centre + reach * shape[:, None], names=JOINT_NAMES)


@dataclass(frozen=True)
class Stability:
    """The feed-forward's stability on one arm: after a move with a reversal, the held target's last second."""

    profile: str
    command_spread: tuple[float, ...]  # per joint, rad: how far the sent command still moves (ringing: 0.1 rad and more)
    held_error: tuple[float, ...]  # per joint, rad: mean distance from the target with compensation
    plain_error: tuple[float, ...]  # ... without
    # a servo protection that tripped: "uncompensated: …" (the arm cannot do the move; not judged) or
    # "compensated: …" (compensation drove a servo into its protection: not settled)
    fault: str = ""

    SPREAD_LIMIT = 0.01  # rad: the integral may creep by a few mrad where friction holds a joint (measured ≤ 7 mrad)
    HELD_MARGIN = 0.002  # rad: held no further from the target than without, within this

    @property
    def judged(self) -> bool:
        return not self.fault.startswith("uncompensated")

    @property
    def settled(self) -> bool:
        if self.fault:
            return not self.judged
        return max(self.command_spread) <= self.SPREAD_LIMIT and all(
            h <= p + self.HELD_MARGIN for h, p in zip(self.held_error, self.plain_error, strict=True))

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "judged": self.judged, "settled": self.settled, "fault": self.fault,
                "command_spread": list(self.command_spread), "held_error": list(self.held_error),
                "plain_error": list(self.plain_error)}


def stability(profile: GapProfile | str, model: GapModel, config: CompensatorConfig | None = None) -> Stability:
    """:class:`Stability` of ``model`` (with ``config``) on ``profile`` for :func:`move_and_hold` (an arm whose
    servo protection trips on the move without compensation is not judged)."""
    loaded = load_profile(profile)
    motion = move_and_hold()
    try:
        plain = closed_loop(loaded, motion).measured
    except ServoFault as fault:
        return Stability(loaded.name, (), (), (), f"uncompensated: {fault}")
    compensator = None if config is None else Compensator(config, model)
    try:
        measured, sent, _ = closed_loop(loaded, motion, model, compensator=compensator)
    except ServoFault as fault:
        return Stability(loaded.name, (), (), (), f"compensated: {fault}")
    last_second = slice(-int(RATE_HZ), None)
    target = motion.position[-1]
    return Stability(loaded.name, tuple(np.ptp(sent[last_second], axis=0).tolist()),
                     tuple(np.abs(measured[last_second] - target).mean(axis=0).tolist()),
                     tuple(np.abs(plain[last_second] - target).mean(axis=0).tolist()))


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
