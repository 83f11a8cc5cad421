"""``so101 preflight``: the deployment checklist, run by the machine, before the first policy runs on an arm.

    so101 preflight                                              # the virtual SO-101 (default profile)
    so101 preflight --robot real --port /dev/ttyACM0 --calibration-file my_arm.json --confirm
    so101 preflight --profile worn --out runs/preflight

One line per check (pass / warn / fail / skip, the measured value and its limit), a JSON report
``OUT/preflight.json``, exit status 1 when a check failed. The arm moves slowly inside its limits, from where it
is to a check pose and back (under a minute in all); on a real arm the preflight says so and waits for Enter first
(``--yes``: do not wait). Its nodes join the ROS environment it is started in (``--isolated``: a private loopback
domain). What each check means: ``src/so101_driver/README.md`` (Preflight).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from so101_apps import ros_environment
from so101_apps.preflight.flow import PreflightOptions, run_preflight
from so101_apps.preflight.report import CheckResult

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--robot", choices=("virtual", "real"), default="virtual",
                        help="virtual: the embedded virtual SO-101 (default); real: the arm on --port")
    parser.add_argument("--port", default="", help="the real arm's serial port (--robot real)")
    parser.add_argument("--robot-id", default=None,
                        help="the real arm's LeRobot id: its calibration is LeRobot's file for it (default: the "
                             "driver's robot_id)")
    parser.add_argument("--calibration-file", default="",
                        help="the real arm's LeRobot calibration JSON (default: the driver's robot_id file)")
    parser.add_argument("--profile", default="default", help="gap profile of the virtual arm (name or YAML file)")
    parser.add_argument("--out", type=Path, default=Path("preflight"), help="report folder (default: ./preflight)")
    parser.add_argument("--confirm", action="store_true",
                        help="check the joints gravity does not load (pan, wrist roll, gripper) by eye: each turns a "
                             "little and you answer what you saw")
    parser.add_argument("--yes", action="store_true", help="real arm: do not wait for Enter before the arm moves")
    ros_environment.add_arguments(parser)


def _ask(question: str) -> bool:
    while True:
        answer = input(f"   {question} [y/n] ").strip().lower()
        if answer in ("y", "yes", "n", "no"):
            return answer.startswith("y")


def _wait(what: str) -> None:
    input(f"\n   Next, {what}. Press Enter when it is clear (Ctrl-C to stop) ")


def _print(result: CheckResult) -> None:
    print(f"  {result.line()}", flush=True)


def run(args: argparse.Namespace) -> int:
    if args.robot == "real" and not args.port:
        raise ValueError("--robot real needs --port (the arm's serial device)")
    options = PreflightOptions(robot=args.robot, port=args.port, robot_id=args.robot_id,
                               calibration_file=args.calibration_file,
                               profile=args.profile, out=args.out, confirm=_ask if args.confirm else None,
                               before_moving=_wait if args.robot == "real" and not args.yes else None)
    arm = f"virtual SO-101 (profile {args.profile})" if args.robot == "virtual" else f"SO-101 on {args.port}"
    print(f"== preflight: {arm}", flush=True)
    ros_environment.join(args)
    report = run_preflight(options, _print)
    print(f"\n{report.summary()}\nreport: {args.out / 'preflight.json'}")
    return 0 if report.passed else 1
