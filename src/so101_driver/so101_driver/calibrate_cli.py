"""``so101 calibrate``: LeRobot's SO-101 calibration procedure, writing LeRobot's JSON.

    so101 calibrate --port /dev/ttyACM0 --robot-id my_arm                 # follower
    so101 calibrate --port /dev/ttyACM1 --robot-id my_leader --role leader

The procedure is LeRobot's (``SOFollower.calibrate``): torque off, position mode; the user poses the
arm at the middle of its range; Homing_Offset is reset to 0, then set to ``present − 2047`` so the
pose reads mid-scale; the user moves every joint but ``wrist_roll`` through its whole range while
min/max are recorded (``wrist_roll`` gets 0..4095); Homing_Offset and the limits are written to the
servos (EEPROM, Lock 0) and the file is saved where LeRobot looks for it (or ``--out``). The result
is interchangeable with a file written by ``lerobot-calibrate``.

:func:`calibrate` takes the prompts through a :class:`CalibrationIO`, so tests drive it without a
terminal (and move the virtual arm from its callbacks).
"""

from __future__ import annotations

import argparse
import select
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from so101_common.joints import JOINTS
from so101_driver.bus import FeetechBus
from so101_driver.errors import DriverError
from so101_feetech.calibration import (
    MAX_RAW,
    MID_RAW,
    CalibrationError,
    MotorCalibration,
    default_calibration_path,
    save_calibration,
)
from so101_feetech.control_table import Register

__all__ = ["CalibrationIO", "TerminalIO", "calibrate", "add_arguments", "run", "FULL_TURN_JOINTS"]

FULL_TURN_JOINTS = ("wrist_roll",)  # recorded as the whole encoder range, as LeRobot does


class CalibrationIO(Protocol):
    """The user's side of the procedure."""

    def wait_for_user(self, message: str) -> None:
        """Show ``message`` and return when the user confirms (ENTER)."""

    def show(self, message: str) -> None:
        """Show information (live ranges included)."""

    def stop_requested(self) -> bool:
        """Polled while ranges are recorded: True once the user has pressed ENTER."""

    def confirm(self, question: str) -> bool:
        """Ask a yes/no question (default no)."""


class TerminalIO:
    """Prompts on stdin/stdout (the CLI)."""

    def __init__(self) -> None:
        self._last_table = 0.0

    def wait_for_user(self, message: str) -> None:
        input(f"{message} ")

    def show(self, message: str) -> None:
        now = time.monotonic()
        if message.startswith("\x1b") and now - self._last_table < 0.1:
            return  # live table: at most 10 refreshes a second
        self._last_table = now
        print(message, flush=True)

    def stop_requested(self) -> bool:
        ready, _, _ = select.select([sys.stdin], [], [], 0)
        if ready:
            sys.stdin.readline()
            return True
        return False

    def confirm(self, question: str) -> bool:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def _table(names: list[str], mins: Mapping[str, int], pos: Mapping[str, int], maxes: Mapping[str, int]) -> str:
    lines = [f"{'NAME':<15} | {'MIN':>6} | {'POS':>6} | {'MAX':>6}"]
    lines += [f"{n:<15} | {mins[n]:>6} | {pos[n]:>6} | {maxes[n]:>6}" for n in names]
    # move the cursor back up so the next table overwrites this one
    return "\x1b[2K" + "\n".join(lines) + f"\x1b[{len(lines)}A"


