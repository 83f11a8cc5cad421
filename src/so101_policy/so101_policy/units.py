"""Joint units of LeRobot's SO-101 follower ↔ radians (no rclpy, no torch).

LeRobot (0.4.4, ``use_degrees=True``) records the arm joints in degrees from the middle of the
calibrated range and the gripper in 0..100 (0 = closed); ROS topics are radians everywhere.
"""

from __future__ import annotations

import math

import numpy as np

from so101_common.joints import GRIPPER, JOINT_NAMES, gripper_percent_to_rad, gripper_rad_to_percent

__all__ = ["rad_to_lerobot", "lerobot_to_rad"]

_DEG = 180.0 / math.pi
_GRIPPER_INDEX = JOINT_NAMES.index(GRIPPER.name)


def rad_to_lerobot(q: np.ndarray) -> np.ndarray:
    """rad (JOINT_NAMES order, last axis) → LeRobot units: degrees from mid-range, gripper 0..100."""
    out = q * _DEG
    out[..., _GRIPPER_INDEX] = gripper_rad_to_percent(q[..., _GRIPPER_INDEX])
    return out


def lerobot_to_rad(values: np.ndarray) -> np.ndarray:
    """LeRobot units (JOINT_NAMES order, last axis) → rad."""
    out = values / _DEG
    out[..., _GRIPPER_INDEX] = gripper_percent_to_rad(values[..., _GRIPPER_INDEX])
    return out
