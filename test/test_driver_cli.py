"""``so101 calibrate`` and ``so101 scan`` against factory-fresh virtual servos on a pty.

The "user" is scripted through the injectable CalibrationIO: it poses the arm and sweeps each joint
by setting the servos' encoder readings (the mechanics), and the resulting file must describe
those mechanics exactly.
"""

from __future__ import annotations

import argparse
import json

import pytest

from so101_apps.cli import main as so101_main
from so101_common.joints import JOINTS
from so101_driver import calibrate_cli, scan_cli
from so101_driver.bus import FeetechBus
from so101_feetech.calibration import CalibrationError, load_calibration, raw_to_rad
from so101_feetech.control_table import Register
from so101_virtual.bus_server import BusServer, BusTiming
from so101_virtual.pty_link import PtyLink
from so101_virtual.servo_memory import ServoMemory

# the arm's mechanics as encoder readings (before any homing offset): (low stop, mid pose, high stop)
MECHANICS = {
    "shoulder_pan": (700, 2000, 3300),
    "shoulder_lift": (3100 - 2400, 1900, 3100),
    "elbow_flex": (1500, 2600, 3700),
    "wrist_flex": (100, 1300, 2500),
    "wrist_roll": (0, 3000, 4095),
    "gripper": (1900, 2100, 3400),
}


class ScriptedUser:
    """Poses the arm at mid-range, then sweeps every joint between its stops, then presses ENTER."""

    def __init__(self, servos: dict[int, ServoMemory], sweep: bool = True) -> None:
        self.servos = servos
        self.messages: list[str] = []
        self.poses = []
        if sweep:
            for j in JOINTS:
                low, _, high = MECHANICS[j.name]
                self.poses += [{j.servo_id: low}, {j.servo_id: high}, {j.servo_id: MECHANICS[j.name][1]}]
        self.confirmations: list[str] = []
        self.answer = False

    def wait_for_user(self, message: str) -> None:
        self.messages.append(message)
        for j in JOINTS:
            self.servos[j.servo_id].set_encoder(MECHANICS[j.name][1])

    def show(self, message: str) -> None:
        self.messages.append(message)

    def stop_requested(self) -> bool:
        if not self.poses:
            return True
        for servo_id, actual in self.poses.pop(0).items():
            self.servos[servo_id].set_encoder(actual)
        return False

    def confirm(self, question: str) -> bool:
        self.confirmations.append(question)
        return self.answer


@pytest.fixture
def servos():
    # factory fresh, but someone's old calibration is still in EEPROM: the procedure must reset it
    memories = {j.servo_id: ServoMemory(j.servo_id, strict_eeprom_lock=True) for j in JOINTS}
    for m in memories.values():
        m.set(Register.Homing_Offset, 321)
        m.set(Register.Min_Position_Limit, 1000)
        m.set(Register.Lock, 1)
        m.set(Register.Torque_Enable, 1)
    return memories


@pytest.fixture
def link(servos):
    with PtyLink(BusServer(servos, timing=BusTiming.fast())) as link:
        yield link


def expected_calibration(name: str) -> dict[str, int]:
    low, mid, high = MECHANICS[name]
    homing = mid - 2047
    if name == "wrist_roll":
        return {"homing_offset": homing, "range_min": 0, "range_max": 4095}
    return {"homing_offset": homing, "range_min": low - homing, "range_max": high - homing}


def test_calibrate_matches_the_mechanics(link, servos):
    user = ScriptedUser(servos)
    with FeetechBus(link.device_path, timeout_ms=50) as bus:
        result = calibrate_cli.calibrate(bus, user, poll_interval_s=0)
    for j in JOINTS:
        cal = result[j.name]
        expected = expected_calibration(j.name)
        assert (cal.id, cal.drive_mode) == (j.servo_id, 0)
        assert {k: getattr(cal, k) for k in expected} == expected, j.name
        memory = servos[j.servo_id]
        # written to the servos, and saved (EEPROM unlocked by the torque-off step)
        assert memory.get(Register.Homing_Offset) == cal.homing_offset
        assert memory.get(Register.Min_Position_Limit) == cal.range_min
        assert memory.get(Register.Max_Position_Limit) == cal.range_max
        assert memory.get(Register.Torque_Enable) == 0
        # the mid pose reads mid-scale now, and maps to 0 rad for the arm joints
        memory.set_encoder(MECHANICS[j.name][1])
        assert memory.get(Register.Present_Position) == 2047
    for name in ("shoulder_pan", "elbow_flex", "wrist_flex", "shoulder_lift"):
        assert abs(raw_to_rad(name, 2047, result[name])) < 1e-9
    assert any("middle of its range" in m for m in user.messages)


