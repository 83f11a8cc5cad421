"""The preflight's motions as data (no rclpy): straight joint-space legs at constant speed, from where the arm is to
the check pose, a sweep of each gravity-loaded joint up and down through its part of the pose, a small wiggle of
the others, and what was measured meanwhile (:class:`Recording`).

The check pose holds the upper arm upright, the forearm forward and the hand tilted up (URDF convention,
``CHECK_POSE``): every gravity-loaded joint carries a good share of its link's weight there and the hand stays
high above the table, also when the calibration is wrong by what the preflight exists to find (a joint reversed
or 0.8 rad off zero: the arm is then elsewhere than the calibration says). Speeds are a tenth of the joints'
rated speed; every target lies inside the safety filter's limits and the calibrated range.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from so101_common.joints import JOINT_NAMES

__all__ = ["GRAVITY_JOINTS", "CHECK_POSE", "SWEEPS", "Leg", "Plan", "Recording", "probe_plan", "move_plan"]

GRAVITY_JOINTS = ("shoulder_lift", "elbow_flex", "wrist_flex")  # horizontal axes: gravity loads them
# rad, URDF convention; pan, roll and the gripper stay where the arm starts
CHECK_POSE: Mapping[str, float] = {"shoulder_lift": -0.4, "elbow_flex": 0.0, "wrist_flex": -0.75}
# joint → (half-amplitude rad, speed rad/s) of its sweep: wide enough that its gravity load changes measurably
SWEEPS: Mapping[str, tuple[float, float]] = {"shoulder_lift": (0.3, 0.3), "elbow_flex": (0.45, 0.4),
                                             "wrist_flex": (0.75, 0.45)}
WIGGLE = 0.2  # rad, the small move of the joints gravity does not load (pan, roll, gripper)
MOVE_SPEED = 0.5  # rad/s, the fastest joint of a move to or from the check pose
WIGGLE_SPEED = 0.4  # rad/s
SETTLE_S = 0.5  # s held at the check pose before the sweeps


@dataclass(frozen=True)
class Leg:
    """The command moves in a straight line from ``start`` to ``end`` over ``duration`` s (then stays there)."""

    start: np.ndarray
    end: np.ndarray
    duration: float
    sweeps: str | None = None  # the gravity joint this leg measures (its only moving joint), None for a move

    def at(self, t: float) -> np.ndarray:
        if self.duration <= 0.0:
            return self.end.copy()
        a = min(max(t / self.duration, 0.0), 1.0)
        return self.start + (self.end - self.start) * a

    @property
    def direction(self) -> int:
        """+1 / −1: the sign of the swept joint's motion (0 for a move)."""
        if self.sweeps is None:
            return 0
        j = JOINT_NAMES.index(self.sweeps)
        return int(np.sign(self.end[j] - self.start[j]))


@dataclass(frozen=True)
class Plan:
    legs: tuple[Leg, ...]

    @property
    def duration(self) -> float:
        return sum(leg.duration for leg in self.legs)

    @property
    def end(self) -> np.ndarray:
        return self.legs[-1].end.copy()

    def locate(self, t: float) -> tuple[int, float]:
        """(leg index, seconds into it) at ``t`` s since the plan started (the last leg after the end)."""
        start = 0.0
        for index, leg in enumerate(self.legs):
            if t < start + leg.duration or index == len(self.legs) - 1:
                return index, t - start
            start += leg.duration
        raise ValueError("a plan has at least one leg")

    def target(self, t: float) -> np.ndarray:
        index, into = self.locate(t)
        return self.legs[index].at(into)


@dataclass
class Recording:
    """What the arm reported while a plan played: ``time`` s since the plan started, positions (rad), velocities
    (rad/s) and efforts (N·m) in :data:`JOINT_NAMES` order, one row per joint state."""

    time: list[float] = field(default_factory=list)
    position: list[np.ndarray] = field(default_factory=list)
    velocity: list[np.ndarray] = field(default_factory=list)
    effort: list[np.ndarray] = field(default_factory=list)

    def add(self, t: float, position: Sequence[float] | np.ndarray, velocity: Sequence[float] | np.ndarray,
            effort: Sequence[float] | np.ndarray) -> None:
        self.time.append(float(t))
        self.position.append(np.asarray(position, dtype=float))
        self.velocity.append(np.asarray(velocity, dtype=float))
        self.effort.append(np.asarray(effort, dtype=float))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(time, position, velocity, effort) as arrays."""
        n = len(JOINT_NAMES)
        return (np.asarray(self.time), np.asarray(self.position).reshape(-1, n), np.asarray(self.velocity).reshape(-1, n),
                np.asarray(self.effort).reshape(-1, n))


def _move(start: np.ndarray, end: np.ndarray, speed: float, sweeps: str | None = None) -> Leg:
    return Leg(start.copy(), end.copy(), float(np.max(np.abs(end - start))) / speed, sweeps)


def move_plan(start: Sequence[float] | np.ndarray, end: Sequence[float] | np.ndarray, speed: float = MOVE_SPEED) -> Plan:
    """One straight move from ``start`` to ``end`` (the fastest joint at ``speed``)."""
    return Plan((_move(np.asarray(start, dtype=float), np.asarray(end, dtype=float), speed),))


def probe_plan(start: Sequence[float] | np.ndarray, lower: Sequence[float] | np.ndarray,
               upper: Sequence[float] | np.ndarray) -> Plan:
    """From ``start`` to the check pose, the sweeps and the wiggle, ending at the check pose. ``lower``/``upper``:
    where commands may go (the safety filter's limits within the calibrated range); a sweep that would leave them is
    shortened."""
    lo, hi = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    here = np.asarray(start, dtype=float)
    pose = here.copy()
    for name, value in CHECK_POSE.items():
        j = JOINT_NAMES.index(name)
        half = SWEEPS[name][0]
        pose[j] = min(max(value, lo[j] + min(half, (hi[j] - lo[j]) / 2)), hi[j] - min(half, (hi[j] - lo[j]) / 2))
    pose = np.clip(pose, lo, hi)  # pan, roll and the gripper stay where they are (within the limits)
    legs = [_move(here, pose, MOVE_SPEED), Leg(pose.copy(), pose.copy(), SETTLE_S)]
    for name in GRAVITY_JOINTS:
        j = JOINT_NAMES.index(name)
        half, speed = SWEEPS[name]
        below, above = pose.copy(), pose.copy()
        below[j] = max(pose[j] - half, lo[j])
        above[j] = min(pose[j] + half, hi[j])
        legs += [_move(pose, below, speed), _move(below, above, speed, name), _move(above, below, speed, name),
                 _move(below, pose, speed)]
    others = [JOINT_NAMES.index(n) for n in JOINT_NAMES if n not in GRAVITY_JOINTS]
    plus, minus = pose.copy(), pose.copy()
    plus[others] = np.minimum(pose[others] + WIGGLE, hi[others])
    minus[others] = np.maximum(pose[others] - WIGGLE, lo[others])
    legs += [_move(pose, plus, WIGGLE_SPEED), _move(plus, minus, WIGGLE_SPEED), _move(minus, pose, WIGGLE_SPEED)]
    return Plan(tuple(legs))
