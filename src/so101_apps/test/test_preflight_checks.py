"""The preflight's judgements of what the chain did, on known traces: the e-stop and the watchdog (the arm holds,
torque stays on, no jump on release), the load, the safety limits in force against the URDF's, and joints checked
by eye."""

from __future__ import annotations

import json

import numpy as np
import pytest

from so101_apps.preflight.bus_checks import GripperProtection
from so101_apps.preflight.chain_checks import (
    Interruption,
    Trace,
    judge_calibration,
    judge_gripper_grasp,
    judge_interruption,
    judge_load,
    judge_safety_limits,
)
from so101_apps.preflight.gravity import urdf_joints
from so101_apps.preflight.motion_plan import Recording, probe_plan
from so101_apps.preflight.report import CheckResult, PreflightReport, Status
from so101_common.joints import JOINT_NAMES, JOINTS
from so101_driver.driver_core import DriverConfig
from so101_safety.config import SafetyConfig

V_MAX = [3.0] * len(JOINT_NAMES)
RESEED = 0.1
EVENT = Interruption("estop", stopped=1.0, hold_from=1.3, released=2.0, until=3.0)
POSE = np.array([0.1, -0.4, 0.0, -0.75, 0.0, 0.2])


def _trace(drift: float = 0.0, torque_off_at: float | None = None, release_offset: float = 0.0,
           release_speed: float = 1.0, frozen_change: float = 0.0) -> Trace:
    """100 Hz joint states of an arm held at POSE (plus ``drift`` on shoulder_lift over the hold), the filter's
    outputs (frozen while e-stopped, then ramping pan by ``release_speed`` rad/s from ``release_offset`` off the arm),
    and the driver's torque reports once a second."""
    trace = Trace()
    for k in range(300):
        t = 0.01 * k
        q = POSE.copy()
        if 1.3 <= t <= 2.0:
            q[1] += drift * (t - 1.3) / 0.7
        trace.states.append((t, q))
        out = POSE.copy()
        if EVENT.stopped < t < EVENT.released and t > 1.5:
            out[0] += frozen_change
        if t >= EVENT.released:
            out[0] += release_offset + release_speed * (t - EVENT.released)
        trace.outputs.append((t + 0.001, t, out))
    trace.torque = [(t, torque_off_at is None or t < torque_off_at) for t in (0.5, 1.5, 2.5)]
    return trace


def test_a_held_arm_and_a_bounded_release_pass() -> None:
    result = judge_interruption(_trace(), EVENT, V_MAX, RESEED)
    assert result.status is Status.PASS, result.line()
    assert result.values["torque_reports"] == 2 and result.values["hold_drift_rad"] == 0.0


@pytest.mark.parametrize(("trace", "finding"), [
    (_trace(drift=0.05), "the arm did not hold: shoulder_lift moved 0.050 rad"),
    (_trace(torque_off_at=1.2), "the driver reported torque off"),
    (_trace(release_offset=0.5), "the first output after the release is 0.500 rad from the arm"),
    (_trace(release_speed=4.0), "after the release an output moved at 1.33 × the velocity bound"),
    (_trace(frozen_change=0.01), "the filter's output changed while e-stopped"),
])
def test_each_way_an_interruption_goes_wrong_fails(trace: Trace, finding: str) -> None:
    result = judge_interruption(trace, EVENT, V_MAX, RESEED)
    assert result.status is Status.FAIL and result.detail == finding, result.line()


def test_load_is_judged_by_the_median_current_and_the_lowest_supply() -> None:
    config = DriverConfig(voltage_warn_min_v=10.5, current_warn_a=2.0)
    volts = {n: [12.0, 11.8] for n in JOINT_NAMES}
    currents = {n: [0.3, 0.4, 2.5] for n in JOINT_NAMES}  # one report at a sweep's turn: a peak, not a load
    loads = {n: [0.1, -0.2] for n in JOINT_NAMES}
    assert judge_load(currents, loads, volts, config).status is Status.PASS
    blocked = {**currents, "elbow_flex": [2.1, 2.3, 2.2]}
    result = judge_load(blocked, loads, volts, config)
    assert result.status is Status.FAIL and result.joints == ("elbow_flex",) and "over current" in result.detail
    weak = {**volts, "gripper": [11.9, 10.1]}
    result = judge_load(currents, loads, weak, config)
    assert result.status is Status.FAIL and result.joints == ("gripper",) and "sags under load" in result.detail


