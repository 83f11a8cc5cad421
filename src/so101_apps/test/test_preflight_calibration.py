"""The preflight's calibration check on the virtual SO-101: the arm (in this process, simulated time) driven by the
driver's core over its real bus through the preflight's motions, its loads fitted against the URDF's gravity. A
clean arm passes; a joint reversed in the calibration file and a joint 0.8 rad off zero each fail, naming that joint
and no other. The virtual arm's internals are not read: only what the driver reports (positions and loads)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np
import pytest

from so101_apps.preflight.chain_checks import judge_calibration
from so101_apps.preflight.gravity import GravityModel, estimate_calibration
from so101_apps.preflight.motion_plan import GRAVITY_JOINTS, Recording, probe_plan
from so101_apps.preflight.report import CheckResult, Status
from so101_common.joints import JOINT_NAMES, JOINTS
from so101_driver.bus import FeetechBus
from so101_driver.driver_core import DriverConfig, DriverCore
from so101_feetech.calibration import MotorCalibration
from so101_virtual.robot import DEFAULT_MECHANICS_SEEDS, VirtualSO101, calibration_for, mechanics_for

CYCLE_S = 0.01  # the driver's 100 Hz, in simulated time
SAFETY_MARGIN = 0.05  # the safety filter's default margin inside the URDF's limits
STEPS_PER_RAD = 4095 / (2 * math.pi)  # LeRobot's mapping of steps to radians


def _probe(calibration: Mapping[str, MotorCalibration]) -> list[CheckResult]:
    """The preflight's probe motion on a fresh virtual arm driven with ``calibration``, judged."""
    robot = VirtualSO101("default")
    bus = FeetechBus(robot.open_pty(), timeout_ms=50.0, retries=3)
    core = DriverCore(bus, calibration, config=DriverConfig(rate_hz=0.0, configure_servos=True))
    try:
        core.start(torque_on=True)
        start = core.cycle().sample
        assert start is not None
        calibrated = core.mapping.limits_rad()
        allowed = (np.array([j.lower + SAFETY_MARGIN for j in JOINTS]), np.array([j.upper - SAFETY_MARGIN for j in JOINTS]))
        plan = probe_plan(start.position, np.maximum(allowed[0], calibrated[0]), np.minimum(allowed[1], calibrated[1]))
        recording = Recording()
        t = 0.0
        while t < plan.duration:
            core.command(JOINT_NAMES, plan.target(t).tolist())
            robot.step(CYCLE_S)
            t += CYCLE_S
            sample = core.cycle().sample
            if sample is not None:
                recording.add(t, sample.position, sample.velocity, sample.effort)
        return judge_calibration(estimate_calibration(recording, plan, GravityModel()), recording, plan, calibrated,
                                 allowed)
    finally:
        core.stop()
        robot.close()


def _shipped() -> dict[str, MotorCalibration]:
    """The calibration matching the virtual follower's mechanics (what ``so101 calibrate`` would measure)."""
    return calibration_for(mechanics_for(DEFAULT_MECHANICS_SEEDS["follower"]))


def _by_joint(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.check.removeprefix("calibration."): r for r in results}


def test_a_clean_arm_passes_the_calibration_check() -> None:
    results = _by_joint(_probe(_shipped()))
    assert list(results) == list(JOINT_NAMES)
    assert {n: results[n].status for n in GRAVITY_JOINTS} == dict.fromkeys(GRAVITY_JOINTS, Status.PASS), results
    for name in GRAVITY_JOINTS:
        values = results[name].values
        assert values["direction"] == 1 and abs(values["offset_rad"]) < 0.2, (name, values)
    # gravity does not load pan, roll and gripper: they moved as commanded and only their direction is left to the eye
    for name in set(JOINT_NAMES) - set(GRAVITY_JOINTS):
        assert results[name].status is Status.WARN and "confirm its direction by eye" in results[name].detail


@pytest.mark.parametrize("joint", ["elbow_flex"])
def test_a_joint_reversed_in_the_calibration_fails_naming_it(joint: str) -> None:
    calibration = _shipped()
    calibration[joint] = dataclasses.replace(calibration[joint], drive_mode=1)
    results = _by_joint(_probe(calibration))
    failed = [n for n, r in results.items() if r.status is Status.FAIL]
    assert failed == [joint], results
    assert results[joint].joints == (joint,) and "moves the wrong way" in results[joint].detail
    assert results[joint].values["direction"] == -1


@pytest.mark.parametrize("joint", ["shoulder_lift"])
def test_a_joint_at_the_wrong_zero_fails_naming_it(joint: str) -> None:
    # the calibrated range shifted by 0.8 rad: the joint reports 0 where the URDF's zero is 0.8 rad away (a homing
    # pose that was not the middle of the range)
    calibration = _shipped()
    shift = round(0.8 * STEPS_PER_RAD)
    cal = calibration[joint]
    calibration[joint] = dataclasses.replace(cal, range_min=cal.range_min + shift, range_max=cal.range_max + shift)
    results = _by_joint(_probe(calibration))
    failed = [n for n, r in results.items() if r.status is Status.FAIL]
    assert failed == [joint], results
    assert "from the URDF's zero" in results[joint].detail
    assert results[joint].values["offset_rad"] == pytest.approx(0.8, abs=0.2)
