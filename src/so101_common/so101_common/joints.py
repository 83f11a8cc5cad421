"""The one joint specification of the SO-101: names, servo ids, limits and unit mappings.

Every package takes joint facts from here. Limits are the official description's
``so101_new_calib`` figures (joint zero at the middle of LeRobot's calibrated range).

Unit conventions
----------------
- ROS side (topics, URDF, MJCF, datasets): radians for every joint, REP-103.
- LeRobot side: degrees from mid-range for arm joints (``RANGE_M100_100`` is not used here),
  0..100 for the gripper (``RANGE_0_100``: 0 = closed at ``range_min``).
- SAGE side: radians for arm joints, 0..1 for the jaw.

The gripper is mapped linearly from LeRobot's 0..100 onto the description's gripper range,
so 0 % is the lower limit (closed) and 100 % the upper limit (open).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

Angle = TypeVar("Angle", float, np.ndarray)  # the gripper maps work on one value or on an array of them

__all__ = [
    "JOINTS",
    "JOINT_NAMES",
    "ARM_JOINT_NAMES",
    "GRIPPER",
    "SAGE_JOINT_NAMES",
    "SHORT_NAMES",
    "STEPS_PER_TURN",
    "LEROBOT_STEPS_PER_TURN",
    "OVERLOAD_PROTECTION_S",
    "JointSpec",
    "JointSpecError",
    "joint",
    "joint_by_id",
    "gripper_rad_to_percent",
    "gripper_percent_to_rad",
    "gripper_rad_to_fraction",
    "gripper_fraction_to_rad",
    "sage_to_rad",
    "rad_to_sage",
    "reorder",
]

STEPS_PER_TURN = 4096
"""Encoder steps per output-shaft turn of the STS3215 (12-bit magnetic encoder)."""

LEROBOT_STEPS_PER_TURN = 4095
"""LeRobot normalises degrees with 4095 (``(raw - mid) * 360 / 4095``); kept for compatibility."""

OVERLOAD_PROTECTION_S = 2.0
"""How long a servo's load may stay above its joint's ``overload`` before its protection switches the torque off:
the STS3215's Protection_Time as shipped (200 × 10 ms), which LeRobot keeps."""


class JointSpecError(ValueError):
    """A joint name, id or vector does not fit the SO-101 joint specification."""


@dataclass(frozen=True)
class JointSpec:
    """Static facts of one SO-101 joint."""

    name: str  # ROS / URDF / LeRobot motor name
    servo_id: int  # Feetech bus id (LeRobot default assignment)
    lower: float  # position limit, rad
    upper: float  # position limit, rad
    max_velocity: float  # rad/s, STS3215 no-load speed at 12 V is ~0.222 s/60° (≈ 4.7 rad/s)
    max_effort: float  # N·m, stall torque at 12 V (≈ 30 kg·cm ≈ 2.94 N·m)
    sage_name: str  # column name in SAGE motion files
    label: str  # short column label of printed tables
    is_gripper: bool = False
    # Load (fraction of max effort) above which the servo's overload protection counts, as LeRobot deploys it
    # (Overload_Torque: the STS3215's 80 % as shipped, which LeRobot keeps on the arm servos and sets to 25 % on the
    # gripper); held for OVERLOAD_PROTECTION_S, the servo switches its torque off.
    overload: float = 0.80

    def __post_init__(self) -> None:
        if not self.lower < self.upper:
            raise JointSpecError(f"{self.name}: lower limit {self.lower} must be below upper {self.upper}")
        if not 0 <= self.servo_id <= 253:
            raise JointSpecError(f"{self.name}: servo id {self.servo_id} outside 0..253")

    @property
    def span(self) -> float:
        return self.upper - self.lower

    def clip(self, position: float, margin: float = 0.0) -> float:
        """Clamp a position into ``[lower + margin, upper - margin]``."""
        return min(max(position, self.lower + margin), self.upper - margin)


_MAX_VEL = 2 * math.pi / 360 * 60 / 0.222
_STALL = 2.94

