"""``so101 virtual-bus``: serve a virtual SO-101 on a pseudo-terminal until SIGINT/SIGTERM.

    so101 virtual-bus --link /tmp/so101_follower [--profile default|FILE] [--role follower|leader]
                      [--motion SAGE_FILE] [--faults-socket PATH] [--factory-fresh] [--time-scale X]
                      [--status-file PATH]
    so101 virtual-bus --write-calibration config/calibration

Prints one line with the device and the link (``device /dev/pts/N link /tmp/so101_follower``) once the
bus is up; open either with ``scservo_sdk``/LeRobot/the driver at 1 Mbaud. With ``--faults-socket``
faults are set at run time as JSON lines on that UNIX socket (see ``so101_virtual.faults``).
``--write-calibration DIR`` writes ``virtual_follower.json`` and ``virtual_leader.json`` (LeRobot format,
matching the default virtual arms) and exits.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence

from so101_common.sage import SageFormatError
from so101_virtual.faults import FaultControlServer
from so101_virtual.lag import write_status_file
from so101_virtual.profiles import ProfileError, available_profiles
from so101_virtual.robot import ROLES, VirtualSO101, write_calibration_files

__all__ = ["add_arguments", "run", "main"]

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--link", metavar="PATH", help="also make a symlink PATH pointing at the pty (e.g. /tmp/so101_follower)")
    parser.add_argument("--profile", default="default", metavar="NAME|FILE",
                        help=f"gap profile: one of {', '.join(available_profiles())} or a YAML file (default: default)")
    parser.add_argument("--role", choices=ROLES, default="follower",
                        help="follower (torque off until the host enables it) or leader (moved by a virtual hand)")
    parser.add_argument("--motion", metavar="FILE", help="leader: SAGE motion file to follow (default: a built-in motion)")
    parser.add_argument("--faults-socket", metavar="PATH", help="serve run-time fault commands (JSON lines) on this UNIX socket")
    parser.add_argument("--factory-fresh", action="store_true",
                        help="servos as shipped (no Homing_Offset, limits 0..4095), to try 'so101 calibrate'")
    parser.add_argument("--mechanics-seed", type=int, default=None, metavar="N",
                        help="draw the encoder mounting from this seed (default: the role's shipped arm)")
    parser.add_argument("--time-scale", type=float, default=1.0, metavar="X", help="simulated seconds per wall second")
    parser.add_argument("--status-file", metavar="PATH",
                        help="keep a JSON file here with how far the physics ran behind wall time (updated twice a "
                             "second; so101 demo reads it per recording)")
    parser.add_argument("--write-calibration", metavar="DIR",
                        help="write virtual_follower.json / virtual_leader.json for the default arms into DIR and exit")


def run(args: argparse.Namespace) -> int:
    if args.write_calibration:
        for path in write_calibration_files(args.write_calibration):
            print(path, flush=True)
        return 0
    if args.motion and args.role != "leader":
        print("so101 virtual-bus: error: --motion is for --role leader", file=sys.stderr)
        return 2
    if not args.time_scale > 0:
        print("so101 virtual-bus: error: --time-scale must be > 0", file=sys.stderr)
        return 2
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    robot = None
    control = None
    try:
        robot = VirtualSO101(args.profile, args.role, calibrated=not args.factory_fresh,
                             mechanics_seed="role" if args.mechanics_seed is None else args.mechanics_seed,
                             motion=args.motion, time_scale=args.time_scale)
        device = robot.open_pty(args.link)
        if args.faults_socket:
            control = FaultControlServer(robot.faults, args.faults_socket)
        robot.start()
        print(f"device {device} link {args.link or device}", flush=True)
        log.info("virtual SO-101 %s, profile %s%s", args.role, robot.profile.name,
                 f", faults on {args.faults_socket}" if args.faults_socket else "")
        while not stop.wait(0.5):
            if args.status_file:
                write_status_file(args.status_file, robot.lag.snapshot(), robot.overruns)
            if robot.error is not None:
                print(f"so101 virtual-bus: error: {robot.error}", file=sys.stderr)
                return 1
        return 0
    except (ProfileError, SageFormatError, FileExistsError, OSError, ValueError) as err:
        print(f"so101 virtual-bus: error: {err}", file=sys.stderr)
        return 1
    finally:
        if control is not None:
            control.close()
        if robot is not None:
            robot.close()
            lag = robot.lag.snapshot()
            if args.status_file:
                write_status_file(args.status_file, lag, robot.overruns)
            if robot.overruns:
                log.warning("the physics could not keep up with wall time %d time(s)", robot.overruns)
            if lag.total_s > 0:
                log.info("the physics ran 10 ms or more behind wall time for %.0f %% of %.0f s (20 ms or more: %.0f %%)",
                         100 * lag.fraction_behind(10.0), lag.total_s, 100 * lag.fraction_behind(20.0))
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``virtual_bus`` console script (same options as ``so101 virtual-bus``)."""
    parser = argparse.ArgumentParser(prog="virtual_bus", description=__doc__.split("\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
