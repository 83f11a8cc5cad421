"""Gripper load parsing from /diagnostics key/values and the filter's own status report."""

from __future__ import annotations

import pytest

from so101_common.diagnostics import Level
from so101_common.joints import JOINT_NAMES
from so101_safety.core import SafetyFilter
from so101_safety.diagnostics import load_fraction, parse_gripper_load, status_report

MAX = 2.94


@pytest.mark.parametrize("key, value, expected", [
    ("load_permille", "600", 0.6),  # what so101_driver publishes
    ("load_permille", "-250", 0.25),
    ("load", "300", 0.3),  # plain load: the register's 0.1 % units
    ("Load %", "45 %", 0.45),
    ("load_percent", "12.5", 0.125),
    ("load_fraction", "0.7", 0.7),
    ("load_ratio", ".2", 0.2),
    ("effort", "1.47", 0.5),
    ("effort_nm", "-2.94 N·m", 1.0),
    ("torque", "0.294", 0.1),
])
def test_load_keys(key, value, expected):
    assert load_fraction(key, value, MAX) == pytest.approx(expected)


@pytest.mark.parametrize("key, value", [
    ("max_torque_limit", "500"), ("overload_torque", "25"), ("protection_current", "250"),
    ("load", "n/a"), ("load", ""), ("load", "nan"), ("temperature_c", "40"), ("voltage_v", "12.1"),
])
def test_non_readings_are_skipped(key, value):
    assert load_fraction(key, value, MAX) is None


def test_only_gripper_statuses_count_and_the_largest_wins():
    statuses = [
        ("so101_driver: elbow_flex", "servo 3", [("load_permille", "900")]),
        ("so101_driver: gripper", "servo 6", [("servo_id", "6"), ("load_permille", "420"), ("effort", "2.9")]),
        ("other: jaw", "gripper board", [("load_fraction", "0.5")]),
        ("safety_filter: filter", "so101_safety gripper", [("load_fraction", "0.99")]),
    ]
    # per status: the best-ranked key (fraction > percent > permille/plain > effort); then the max across
    assert parse_gripper_load(statuses, MAX, ignore_prefix="safety_filter") == pytest.approx(0.5)
    assert parse_gripper_load(statuses[:2], MAX) == pytest.approx(0.42)
    assert parse_gripper_load(statuses[:1], MAX) is None
    assert parse_gripper_load([("so101_driver: jaw", "servo 6", [("load", "100")])], MAX, match="JAW") == 0.1


def test_status_levels():
    f = SafetyFilter()
    report = status_report(f.last, f.stats)
    assert report.level is Level.WARN and "waiting" in report.message
    f.estop("early")
    assert status_report(f.last, f.stats, estop_reason=f.estop_reason).level is Level.ERROR
    f.reset()
    f.on_measured(JOINT_NAMES, [0.0] * 6, [], [], 0.0)
    f.step(0.0)
    assert status_report(f.last, f.stats).level is Level.WARN  # holding: no command yet
    f.on_command(JOINT_NAMES, [0.0] * 6, 0.01)
    f.on_command(["bogus"], [0.0], 0.01)
    f.step(0.02)
    ok = status_report(f.last, f.stats)
    assert ok.level is Level.OK and ok.values["commands_rejected"] == "1" and ok.values["rejected_unknown_joint"] == "1"
    warn = status_report(f.last, f.stats, rejected_since_last=1)
    assert warn.level is Level.WARN and "rejected" in warn.message
    f.estop("button")
    f.step(0.03)
    err = status_report(f.last, f.stats)
    assert err.level is Level.ERROR and "button" in err.message and err.values["state"] == "estopped"