def test_calibrate_refuses_a_joint_that_did_not_move(link, servos):
    user = ScriptedUser(servos, sweep=False)
    user.poses = [{1: 500}]  # only shoulder_pan moves
    with FeetechBus(link.device_path, timeout_ms=50) as bus, pytest.raises(CalibrationError, match="did not move"):
        calibrate_cli.calibrate(bus, user, poll_interval_s=0)


def _args(link, tmp_path, **extra):
    ns = {"port": link.device_path, "robot_id": "test_arm", "role": "follower", "out": None,
          "baudrate": 1_000_000, "yes": False}
    ns.update(extra)
    return argparse.Namespace(**ns)


def test_calibrate_cli_writes_lerobot_file_at_default_path(link, servos, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_LEROBOT_CALIBRATION", str(tmp_path))
    assert calibrate_cli.run(_args(link, tmp_path), ScriptedUser(servos)) == 0
    path = tmp_path / "robots" / "so_follower" / "test_arm.json"
    assert f"Calibration saved to {path}" in capsys.readouterr().out
    data = json.loads(path.read_text())
    assert list(data) == [j.name for j in JOINTS]
    assert data["elbow_flex"] == {"id": 3, "drive_mode": 0, **expected_calibration("elbow_flex")}
    assert load_calibration(path)["gripper"].range_max == expected_calibration("gripper")["range_max"]

    # it exists now: without --yes the user is asked, and "no" keeps the file
    before = path.read_text()
    user = ScriptedUser(servos)
    assert calibrate_cli.run(_args(link, tmp_path), user) == 1
    assert user.confirmations and path.read_text() == before
    user.answer = True
    assert calibrate_cli.run(_args(link, tmp_path, role="leader"), user) == 0  # another role: another file
    assert (tmp_path / "teleoperators" / "so_leader" / "test_arm.json").is_file()
    out = tmp_path / "x" / "cal.json"
    assert calibrate_cli.run(_args(link, tmp_path, out=out, yes=True), ScriptedUser(servos)) == 0
    assert out.is_file()


def test_calibrate_cli_reports_port_errors_once(tmp_path, capsys):
    args = argparse.Namespace(port=str(tmp_path / "nope"), robot_id="a", role="follower", out=tmp_path / "c.json",
                              baudrate=1_000_000, yes=True)
    assert calibrate_cli.run(args, ScriptedUser({})) == 1
    assert "cannot open" in capsys.readouterr().err


def test_scan_cli_table(link, servos, capsys):
    servos[6].set(Register.Baud_Rate, 1)  # the gripper talks at 500 kbaud
    assert so101_main(["scan", "--port", link.device_path, "--baud", "1000000", "500000"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["ID", "MODEL", "FIRMWARE", "BAUD", "STATUS"]
    assert out[1].split() == ["1", "STS3215", "(777)", "3.10", "1000000", "ok"]
    assert out[6].split()[0] == "6" and out[6].split()[4] == "500000"
    assert so101_main(["scan", "--port", link.device_path, "--baud", "1000000", "--ids", "2-3", "--no-broadcast"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]] == ["2", "3"]


def test_scan_cli_nothing_found(link, capsys):
    assert so101_main(["scan", "--port", link.device_path, "--baud", "57600"]) == 1
    assert "no servo answered" in capsys.readouterr().out


def test_parse_ids():
    assert scan_cli.parse_ids("1-3,7") == [1, 2, 3, 7]
    with pytest.raises(argparse.ArgumentTypeError):
        scan_cli.parse_ids("a-b")
    with pytest.raises(argparse.ArgumentTypeError):
        scan_cli.parse_ids("250-300")