def calibrate(bus: FeetechBus, io: CalibrationIO, motors: Mapping[str, int] | None = None,
              poll_interval_s: float = 0.01) -> dict[str, MotorCalibration]:
    """Run the procedure on an open bus; returns the calibration (already written to the servos)."""
    motors = dict(motors) if motors is not None else {j.name: j.servo_id for j in JOINTS}
    names, ids = list(motors), list(motors.values())
    bus.set_torque(ids, False)  # Torque_Enable 0 and Lock 0: EEPROM writes below are kept
    for servo_id in ids:
        bus.write(Register.Operating_Mode, servo_id, 0)

    io.wait_for_user("Move the arm to the middle of its range of motion and press ENTER...")
    for servo_id in ids:  # reset_calibration: offsets 0, full range
        bus.write(Register.Homing_Offset, servo_id, 0)
        bus.write(Register.Min_Position_Limit, servo_id, 0)
        bus.write(Register.Max_Position_Limit, servo_id, MAX_RAW)
    feedback = bus.sync_read_feedback(ids)
    actual = {n: feedback[motors[n]].position for n in names}
    homing = {n: actual[n] - MID_RAW for n in names}
    for name in names:
        try:
            bus.write(Register.Homing_Offset, motors[name], homing[name])
        except ValueError as err:
            raise CalibrationError(f"{name}: homing offset {homing[name]} does not fit the servo ({err}); "
                                   "move the joint a little away from this pose and start again") from err

    recorded = [n for n in names if n not in FULL_TURN_JOINTS]
    io.show(f"Move all joints except {list(FULL_TURN_JOINTS)} one by one through their entire ranges of motion.\n"
            "Recording positions. Press ENTER to stop...")
    start = _positions(bus, motors, recorded)
    mins, maxes = dict(start), dict(start)
    while True:
        positions = _positions(bus, motors, recorded)
        for n in recorded:
            mins[n] = min(mins[n], positions[n])
            maxes[n] = max(maxes[n], positions[n])
        io.show(_table(recorded, mins, positions, maxes))
        if io.stop_requested():
            break
        time.sleep(poll_interval_s)
    io.show("\n" * (len(recorded) + 1))
    same = [n for n in recorded if mins[n] == maxes[n]]
    if same:
        raise CalibrationError(f"these joints did not move while recording: {same}")
    for n in names:
        if n in FULL_TURN_JOINTS:
            mins[n], maxes[n] = 0, MAX_RAW

    result = {n: MotorCalibration(id=motors[n], drive_mode=0, homing_offset=homing[n],
                                  range_min=mins[n], range_max=maxes[n]) for n in names}
    for cal in result.values():  # write_calibration
        bus.write(Register.Homing_Offset, cal.id, cal.homing_offset)
        bus.write(Register.Min_Position_Limit, cal.id, cal.range_min)
        bus.write(Register.Max_Position_Limit, cal.id, cal.range_max)
    return result


def _positions(bus: FeetechBus, motors: Mapping[str, int], names: list[str]) -> dict[str, int]:
    feedback = bus.sync_read_feedback([motors[n] for n in names])
    return {n: feedback[motors[n]].position for n in names}


# --- command line -----------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", required=True, help="serial port of the arm's bus adapter (e.g. /dev/ttyACM0)")
    parser.add_argument("--robot-id", required=True, help="LeRobot id of the arm (names the calibration file)")
    parser.add_argument("--role", choices=["follower", "leader"], default="follower")
    parser.add_argument("--out", type=Path, default=None,
                        help="write the calibration here instead of LeRobot's default location")
    parser.add_argument("--baudrate", type=int, default=1_000_000)
    parser.add_argument("--yes", action="store_true", help="overwrite an existing calibration file without asking")


def run(args: argparse.Namespace, io: CalibrationIO | None = None) -> int:
    io = io or TerminalIO()
    try:
        out = args.out or default_calibration_path(args.robot_id, args.role)
        if out.exists() and not args.yes and not io.confirm(f"{out} exists. Overwrite it?"):
            print("calibration cancelled; nothing written")
            return 1
        with FeetechBus(args.port, args.baudrate) as bus:
            result = calibrate(bus, io)
        save_calibration(out, result)
    except (DriverError, CalibrationError, OSError) as err:
        print(f"so101 calibrate: error: {err}", file=sys.stderr)
        return 1
    print(f"Calibration saved to {out}")
    return 0
