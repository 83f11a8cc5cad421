"""A simulated fleet's arms: each a gap profile drawn around ``default`` plus a slow wear drift per day.

Every arm gets its own scale of the gearbox figures (backlash, gearbox and output friction; each a
log-normal factor around ``default``) and a wear rate: the relative growth of those figures per day
(worn gears: more free play, more friction, hence more lag). A share of the fleet (``fast_fraction``)
wears an order of magnitude faster than the rest; :class:`ArmSpec` keeps that ground truth so a
test can check that the fleet report finds those arms from the bags alone.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from so101_common.joints import JOINT_NAMES
from so101_virtual.profiles import GapProfile, JointParams, load_profile, profile_from_dict

__all__ = ["WearModel", "ArmSpec", "draw_fleet", "arm_profile_dict", "arm_profile", "WORN_FIELDS"]

WORN_FIELDS: tuple[str, ...] = ("backlash", "coulomb_friction", "output_friction")
"""The joint parameters that grow with wear (all arm joints alike, per :class:`ArmSpec`)."""
# wear saturates at the schema's upper bound of each figure (the profile would be invalid beyond it)
_LIMITS: dict[str, float] = {name: min(float(m.le) for m in JointParams.model_fields[name].metadata
                                       if getattr(m, "le", None) is not None) for name in WORN_FIELDS}


@dataclass(frozen=True)
class WearModel:
    """How the fleet is drawn."""

    spread: float = 0.15  # log-normal sigma of each arm's factor on the worn fields around ``default``
    slow_rate: tuple[float, float] = (0.0, 0.01)  # relative growth per day of the ordinary arms (uniform range)
    fast_rate: tuple[float, float] = (0.06, 0.1)  # ... and of the fast-wearing ones
    fast_fraction: float = 0.25  # share of arms that wear fast (at least one when the fleet has ≥ 2 arms)

    def __post_init__(self) -> None:
        if not 0.0 <= self.fast_fraction <= 1.0:
            raise ValueError(f"fast_fraction must be in [0, 1], got {self.fast_fraction}")
        if self.spread < 0 or min(*self.slow_rate, *self.fast_rate) < 0:
            raise ValueError("spread and wear rates must be ≥ 0")


@dataclass(frozen=True)
class ArmSpec:
    """One simulated arm: identity, its draw around ``default`` and its wear (the ground truth)."""

    robot_id: str  # e.g. "arm_003"
    serial: str  # a made-up serial number, stored as the profile name
    seed: int  # mechanics, sensor noise and motions of this arm
    factors: dict[str, float]  # multiplier on default per worn field, day 0
    wear_per_day: float  # relative growth of the worn fields per day
    fast_wear: bool  # drawn from the fast-wear range

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def draw_fleet(arms: int, seed: int, model: WearModel = WearModel()) -> list[ArmSpec]:
    """``arms`` arms, reproducible from ``seed``."""
    if arms < 1:
        raise ValueError(f"a fleet needs at least one arm, got {arms}")
    fast_count = min(arms, max(1 if arms >= 2 else 0, round(model.fast_fraction * arms)))
    choice = np.random.default_rng(seed).permutation(arms)[:fast_count]
    fast = set(choice.tolist())
    specs = []
    for index in range(arms):
        rng = np.random.default_rng([seed, index])  # an arm's draw does not depend on the fleet's size
        factors = {name: float(np.exp(rng.normal(0.0, model.spread))) for name in WORN_FIELDS}
        low, high = model.fast_rate if index in fast else model.slow_rate
        specs.append(ArmSpec(robot_id=f"arm_{index:03d}", serial=f"SO101-{seed:04d}-{index:04d}",
                             seed=int(rng.integers(0, 2**31 - 1)), factors=factors,
                             wear_per_day=float(rng.uniform(low, high)), fast_wear=index in fast))
    return specs


def arm_profile_dict(arm: ArmSpec, day: float, base: GapProfile | None = None) -> dict[str, Any]:
    """The arm's gap profile on ``day`` as the YAML layout (``base: default`` plus overrides)."""
    base = base or load_profile("default")
    growth = 1.0 + arm.wear_per_day * day
    # per joint: a fitted profile (the shipped default) gives every arm joint its own figures
    worn = {joint: {name: min(float(getattr(base.joint(joint), name) * arm.factors[name] * growth), _LIMITS[name])
                    for name in WORN_FIELDS} for joint in JOINT_NAMES}
    return {
        "base": "default",
        "name": arm.serial,
        "description": f"{arm.robot_id} on day {day:g}: default × {arm.factors} × (1 + {arm.wear_per_day:.4f}·day)",
        "seed": arm.seed % 2**31,
        "joints": worn,
    }


def arm_profile(arm: ArmSpec, day: float, base: GapProfile | None = None) -> GapProfile:
    base = base or load_profile("default")
    data = {k: v for k, v in arm_profile_dict(arm, day, base).items() if k != "base"}
    return profile_from_dict(data, source=f"{arm.robot_id} day {day:g}", base=base)
