"""LeRobot 0.4.4's FeetechMotorsBus (on scservo_sdk) against the virtual bus over a pty: connect
handshake, broadcast-ping scan, configure, torque, calibration write, sync read/write."""

from collections.abc import Iterator

import pytest
from lerobot.motors import Motor, MotorCalibration, MotorNormMode
from lerobot.motors.feetech import FeetechMotorsBus

from so101_feetech.control_table import Register
from so101_testing import wait_for
from so101_virtual.bus_server import BusServer, BusTiming
from so101_virtual.pty_link import PtyLink
from so101_virtual.servo_memory import ServoMemory, make_servos

pytestmark = pytest.mark.slow  # importing LeRobot alone takes seconds

NAMES = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")


def motors() -> dict[str, Motor]:
    return {
        name: Motor(i, "sts3215", MotorNormMode.RANGE_0_100 if name == "gripper" else MotorNormMode.RANGE_M100_100)
        for i, name in enumerate(NAMES, start=1)
    }


@pytest.fixture
def arm() -> Iterator[tuple[dict[int, ServoMemory], PtyLink]]:
    servos = make_servos()
    with PtyLink(BusServer(servos, timing=BusTiming.realistic())) as link:
        yield servos, link


def test_connect_handshake_configure_and_sync_io(arm) -> None:
    servos, link = arm
    bus = FeetechMotorsBus(link.device_path, motors())
    bus.connect()  # pings every id (+ model read), reads both firmware version registers
    try:
        with bus.torque_disabled():
            bus.configure_motors()
            for name in NAMES:
                bus.write("P_Coefficient", name, 16)
        assert all(m.get(Register.Return_Delay_Time) == 0 for m in servos.values())
        assert servos[3].saved_eeprom[Register.P_Coefficient.address] == 16  # unlocked: saved
        bus.enable_torque()
        assert all(m.get(Register.Torque_Enable) == 1 and m.get(Register.Lock) == 1 for m in servos.values())

        for i, memory in servos.items():
            memory.set_encoder(1000 + 10 * i)
        raw = bus.sync_read("Present_Position", normalize=False)
        assert raw == {name: 1000 + 10 * i for i, name in enumerate(NAMES, start=1)}
        bus.sync_write("Goal_Position", {name: 1500 for name in NAMES}, normalize=False)
        # SYNC_WRITE has no reply: wait until the bus thread has applied it
        assert wait_for(lambda: all(m.get(Register.Goal_Position) == 1500 for m in servos.values()), timeout=5)
    finally:
        bus.disconnect(disable_torque=True)
    assert all(m.get(Register.Torque_Enable) == 0 for m in servos.values())


def test_broadcast_ping_scan(arm) -> None:
    _, link = arm
    bus = FeetechMotorsBus(link.device_path, {})
    bus.connect(handshake=False)
    try:
        assert bus.broadcast_ping() == {i: 777 for i in range(1, 7)}
    finally:
        bus.port_handler.closePort()


def test_calibration_write_and_read_back(arm) -> None:
    servos, link = arm
    servos[2].set_encoder(3000)
    bus = FeetechMotorsBus(link.device_path, motors())
    bus.connect()
    try:
        bus.reset_calibration()
        homings = bus._get_half_turn_homings(bus.sync_read("Present_Position", normalize=False))
        assert homings["shoulder_lift"] == 3000 - 2047
        calibration = {
            name: MotorCalibration(id=i, drive_mode=0, homing_offset=homings[name], range_min=500, range_max=3500)
            for i, name in enumerate(NAMES, start=1)
        }
        bus.write_calibration(calibration)
        assert bus.read_calibration() == calibration
        assert bus.read("Present_Position", "shoulder_lift", normalize=False) == 2047
    finally:
        bus.disconnect(disable_torque=True)
    assert servos[2].get(Register.Homing_Offset) == 953


def test_handshake_fails_on_a_missing_motor(arm) -> None:
    servos, link = arm
    bus = FeetechMotorsBus(link.device_path, motors())
    link.server.faults.unplug(4)
    with pytest.raises(RuntimeError, match=r"Missing motor IDs:\n  - 4 "):
        bus.connect()
    bus.port_handler.closePort()
