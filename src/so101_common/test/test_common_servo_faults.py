"""Servo-fault contract: reading a status's key/values and turning reports into spans."""

from __future__ import annotations

import pytest

from so101_common.paired_dataset import FaultSpan
from so101_common.servo_faults import FaultSpanTracker, ServoFault, ServoFaultKind, format_fault, read_servo_fault


def test_a_status_without_a_joint_is_not_a_servo_and_unknown_kinds_are_refused() -> None:
    assert read_servo_fault({"port": "/dev/ttyACM0"}) is None
    assert read_servo_fault({"joint": "gripper"}) == ServoFault("gripper", (), "")
    fault = read_servo_fault({"joint": "elbow_flex", "faults": "overload, overheat"}, "servo reports OVERLOAD")
    assert fault == ServoFault("elbow_flex", (ServoFaultKind.OVERLOAD, ServoFaultKind.OVERHEAT), "servo reports OVERLOAD")
    with pytest.raises(ValueError, match="melted"):
        read_servo_fault({"joint": "elbow_flex", "faults": "melted"})


def test_spans_open_at_the_first_report_and_close_at_the_first_report_without_the_fault() -> None:
    tracker = FaultSpanTracker()
    lift = (ServoFaultKind.OVERLOAD,)
    assert tracker.observe(1.0, [ServoFault("shoulder_lift", (), ""), ServoFault("elbow_flex", (), "")]) == []
    opened = tracker.observe(2.0, [ServoFault("shoulder_lift", lift, "servo reports OVERLOAD")])
    assert opened == [FaultSpan(joint="shoulder_lift", fault="overload", start=2.0, message="servo reports OVERLOAD")]
    assert tracker.observe(2.5, [ServoFault("shoulder_lift", lift, "again")]) == []  # still the same span
    tracker.observe(3.0, [ServoFault("elbow_flex", (ServoFaultKind.LOST,), "no reply")])  # lift not reported: stays
    tracker.observe(4.0, [ServoFault("shoulder_lift", (), "ok")])
    assert tracker.active  # elbow is still lost
    assert [(s.joint, s.fault, s.start, s.end) for s in tracker.spans()] == [
        ("shoulder_lift", "overload", 2.0, 4.0), ("elbow_flex", "lost", 3.0, None)]
    assert format_fault(tracker.spans()[1]) == "elbow_flex: lost from 3.00 s until the end (no reply)"
