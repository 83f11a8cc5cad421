"""A grasp on the virtual SO-101 behind the deployment's safety filter: the gripper holds the object and its
servo's overload protection (LeRobot's gripper: Overload_Torque 25 % for Protection_Time 2 s, torque capped at
50 %) never trips, while the policy keeps commanding the gripper shut.

The object is the virtual arm's hand (a stiff spring per joint at a fixed target): the gripper closes onto it and
cannot close further. The loop is the deploy graph's at 100 Hz in simulated time: the servos' positions and loads
(Present_Load as the driver turns it into effort) into the filter, the filter's output to the servos' goals.
"""

from __future__ import annotations

import numpy as np

from so101_apps.compensation.harness import deployment_safety
from so101_common.joints import JOINT_NAMES, JOINTS
from so101_feetech.control_table import Register
from so101_safety.core import SafetyFilter
from so101_virtual.physics import ArmPhysics
from so101_virtual.sysid.simulate import STEPS_PER_RAD, lerobot_servos

GRIPPER = JOINT_NAMES.index("gripper")
OBJECT = 0.5  # rad: where the object stops the gripper's fingers
RATE_HZ = 100.0


def _grasp(seconds: float) -> tuple[list[int], list[float], list[bool]]:
    """Per step: the gripper servo's Status, its load (fraction of full torque) and whether the filter holds a grasp."""
    servos = lerobot_servos()
    start = np.zeros(len(JOINT_NAMES))
    start[GRIPPER] = OBJECT
    arm = ArmPhysics("default", servos, initial_positions=start, hand=True, hand_stiffness=100.0, io_period=1.0)
    arm.set_hand(start)  # the arm joints rest where they are; the gripper's fingers are on the object
    zero = [memory.get(Register.Present_Position) for memory in servos]
    for memory in servos:
        memory.set(Register.Goal_Position, memory.get(Register.Present_Position))
        memory.set(Register.Torque_Enable, 1)
    bounds = SafetyFilter(deployment_safety())
    shut = start.copy()
    shut[GRIPPER] = JOINTS[GRIPPER].lower  # the policy closes the gripper all the way
    status, load, grasping = [], [], []
    done = 0
    for k in range(round(seconds * RATE_HZ)):
        now = k / RATE_HZ
        due = round(now / arm.tick)
        arm.step_ticks(due - done)
        done = due
        position = [start[j] + (m.get(Register.Present_Position) - zero[j]) / STEPS_PER_RAD for j, m in enumerate(servos)]
        fraction = [m.get(Register.Present_Load) / 1000.0 for m in servos]  # signed, 0.1 % of full torque
        bounds.on_measured(JOINT_NAMES, position, efforts=[f * spec.max_effort for f, spec in zip(fraction, JOINTS, strict=True)],
                           stamp=now)
        bounds.on_command(JOINT_NAMES, shut.tolist(), now)
        out = bounds.step(now)
        assert out is not None
        for j, (memory, goal) in enumerate(zip(servos, out.positions, strict=True)):
            memory.set(Register.Goal_Position, round(zero[j] + (goal - start[j]) * STEPS_PER_RAD))
        status.append(servos[GRIPPER].get(Register.Status))
        load.append(abs(fraction[GRIPPER]))
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
