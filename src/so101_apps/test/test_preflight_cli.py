"""``so101 preflight`` end to end on the virtual SO-101: the bus, then the deploy chain (driver in its own process,
safety filter, the preflight in the policy's seat) moving the arm, then the firmware settings; a clean arm passes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from so101_common.joints import JOINT_NAMES
from so101_testing import private_ros_env

# what does not depend on the machine's load passes; the bus timing, the cycle rate and the calibration's noise may
# warn on a loaded machine (the arm's physics then runs late), but never fail on a clean arm
MUST_PASS = ("servos", "supply_voltage", "temperature", "servo_status", "safety_limits", "calibration.shoulder_lift",
             "load", "estop", "watchdog", "firmware_settings", "gripper_grasp")
CHECKS = ("servos", "supply_voltage", "temperature", "servo_status", "bus_round_trip", "safety_limits",
          *(f"calibration.{n}" for n in JOINT_NAMES), "load", "cycle_rate", "estop", "watchdog", "firmware_settings",
          "gripper_grasp")


def test_preflight_on_the_virtual_arm_passes_and_writes_its_report(tmp_path: Path) -> None:
    out = tmp_path / "preflight"
    result = subprocess.run([sys.executable, "-m", "so101_apps.cli", "preflight", "--out", str(out)],
                            env=private_ros_env(), capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
    report = json.loads((out / "preflight.json").read_text())
    assert report["result"] == "pass" and report["robot"] == "virtual"
    assert [c["check"] for c in report["checks"]] == list(CHECKS)
    status = {c["check"]: c["status"] for c in report["checks"]}
    assert {name: status[name] for name in MUST_PASS} == dict.fromkeys(MUST_PASS, "pass"), report
    assert "fail" not in status.values()
    for check in report["checks"]:  # one line per check: its status, its measured value and its limit
        (line,) = [line for line in result.stdout.splitlines() if line.split()[1:2] == [check["check"]]]
        assert line.split()[0] == check["status"].upper() and check["measured"] in line and check["limit"] in line
    assert "preflight PASSED" in result.stdout and str(out / "preflight.json") in result.stdout
