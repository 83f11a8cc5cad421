"""A population of virtual arms: gap profiles drawn over the schema, for models that must work on arms nobody
tuned for.

:class:`ArmPopulation` draws a complete :class:`~so101_virtual.profiles.GapProfile` per seed around a base
profile (the fitted ``default``): what differs from one real SO-101 to the next and over its life —

- unit-to-unit spread of every joint's gearbox and motor (log-normal factors on backlash, dry and bearing
  friction, motor stall torque and no-load speed, armature);
- wear: an arm-wide level (each joint near it) that multiplies backlash, raises friction and softens the gears;
- the firmware's P and D gains, soft to stiff (log-uniform factors), and its acceleration ramp;
- a payload at the gripper (on part of the arms);
- the bus: the USB adapter's latency (0–15 ms) and jitter, which set the rate the driver reaches;
- the supply: its voltage and the resistance that makes it sag under load.

Only arms that work are drawn (:func:`working`): a draw whose servos trip their overload protection or sag
by more than :data:`MAX_SAG` under gravity is one nobody would deploy a policy on (measured: a P gain × 0.44
on a worn arm trips the lift's overload protection, which then hangs limp), so it is drawn again from the
seed's next numbers. A seed fully determines an arm. Which seeds train and which judge is the caller's rule
(see :data:`TRAIN_SEEDS`, :data:`VALIDATION_SEEDS`, :data:`TEST_SEEDS`): disjoint ranges, fixed before any
result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from so101_common.joints import JOINT_NAMES, JOINTS
from so101_virtual.profiles import GapProfile, load_profile, profile_from_dict

__all__ = ["ArmPopulation", "MAX_SAG", "TRAIN_SEEDS", "VALIDATION_SEEDS", "TEST_SEEDS", "working"]

# Seed ranges (fixed before any result): arms a model trains on, arms its settings are chosen on, arms it is
# judged on. The ranges never overlap.
TRAIN_SEEDS = range(0, 1000)
VALIDATION_SEEDS = range(1000, 2000)
TEST_SEEDS = range(2000, 3000)

# per-joint figures a real arm's gear train and motor vary in from unit to unit
_UNIT_SPREAD = ("backlash", "coulomb_friction", "output_friction", "stall_torque", "no_load_speed", "armature")


MAX_SAG = 0.2  # rad: the largest steady error a working arm shows at a held, gravity-loaded pose
# Held poses of the check (lift, elbow, wrist flex; the other joints mid-range): the rest pose and the corners
# of ±1 rad, where gravity loads the lift, the elbow and the wrist most within the excitation's and the SAGE
# motions' range (MuJoCo's gravity torque on a grid). Each is held longer than the servos' overload protection
# takes to trip (Protection_Time 2 s).
_CHECK_POSES = ((0.0, 0.0, 0.0), (1.0, -1.0, -0.6), (-1.0, 1.0, 0.6), (-1.0, -1.0, -0.6), (1.0, 1.0, 0.6))
_CHECK_HOLD_S = 2.5
_RANGES = tuple((j.lower, j.upper) for j in JOINTS)


def working(profile: GapProfile) -> str:
    """'' if the arm holds every check pose within :data:`MAX_SAG` without tripping a servo protection, else why not.

    Simulated time on the arm's own physics and firmware (:class:`~so101_virtual.sysid.simulate.ArmPlant`, the
    servos as LeRobot configures them): each pose is commanded from the previous one and held.
    """
    from so101_virtual.sysid.simulate import ArmPlant

    centre = np.array([0.5 * (lo + hi) for lo, hi in _RANGES])
    plant = ArmPlant(profile, centre)
    when = 0.0
    for lift, elbow, wrist in _CHECK_POSES:
        pose = centre.copy()
        pose[1:4] = (lift, elbow, wrist)
        plant.send(pose)
        settled = []
        for step in range(int(_CHECK_HOLD_S * 50)):
            when += 0.02
            position = plant.read(when)
            status = plant.status()
            if any(status):
                joint = JOINT_NAMES[next(k for k, bits in enumerate(status) if bits)]
                return f"{joint} tripped a protection (status {max(status)}) holding {pose[1:4].round(2).tolist()}"
            if step >= int((_CHECK_HOLD_S - 0.3) * 50):
                settled.append(position - pose)
        sag = np.abs(np.mean(settled, axis=0))
        if sag.max() > MAX_SAG:
            return f"{JOINT_NAMES[int(sag.argmax())]} sags {sag.max():.2f} rad holding {pose[1:4].round(2).tolist()}"
    return ""


def _log_uniform(rng: np.random.Generator, bounds: tuple[float, float]) -> float:
    return float(math.exp(rng.uniform(math.log(bounds[0]), math.log(bounds[1]))))


@dataclass(frozen=True)
class ArmPopulation:
    """The distribution of arms (see the module doc); :meth:`draw` gives one arm per seed."""

    base: str = "default"
    unit_spread: float = 0.3  # σ of the per-joint log-normal factors (cut at ±2σ)
    wear_max: float = 1.0  # arm-wide wear level drawn from U(0, wear_max); each joint within ±0.3 of it
    wear_backlash: float = 4.0  # backlash × (1 + wear_backlash · wear)
    wear_friction: float = 1.0  # dry and bearing friction × (1 + wear_friction · wear)
    wear_viscous: float = 0.05  # N·m·s/rad of viscous friction added at wear 1
    wear_softening: float = 0.5  # gear stiffness × (1 − wear_softening · wear)
    p_gain: tuple[float, float] = (0.45, 2.5)  # firmware P gain factor, log-uniform
    d_gain: tuple[float, float] = (0.3, 3.0)  # firmware D gain factor, log-uniform
    acceleration_spread: float = 0.3  # σ of the acceleration ramp's log-normal factor
    payload_share: float = 0.5  # share of the arms that hold a payload at the gripper
    payload_kg: tuple[float, float] = (0.02, 0.2)  # its mass, uniform
    latency_s: tuple[float, float] = (0.0, 0.015)  # bus adapter latency, uniform
    jitter_share: tuple[float, float] = (0.0, 0.3)  # bus jitter as a share of the latency (at least 50 µs)
    supply_voltage: tuple[float, float] = (10.5, 12.6)  # V, uniform
    supply_resistance: tuple[float, float] = (0.1, 1.0)  # Ω, log-uniform

    def draw(self, seed: int) -> GapProfile:
        """The arm of ``seed`` (named ``population~<seed>``): the first draw from the seed's numbers that works."""
        base = load_profile(self.base)
        rng = np.random.default_rng(seed)
        for _attempt in range(20):
            arm = self._draw(base, seed, rng)
            if not working(arm):
                return arm
        raise ValueError(f"seed {seed}: no working arm in 20 draws; the population's ranges are too wide")

    def _draw(self, base: GapProfile, seed: int, rng: np.random.Generator) -> GapProfile:
        wear = float(rng.uniform(0.0, self.wear_max))
        joints: dict[str, dict[str, float]] = {}
        for name in JOINT_NAMES:
            params = base.joint(name)
            values = {key: float(getattr(params, key))
                      * float(np.exp(np.clip(rng.normal(0.0, self.unit_spread), -2 * self.unit_spread, 2 * self.unit_spread)))
                      for key in _UNIT_SPREAD}
            joint_wear = float(np.clip(wear + rng.uniform(-0.3, 0.3), 0.0, None))
            values["backlash"] = min(values["backlash"] * (1.0 + self.wear_backlash * joint_wear), 0.2)
            for key in ("coulomb_friction", "output_friction"):
                # a gearbox whose dry friction nears the motor's stall torque does not move (no working arm)
                values[key] = min(values[key] * (1.0 + self.wear_friction * joint_wear), 0.4 * values["stall_torque"])
            values["viscous_friction"] = float(params.viscous_friction) + self.wear_viscous * joint_wear
            values["gear_stiffness"] = float(params.gear_stiffness) * (1.0 - self.wear_softening * min(joint_wear, 1.0))
            values["no_load_speed"] = max(values["no_load_speed"], 0.5)
            joints[name] = values
        firmware = {"p_gain": float(base.firmware.p_gain) * _log_uniform(rng, self.p_gain),
                    "d_gain": float(base.firmware.d_gain) * _log_uniform(rng, self.d_gain),
                    "acceleration_unit": float(base.firmware.acceleration_unit)
                    * float(np.exp(rng.normal(0.0, self.acceleration_spread)))}
        holds = bool(rng.uniform() < self.payload_share)
        mass = float(rng.uniform(*self.payload_kg))
        offset = float(rng.uniform(0.0, 0.06))
        latency = float(rng.uniform(*self.latency_s))
        physics = {"payload_mass": mass if holds else 0.0, "payload_offset": [0.0, 0.0, offset if holds else 0.0],
                   "supply_voltage": float(rng.uniform(*self.supply_voltage)),
                   "supply_resistance": _log_uniform(rng, self.supply_resistance)}
        bus = {"latency": latency, "jitter": max(5e-5, latency * float(rng.uniform(*self.jitter_share)))}
        data = {"name": f"population~{seed}", "seed": seed,
                "description": (f"drawn from the arm population around {base.name} (seed {seed}): wear {wear:.2f}, "
                                f"P ×{firmware['p_gain'] / base.firmware.p_gain:.2f}, "
                                f"D ×{firmware['d_gain'] / base.firmware.d_gain:.2f}, "
                                f"payload {physics['payload_mass']:.3f} kg, bus latency {latency * 1e3:.1f} ms"),
                "physics": physics, "firmware": firmware, "bus": bus, "joints": joints}
        return profile_from_dict(data, source=f"population around {base.name}, seed {seed}", base=base)
