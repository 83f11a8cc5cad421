"""The parameters ``so101 fit-profile`` identifies, and how a set of values writes into a gap profile.

Few and physical, so that a few minutes of recordings determine them:

- arm-wide (the firmware is the same in every servo): ``firmware.p_gain`` and ``firmware.d_gain``
  (how P/D registers map to PWM: stiffness and damping of the position loop) and
  ``firmware.acceleration_unit`` (the set-point ramp of LeRobot's Acceleration 254);
- per arm joint (``joints.<name>``): ``stall_torque`` (motor strength: scales the loop's torque and
  the back-EMF braking, so gain and gravity sag per joint), ``coulomb_friction`` (gearbox, with
  stiction), ``output_friction`` (output bearing, acts inside the backlash), ``backlash`` and
  ``no_load_speed`` (the motor's back-EMF constant: its braking, i.e. the damping of the loop and
  the speed limit).

Motor constants stay within a physically plausible band around the STS3215's 12 V datasheet figures
(2.94 N·m stall, 4.72 rad/s no load): ``stall_torque`` 2.2–3.7 N·m (±25 %: the spread between
servos and gearbox efficiency), ``no_load_speed`` 2.4–9.4 rad/s (½–2×). Without the band the fit
trades the arm-wide P scaling against the motors and can land on a 5 N·m "servo", which would
carry payloads the real one drops and report efforts the driver misreads.

The gripper is not fitted (it holds objects in many recordings; its parameters stay the base's).
The search works in ``log(value + floor)``: multiplicative steps for strictly positive figures, and
a floor for those that may be zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from so101_common.joints import ARM_JOINT_NAMES
from so101_virtual.profiles import GapProfile, profile_from_dict

__all__ = [
    "Parameter",
    "ARM_PARAMETERS",
    "JOINT_PARAMETERS",
    "ParameterSet",
    "parameter",
]


@dataclass(frozen=True)
class Parameter:
    """One identified profile key: its bounds and the floor of its search coordinate."""

    name: str
    section: str  # "firmware" (arm-wide) or "joint" (per arm joint)
    lower: float
    upper: float
    floor: float  # search coordinate log(value + floor); 0 for strictly positive values
    unit: str

    def clip(self, value: float) -> float:
        return min(max(value, self.lower), self.upper)

    def scaled(self, value: float, factor: float) -> float:
        """``value`` moved by ``factor`` in the search coordinate, within bounds."""
        return self.clip((value + self.floor) * factor - self.floor)

    def coordinate(self, value: float) -> float:
        return math.log(value + self.floor)


ARM_PARAMETERS: tuple[Parameter, ...] = (
    Parameter("p_gain", "firmware", 0.05, 5.0, 0.0, "0.1 %/step"),
    Parameter("d_gain", "firmware", 0.0005, 0.5, 0.0, "0.1 %/(step/s)"),
    Parameter("acceleration_unit", "firmware", 25.0, 10000.0, 0.0, "step/s²"),
)
JOINT_PARAMETERS: tuple[Parameter, ...] = (
    Parameter("stall_torque", "joint", 2.2, 3.7, 0.0, "N·m"),
    Parameter("coulomb_friction", "joint", 0.0, 1.5, 0.01, "N·m"),
    Parameter("output_friction", "joint", 0.0, 1.0, 0.005, "N·m"),
    Parameter("backlash", "joint", 0.0, 0.15, 0.002, "rad"),
    Parameter("no_load_speed", "joint", 2.4, 9.4, 0.0, "rad/s"),
)
_BY_NAME = {p.name: p for p in (*ARM_PARAMETERS, *JOINT_PARAMETERS)}


def parameter(name: str) -> Parameter:
    """The identifiable parameter called ``name`` (ValueError naming the choices otherwise)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown fit parameter {name!r}; choose from {', '.join(_BY_NAME)}") from None


@dataclass
class ParameterSet:
    """Values of the identified parameters: ``arm[name]`` and ``joints[joint][name]``."""

    arm: dict[str, float] = field(default_factory=dict)
    joints: dict[str, dict[str, float]] = field(default_factory=dict)

    @classmethod
    def from_profile(cls, profile: GapProfile, arm: Sequence[str], joint: Sequence[str],
                     joint_names: Sequence[str] = ARM_JOINT_NAMES) -> ParameterSet:
        """The profile's current values of the named parameters (clipped into the search bounds)."""
        return cls(
            {name: parameter(name).clip(float(getattr(profile.firmware, name))) for name in arm},
            {j: {name: parameter(name).clip(float(getattr(profile.joint(j), name))) for name in joint}
             for j in joint_names},
        )

    def copy(self) -> ParameterSet:
        return ParameterSet(dict(self.arm), {j: dict(v) for j, v in self.joints.items()})

    def rounded(self, digits: int = 4) -> ParameterSet:
        """A copy with every value rounded to ``digits`` significant digits (what a profile file shows)."""
        def r(v: float) -> float:
            return float(f"{v:.{digits}g}")
        return ParameterSet({k: r(v) for k, v in self.arm.items()},
                            {j: {k: r(v) for k, v in vals.items()} for j, vals in self.joints.items()})

    def overlay(self) -> dict[str, object]:
        """The profile keys these values set (the YAML layout)."""
        out: dict[str, object] = {}
        if self.arm:
            out["firmware"] = dict(self.arm)
        if self.joints:
            out["joints"] = {j: dict(v) for j, v in self.joints.items()}
        return out

    def apply(self, base: GapProfile, name: str | None = None, description: str | None = None) -> GapProfile:
        """``base`` with these values (and a new name/description when given)."""
        data: dict[str, object] = dict(self.overlay())
        data["name"] = name or base.name
        if description is not None:
            data["description"] = description
        return profile_from_dict(data, source=base.source, base=base)

    def with_joint_values(self, name: str, values: Mapping[str, float]) -> ParameterSet:
        """A copy with parameter ``name`` set per joint from ``values``."""
        out = self.copy()
        for j, v in values.items():
            out.joints[j][name] = v
        return out
