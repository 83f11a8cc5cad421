"""``so101``: one command line for the workspace.

Subcommands live in their own packages; this table names them explicitly (no import-time
registries) and imports a subcommand's module only when it is chosen, so ``so101 --help`` stays fast.
Each module provides ``add_arguments(parser)`` and ``run(args) -> int``.

Whatever goes wrong in a subcommand ends as one line on stderr, ``so101 <command>: error: ...``, and
exit status 1 (a child process's failure as the child's own message); ``-v`` adds the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

__all__ = ["SUBCOMMANDS", "main", "build_parser", "command_parser"]

_TRACEBACK_HINT = "(so101 -v for the traceback)"


@dataclass(frozen=True)
class Subcommand:
    name: str
    module: str  # provides add_arguments(parser) and run(args) -> int
    summary: str


SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand("demo", "so101_apps.demo", "run the main job on the embedded default robot (virtual SO-101 + MuJoCo)"),
    Subcommand("run-motion", "so101_apps.run_motion",
               "play motion files through the deploy chain on the virtual or real arm and record them (bag or SAGE)"),
    Subcommand("preflight", "so101_apps.preflight_cli",
               "the deployment checklist on the virtual or real arm: servos, supply, bus, calibration vs the URDF, "
               "safety limits, e-stop and watchdog"),
    Subcommand("monitor", "so101_apps.monitor",
               "watch a running arm live: the gap twin and, with --web, the arm, its command and twin in a browser"),
    Subcommand("virtual-bus", "so101_virtual.cli", "serve a virtual SO-101 (STS3215 protocol) on a pseudo-terminal"),
    Subcommand("scan", "so101_driver.scan_cli", "find Feetech servos on a port (ids, models, baud rates)"),
    Subcommand("calibrate", "so101_driver.calibrate_cli", "run LeRobot's calibration procedure and write its JSON"),
    Subcommand("record", "so101_recorder.record_cli", "record episodes of chosen topics into rosbag2 (MCAP) bags"),
    Subcommand("export-lerobot", "so101_recorder.export_cli", "export recorded bags as a LeRobotDataset v3.0"),
    Subcommand("replay", "so101_sim2real.cli.replay", "replay a bag or motion in simulation (MuJoCo or Isaac Sim bridge)"),
    Subcommand("pair", "so101_sim2real.cli.pair", "align real and sim runs into a paired dataset"),
    Subcommand("fit-profile", "so101_apps.fit_profile",
               "fit a gap profile (the virtual SO-101's physics) to recordings of a real arm"),
    Subcommand("analyze", "so101_sim2real.cli.analyze", "gap metrics and an HTML/PNG report for a paired dataset"),
    Subcommand("twin-band", "so101_sim2real.cli.twin_band",
               "record the band of each joint's rolling gap on this arm (the live twin's band_file)"),
    Subcommand("train-gaponet", "so101_fleet.train_cli",
               "train a GapONet compensator on paired datasets and export it (--ray-address/--workers: on Ray)"),
    Subcommand("train-compensator", "so101_apps.train_compensator",
               "train the GapONet compensator for a virtual arm on excitation motions, judged on held-out motions"),
    Subcommand("train-sim-delta", "so101_sim2real.sim_delta.cli",
               "train a sim-delta model (MuJoCo + Δ reproduces the real arm) on SAGE real runs and export it"),
    Subcommand("fleet", "so101_fleet.cli", "fleet pipeline on Ray: simulate | index | process | report"),
    Subcommand("bench", "so101_apps.bench", "run the control-path benchmarks (JSON lines)"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="so101",
        description="SO-101 sim-to-real workspace: drive the arm (real or virtual), record, replay in "
        "simulation, measure the sim-to-real gap and train the GapONet compensator.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run 'so101 <command> --help' for a command's options.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for command in SUBCOMMANDS:
        sub.add_parser(command.name, help=command.summary, description=command.summary, add_help=False)
    return parser


def command_parser(command: Subcommand) -> tuple[ModuleType, argparse.ArgumentParser]:
    """The subcommand's module (imported now) and its argument parser."""
    module = importlib.import_module(command.module)
    parser = argparse.ArgumentParser(prog=f"so101 {command.name}", description=command.summary)
    module.add_arguments(parser)
    return module, parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    top, rest = parser.parse_known_args(argv)
    if top.command is None:
        parser.print_help()
        return 2
    command = next(c for c in SUBCOMMANDS if c.name == top.command)
    module, sub_parser = command_parser(command)
    args = sub_parser.parse_args(rest)
    logging.basicConfig(level=logging.DEBUG if top.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(module.run(args))
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # the user gets one line, not a traceback (-v shows it)
        if top.verbose:
            traceback.print_exc()
        message = " ".join(str(err).split()) or type(err).__name__
        hint = "" if top.verbose or message.endswith(_TRACEBACK_HINT) else f" {_TRACEBACK_HINT}"  # a child's has it
        print(f"so101 {command.name}: error: {message}{hint}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
