"""A grasp on the virtual SO-101 behind the deployment's safety filter: the gripper holds the object and its
servo's overload protection (LeRobot's gripper: Overload_Torque 25 % for Protection_Time 2 s, torque capped at
50 %) never trips, while the policy keeps commanding the gripper shut.

The object is the virtual arm's hand (a stiff spring per joint where it starts): the gripper closes onto it and
cannot close further. The loop is the deploy graph's at 100 Hz in simulated time (``ArmPlant``): the servos'
positions and efforts (Present_Load as the driver turns it into effort) into the filter, its output to their goals.
"""

from __future__ import annotations

import numpy as np

from so101_apps.compensation.harness import deployment_safety
from so101_common.joints import JOINT_NAMES, JOINTS
from so101_feetech.control_table import Register
from so101_safety.core import SafetyFilter
from so101_virtual.sysid.simulate import ArmPlant, lerobot_servos

GRIPPER = JOINT_NAMES.index("gripper")
OBJECT = 0.5  # rad: where the object stops the gripper's fingers
RATE_HZ = 100.0


def _grasp(seconds: float) -> tuple[list[int], list[float], list[bool]]:
    """Per step: the gripper servo's Status, its load (fraction of full torque) and whether the filter holds a grasp."""
    start = np.zeros(len(JOINT_NAMES))
    start[GRIPPER] = OBJECT
    # the hand holds the arm joints where they rest and stops the gripper's fingers at the object
    arm = ArmPlant("default", start, hand_stiffness=100.0)
    bounds = SafetyFilter(deployment_safety())
    shut = start.copy()
    shut[GRIPPER] = JOINTS[GRIPPER].lower  # the policy closes the gripper all the way
    status, load, grasping = [], [], []
    for k in range(round(seconds * RATE_HZ)):
        now = k / RATE_HZ
        position = arm.read(now)
        effort = arm.efforts()
        bounds.on_measured(JOINT_NAMES, position.tolist(), efforts=effort.tolist(), stamp=now)
        bounds.on_command(JOINT_NAMES, shut.tolist(), now)
        out = bounds.step(now)
        assert out is not None
        arm.send(np.asarray(out.positions))
        status.append(arm.status()[GRIPPER])
        load.append(abs(effort[GRIPPER]) / JOINTS[GRIPPER].max_effort)
        grasping.append(out.gripper_limited)
    return status, load, grasping


def test_a_grasp_held_past_the_protection_time_does_not_trip_the_gripper() -> None:
    protection_s = lerobot_servos()[GRIPPER].get(Register.Protection_Time) * 0.01
    overload = lerobot_servos()[GRIPPER].get(Register.Overload_Torque) / 100.0
    status, load, grasping = _grasp(3 * protection_s)
    assert not any(status), f"gripper protection tripped (status {max(status)}) at {status.index(max(status)) / RATE_HZ:.2f} s"
    settled = round(protection_s * RATE_HZ)
    assert all(grasping[settled:])  # the filter holds the grasp ...
    assert max(load[settled:]) < overload  # ... below the servo's overload protection