def test_the_default_safety_limits_are_the_urdfs_less_the_margins() -> None:
    result = judge_safety_limits(SafetyConfig(), urdf_joints())
    assert result.status is Status.PASS, result.line()
    assert result.values["elbow_flex"]["filter_rad"] == [pytest.approx(-1.64), pytest.approx(1.64)]


def test_a_velocity_bound_beyond_the_urdfs_fails_naming_the_joint() -> None:
    config = SafetyConfig.from_mapping({"joints.wrist_roll.max_velocity": 6.0})
    result = judge_safety_limits(config, urdf_joints())
    assert result.status is Status.FAIL and result.joints == ("wrist_roll",)
    assert "max_velocity 6 rad/s exceeds the URDF's 4.71711" in result.detail


def test_limits_that_are_not_the_urdfs_fail() -> None:
    urdf = urdf_joints()
    urdf["elbow_flex"] = type(urdf["elbow_flex"])("elbow_flex", -1.5, 1.5, 4.7, 2.94)  # the URDF of another arm
    result = judge_safety_limits(SafetyConfig(), urdf)
    assert result.status is Status.FAIL and result.joints == ("elbow_flex",) and "beyond the URDF's" in result.detail


def test_the_filter_takes_a_grasp_before_the_gripper_servo_s_overload_protection_trips() -> None:
    lerobot = GripperProtection(overload=0.25, after_s=2.0)  # Overload_Torque 25, Protection_Time 200
    assert judge_gripper_grasp(SafetyConfig(), lerobot).status is Status.PASS
    above = judge_gripper_grasp(SafetyConfig(gripper_load_limit=0.6), lerobot)  # the limit as it was
    assert above.status is Status.FAIL and above.joints == ("gripper",) and "not below the servo's overload" in above.detail
    late = judge_gripper_grasp(SafetyConfig(gripper_load_hold=1.5), lerobot)
    assert late.status is Status.FAIL and "to ease before the protection trips" in late.detail
    assert judge_gripper_grasp(SafetyConfig(), None).status is Status.SKIP


def test_no_margin_warns() -> None:
    result = judge_safety_limits(SafetyConfig(margin=0.0), urdf_joints())
    assert result.status is Status.WARN and "no margin" in result.detail


def test_joints_gravity_does_not_load_are_judged_by_eye_when_asked() -> None:
    start = np.array([0.0, -1.7, 1.6, 1.4, 0.0, 0.0])
    low, high = np.array([j.lower + 0.07 for j in JOINTS]), np.array([j.upper - 0.07 for j in JOINTS])
    plan = probe_plan(start, low, high)
    recording = Recording()
    for t in np.arange(0.0, plan.duration, 0.01):  # an arm that follows its commands exactly
        recording.add(float(t), plan.target(float(t)), np.zeros(len(JOINT_NAMES)), np.zeros(len(JOINT_NAMES)))
    seen = {"shoulder_pan": True, "wrist_roll": False, "gripper": True}
    results = {r.check: r for r in judge_calibration({}, recording, plan, (low, high), (low, high), seen)}
    assert results["calibration.shoulder_pan"].status is Status.PASS
    assert results["calibration.gripper"].status is Status.PASS
    assert results["calibration.wrist_roll"].status is Status.FAIL
    assert "moves the wrong way" in results["calibration.wrist_roll"].detail
    unasked = {r.check: r for r in judge_calibration({}, recording, plan, (low, high), (low, high))}
    assert unasked["calibration.gripper"].status is Status.WARN


def test_the_report_is_strict_json_with_one_entry_per_check(tmp_path) -> None:
    report = PreflightReport("virtual", "/dev/pts/9", "cal.json")
    report.add([CheckResult("estop", Status.FAIL, "held within nan rad", "drift <= 0.02 rad", "no joint states",
                            values={"hold_drift_rad": float("nan"), "drift_rad": {"elbow_flex": np.float64(0.001)}}),
                CheckResult.skipped("watchdog", "not run: estop failed")])
    written = json.loads((report.write(tmp_path)).read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert written["result"] == "fail" and written["checks"][0]["values"]["hold_drift_rad"] is None
    assert [c["status"] for c in written["checks"]] == ["fail", "skip"]
    assert report.summary().startswith("preflight FAILED") and report.summary().endswith(": estop")
