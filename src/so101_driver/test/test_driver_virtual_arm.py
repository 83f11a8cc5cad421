"""The driver stack against the virtual SO-101 (MuJoCo physics, so101_virtual.robot), stepped by hand.

These check that the driver's units agree with the arm's mechanics: what the driver reports is the
true joint angle (within encoder steps), commands land where asked (within the servo's sag), and
``so101 calibrate`` on a factory-fresh arm measures exactly its mechanics.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from so101_common.joints import JOINT_NAMES, JOINTS
from so101_driver import calibrate_cli
from so101_driver.bus import FeetechBus
from so101_driver.driver_core import DriverConfig, DriverCore
from so101_feetech.calibration import raw_to_rad
from so101_feetech.control_table import Register
from so101_virtual.robot import VirtualSO101, mechanics_for

pytestmark = pytest.mark.slow

STEP_RAD = 2 * math.pi / 4096


def _run(robot: VirtualSO101, core: DriverCore, seconds: float, dt: float = 0.01):
    result = None
    for _ in range(round(seconds / dt)):
        robot.step(dt)
        result = core.cycle()
    return result


@pytest.mark.parametrize("drive_modes", [None, [1, 0, 1, 1, 0, 1]], ids=["normal", "reversed-servos"])
def test_driver_reports_true_angles_and_reaches_commands(drive_modes):
    mechanics = mechanics_for(3, drive_modes) if drive_modes else None
    with VirtualSO101("ideal", "follower", mechanics=mechanics, mechanics_seed=3) as robot:
        calibration = robot.calibration()
        if drive_modes:
            assert [calibration[n].drive_mode for n in JOINT_NAMES] == drive_modes
        with FeetechBus(robot.open_pty(), timeout_ms=50) as bus:
            core = DriverCore(bus, calibration)
            core.start(torque_on=True)
            sample = _run(robot, core, 0.3).sample
            np.testing.assert_allclose(sample.position, robot.true_positions(), atol=3 * STEP_RAD)

            target = np.array([0.4, -0.5, 0.6, -0.3, 1.0, 0.8])
            core.command(list(JOINT_NAMES), target.tolist())
            sample = _run(robot, core, 2.5).sample
            truth = robot.true_positions()
            np.testing.assert_allclose(sample.position, truth, atol=3 * STEP_RAD)
            np.testing.assert_allclose(truth, target, atol=0.06)  # gravity sag of a P=32 servo, no more
            core.stop()


@pytest.mark.parametrize("drive_modes", [None, [1] * 6], ids=["normal", "reversed-servos"])
def test_effort_estimate_holds_gravity_with_the_right_sign(drive_modes):
    mechanics = mechanics_for(0, drive_modes) if drive_modes else None
    # the datasheet arm: the fitted default's gearbox friction (~0.4 N·m on shoulder_lift) carries a
    # share of gravity that depends on the approach, which no load-based effort estimate can know
    with VirtualSO101("unfitted", "follower", mechanics=mechanics) as robot, \
            FeetechBus(robot.open_pty(), timeout_ms=50) as bus:
        core = DriverCore(bus, robot.calibration())
        core.start(torque_on=True)
        core.command(["shoulder_lift", "elbow_flex"], [0.0, 0.0])  # arm stretched out: loaded joints
        sample = _run(robot, core, 2.0).sample
        model, data = robot.physics.model, robot.physics.data
        for name in ("shoulder_lift", "elbow_flex"):
            # holding still, the motor's torque balances gravity: tau = qfrc_bias (REP-103 joint sign)
            gravity = data.qfrc_bias[model.joint(name).dofadr[0]]
            effort = sample.effort[JOINT_NAMES.index(name)]
            assert abs(gravity) > 0.2 and np.sign(effort) == np.sign(gravity), (name, effort, gravity)
            assert abs(effort) == pytest.approx(abs(gravity), rel=0.5)
        assert np.all(np.abs(sample.effort) <= 2.94 + 1e-9)


# --- so101 calibrate on a factory-fresh arm ---------------------------------------------------------

SEGMENT = 0.6  # s per phase of the scripted sweep
OVERSHOOT = 0.1  # rad pushed past each limit, as a user pushes a joint against its stop
MID = np.array([0.0, 0.0, 0.0, 0.0, 0.0, (JOINTS[5].lower + JOINTS[5].upper) / 2])


def _sweep(t: float) -> np.ndarray:
    """Hold the middle pose, then take each joint (but wrist_roll) to both stops and back."""
    q = MID.copy()
    k = int(t // (4 * SEGMENT)) - 1
    if 0 <= k < len(JOINTS) and JOINTS[k].name != "wrist_roll":
        j, u = JOINTS[k], (t % (4 * SEGMENT)) / SEGMENT
        lo, hi = j.lower - OVERSHOOT, j.upper + OVERSHOOT
        q[k] = np.interp(u, [0, 1, 1.5, 2.5, 3, 4], [MID[k], lo, lo, hi, hi, MID[k]])
    return q


class HandOnTheArm:
    """The user: poses the (leader, hand-moved) arm and steps time while ranges are recorded,
    remembering the true angles it produced."""

    def __init__(self, robot: VirtualSO101) -> None:
        self.robot = robot

    def wait_for_user(self, message: str) -> None:
        self.robot.step(2 * SEGMENT)
        self.pose = self.robot.true_positions()
        self.low, self.high = self.pose.copy(), self.pose.copy()

    def show(self, message: str) -> None:
        pass

    def stop_requested(self) -> bool:
        self.robot.step(0.02)
        q = self.robot.true_positions()
        self.low, self.high = np.minimum(self.low, q), np.maximum(self.high, q)
        return self.robot.sim_time > 4 * SEGMENT * (len(JOINTS) + 1)

    def confirm(self, question: str) -> bool:
        return True


def test_calibrate_factory_fresh_virtual_arm_measures_its_mechanics():
    with VirtualSO101("ideal", "leader", calibrated=False, motion=_sweep, loop_motion=False) as robot:
        user = HandOnTheArm(robot)
        with FeetechBus(robot.open_pty(), timeout_ms=50) as bus:
            result = calibrate_cli.calibrate(bus, user, poll_interval_s=0)
        shipped = robot.calibration()
        for k, name in enumerate(JOINT_NAMES):
            mech, cal = robot.mechanics[k], result[name]
            # exactly what the encoders read at the poses the hand made (± quantisation)
            homing = round(mech.actual(user.pose[k])) - 2047
            assert abs(cal.homing_offset - homing) <= 1, name
            if name == "wrist_roll":
                assert (cal.range_min, cal.range_max) == (0, 4095)
            else:
                assert abs(cal.range_min - (round(mech.actual(user.low[k])) - homing)) <= 2, name
                assert abs(cal.range_max - (round(mech.actual(user.high[k])) - homing)) <= 2, name
            # and close to the arm's own calibration (the hand sags under gravity a little and
            # presses the joints slightly into their stops)
            assert abs(cal.homing_offset - shipped[name].homing_offset) <= 25, name
            assert abs(cal.range_min - shipped[name].range_min) <= 40, name
            assert abs(cal.range_max - shipped[name].range_max) <= 40, name
            memory = robot.memory(name)  # written to the servo
            assert memory.get(Register.Homing_Offset) == cal.homing_offset
            assert (memory.get(Register.Min_Position_Limit), memory.get(Register.Max_Position_Limit)) == (
                cal.range_min, cal.range_max)


@pytest.mark.parametrize("write_on_command", [True, False], ids=["at-once", "at-the-next-cycle"])
def test_a_command_reaches_the_servo_when_configured(write_on_command):
    """By default a command's goals go out as it arrives; otherwise they wait for the cycle's write."""
    with VirtualSO101("ideal", "follower") as robot, FeetechBus(robot.open_pty(), timeout_ms=50) as bus:
        calibration = robot.calibration()
        core = DriverCore(bus, calibration, config=DriverConfig(write_on_command=write_on_command))
        core.start(torque_on=True)
        core.cycle()
        servo_id = calibration["elbow_flex"].id

        def goal_rad() -> float:  # read back from the servo: the read's reply comes after the write was taken
            return raw_to_rad("elbow_flex", bus.read(Register.Goal_Position, servo_id), calibration["elbow_flex"])

        held = goal_rad()
        core.command(["elbow_flex"], [held - 0.3])
        assert goal_rad() == pytest.approx(held - 0.3 if write_on_command else held, abs=STEP_RAD)
        core.cycle()
        assert goal_rad() == pytest.approx(held - 0.3, abs=STEP_RAD)
        core.stop()
