"""The motion supervisor's view of the arm, without ROS: rest at the command, joint-state count, fault times."""

from __future__ import annotations

from so101_apps.arm_watch import ArmWatch
from so101_common.joints import JOINT_NAMES
from so101_common.servo_faults import ServoFault, ServoFaultKind

POSE = [0.1, -0.2, 0.3, 0.0, 0.0, 0.5]


def test_settled_needs_the_arm_near_its_command_and_still_for_the_hold_time() -> None:
    watch = ArmWatch(now=0.0)
    watch.on_command(JOINT_NAMES, POSE)
    assert not watch.settled(now=1.0)  # nothing measured yet
    watch.on_state(JOINT_NAMES, [p + 0.1 for p in POSE], now=1.0)  # within 0.25 rad: sag, still travelling
    watch.on_state(JOINT_NAMES, [p + 0.1 + 0.004 for p in POSE], now=1.2)  # moved < 5 mrad: at rest since 1.0
    assert not watch.settled(now=1.25) and watch.settled(now=1.3)
    watch.on_state(JOINT_NAMES, [p + 0.12 for p in POSE], now=1.4)  # moved again
    assert not watch.settled(now=1.6) and watch.settled(now=1.7)
    watch.on_state(JOINT_NAMES, [p + 0.3 for p in POSE], now=2.0)
    assert not watch.settled(now=9.0)  # still, but 0.3 rad from its command


def test_fault_spans_and_joint_states_count_from_the_motion_start() -> None:
    watch = ArmWatch(now=0.0)
    watch.on_state(JOINT_NAMES, POSE, now=5.0)
    watch.on_faults([ServoFault("elbow_flex", (ServoFaultKind.OVERHEAT,), "hot")], now=9.0)
    watch.mark(now=10.0)  # a new motion: earlier spans and counts are the last motion's
    assert watch.states == 0 and not watch.faults.active
    watch.on_state(JOINT_NAMES, POSE, now=10.5)
    watch.on_faults([], now=11.0)  # a status report without servos changes nothing
    watch.on_faults([ServoFault("elbow_flex", (ServoFaultKind.OVERHEAT,), "hot")], now=12.5)
    (span,) = watch.faults.spans()
    assert (span.joint, span.fault, span.start, span.end) == ("elbow_flex", "overheat", 2.5, None)
    assert watch.states == 1