JOINTS: tuple[JointSpec, ...] = (
    JointSpec("shoulder_pan", 1, -1.91986, 1.91986, _MAX_VEL, _STALL, "Rotation", "pan"),
    JointSpec("shoulder_lift", 2, -1.74533, 1.74533, _MAX_VEL, _STALL, "Pitch", "lift"),
    JointSpec("elbow_flex", 3, -1.69, 1.69, _MAX_VEL, _STALL, "Elbow", "elbow"),
    JointSpec("wrist_flex", 4, -1.65806, 1.65806, _MAX_VEL, _STALL, "Wrist_Pitch", "wflex"),
    JointSpec("wrist_roll", 5, -2.74385, 2.84121, _MAX_VEL, _STALL, "Wrist_Roll", "wroll"),
    JointSpec("gripper", 6, -0.174533, 1.74533, _MAX_VEL, _STALL, "Jaw", "grip", is_gripper=True,
              overload=0.25),
)

JOINT_NAMES: tuple[str, ...] = tuple(j.name for j in JOINTS)
ARM_JOINT_NAMES: tuple[str, ...] = tuple(j.name for j in JOINTS if not j.is_gripper)
SAGE_JOINT_NAMES: tuple[str, ...] = tuple(j.sage_name for j in JOINTS)
SHORT_NAMES: dict[str, str] = {j.name: j.label for j in JOINTS}
"""Joint name → its short label in printed tables (``pan``, ``lift``, ..., ``grip``)."""
GRIPPER: JointSpec = next(j for j in JOINTS if j.is_gripper)

_BY_NAME = {j.name: j for j in JOINTS}
_BY_ID = {j.servo_id: j for j in JOINTS}


def joint(name: str) -> JointSpec:
    """Look a joint up by its ROS name."""
    try:
        return _BY_NAME[name]
    except KeyError as err:
        raise JointSpecError(f"unknown joint {name!r}; expected one of {list(JOINT_NAMES)}") from err


def joint_by_id(servo_id: int) -> JointSpec:
    """Look a joint up by its servo id."""
    try:
        return _BY_ID[servo_id]
    except KeyError as err:
        raise JointSpecError(f"no SO-101 joint has servo id {servo_id}") from err


def gripper_rad_to_percent(rad: Angle) -> Angle:
    """Gripper angle (rad) → LeRobot 0..100 (0 = closed)."""
    return (rad - GRIPPER.lower) / GRIPPER.span * 100.0


def gripper_percent_to_rad(percent: Angle) -> Angle:
    """LeRobot gripper 0..100 → angle (rad)."""
    return GRIPPER.lower + percent / 100.0 * GRIPPER.span


def gripper_rad_to_fraction(rad: Angle) -> Angle:
    """Gripper angle (rad) → SAGE jaw fraction 0..1."""
    return gripper_rad_to_percent(rad) / 100.0


def gripper_fraction_to_rad(fraction: Angle) -> Angle:
    """SAGE jaw fraction 0..1 → angle (rad)."""
    return gripper_percent_to_rad(fraction * 100.0)


def sage_to_rad(values: Sequence[float]) -> list[float]:
    """A SAGE-ordered row (rad…, jaw 0..1) → radians in :data:`JOINT_NAMES` order."""
    _check_length(values)
    return [gripper_fraction_to_rad(v) if j.is_gripper else float(v) for j, v in zip(JOINTS, values, strict=False)]


def rad_to_sage(values: Sequence[float]) -> list[float]:
    """Radians in :data:`JOINT_NAMES` order → a SAGE row (jaw as 0..1)."""
    _check_length(values)
    return [gripper_rad_to_fraction(v) if j.is_gripper else float(v) for j, v in zip(JOINTS, values, strict=False)]


def reorder(names: Iterable[str], values: Sequence[float], target: Sequence[str] = JOINT_NAMES) -> list[float]:
    """Re-order ``values`` given under ``names`` into ``target`` order; every target name must be present."""
    lookup = dict(zip(names, values, strict=False))
    missing = [n for n in target if n not in lookup]
    if missing:
        raise JointSpecError(f"missing joints {missing}")
    return [float(lookup[n]) for n in target]


def _check_length(values: Sequence[float]) -> None:
    if len(values) != len(JOINTS):
        raise JointSpecError(f"expected {len(JOINTS)} joint values, got {len(values)}")
