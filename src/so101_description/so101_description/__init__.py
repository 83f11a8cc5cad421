"""SO-101 joint specification, URDF, MJCF, meshes and RViz configuration."""

from so101_description.joints import (
    ARM_JOINT_NAMES,
    GRIPPER,
    JOINT_NAMES,
    JOINTS,
    SAGE_JOINT_NAMES,
    JointSpec,
    JointSpecError,
    joint,
    joint_by_id,
)

__all__ = [
    "ARM_JOINT_NAMES",
    "GRIPPER",
    "JOINT_NAMES",
    "JOINTS",
    "SAGE_JOINT_NAMES",
    "JointSpec",
    "JointSpecError",
    "joint",
    "joint_by_id",
]
