"""LeRobot 0.4.4 itself against the virtual follower: its bus reads back the calibration the virtual
arm ships (already calibrated), and its normalised positions with the shipped JSON are the true
joint angles."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from lerobot.motors import Motor, MotorCalibration, MotorNormMode
from lerobot.motors.feetech import FeetechMotorsBus

from so101_common.joints import JOINT_NAMES, gripper_rad_to_percent
from so101_feetech.calibration import load_calibration
from so101_virtual.bus_server import BusTiming
from so101_virtual.robot import VirtualSO101

CONFIG = Path(__file__).resolve().parents[3] / "config" / "calibration"


def retried(call, tries: int = 5):
    """LeRobot raises ConnectionError on a missed reply deadline (a loaded machine, now and then)."""
    for attempt in range(tries):
        try:
            return call()
        except ConnectionError:
            if attempt == tries - 1:
                raise
    return None


def lerobot_calibration(role: str) -> dict[str, MotorCalibration]:
    return {name: MotorCalibration(id=c.id, drive_mode=c.drive_mode, homing_offset=c.homing_offset,
                                   range_min=c.range_min, range_max=c.range_max)
            for name, c in load_calibration(CONFIG / f"virtual_{role}.json").items()}


@pytest.mark.parametrize("role", ["follower", "leader"])
def test_lerobot_reads_true_angles_with_the_shipped_calibration(role):
    calibration = lerobot_calibration(role)
    motors = {name: Motor(cal.id, "sts3215", MotorNormMode.RANGE_0_100 if name == "gripper" else MotorNormMode.DEGREES)
              for name, cal in calibration.items()}
    with VirtualSO101("ideal", role, bus_timing=BusTiming.fast()) as robot:
        bus = FeetechMotorsBus(robot.open_pty(), motors, calibration=calibration)
        retried(bus.connect)
        try:
            assert retried(bus.read_calibration) == calibration  # the servos already hold it
            assert bus.is_calibrated
            for pose in ([0.3, -0.8, 1.1, -0.4, 2.0, 0.2], [-1.5, 1.2, -1.4, 1.3, -2.5, 1.5]):
                robot.physics.set_positions(pose)
                robot.step(0.001)
                read = bus.sync_read("Present_Position", num_retry=3)
                truth = robot.true_positions()
                for name, value in read.items():
                    q = truth[JOINT_NAMES.index(name)]
                    if name == "gripper":
                        assert value == pytest.approx(gripper_rad_to_percent(q), abs=0.3)
                    else:
                        assert value == pytest.approx(np.degrees(q), abs=0.2)
        finally:
            bus.disconnect(disable_torque=False)
