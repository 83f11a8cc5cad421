"""``so101 run-motion``: play motion files through the deploy chain on the virtual or the physical SO-101
and record what the arm did (SAGE's data-collection step, on ROS 2).

    so101 run-motion --motion config/motions/multisine.txt --out runs/multisine            # virtual, default profile
    so101 run-motion --robot real --port /dev/ttyACM0 --motion m1.txt m2.txt --format sage --out output
    so101 run-motion --profile worn --compensator models/gaponet_so101_default.onnx --motion m.txt --out runs/c

Each motion is played by the motion player (its future published as the action chunk) → GapONet
compensator (``--compensator``; none by default) → safety filter → driver, and recorded as a bag
(``OUT/bags/<time>_<motion>_NNN/``); with ``--format sage`` every bag is also written as a SAGE real run
folder ``OUT/real/<robot>/<source>/<motion>/`` (what the driver commanded and what the arm measured: the
input of ``so101 fit-profile --sage-real`` and ``so101 replay --sage-real``). A servo fault stops the
motion, keeps the recordings (the bag's metadata carries the fault span; a SAGE run ends where the fault
began), prints the joint and the fault and exits 1 (``so101_apps.session``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from so101_apps import ros_environment
from so101_apps.motion_runs import MotionSpec, RecordedMotion, ServoFaultStop
from so101_apps.session import run_session
from so101_bringup.node_specs import GraphOptions
from so101_common import topics
from so101_common.cli_args import non_negative_float, positive_float

__all__ = ["add_arguments", "run"]

STATE_TOPIC = topics.absolute(topics.JOINT_STATES)  # what the arm measured
DRIVER_COMMAND_TOPIC = topics.absolute(topics.JOINT_COMMAND)  # what the driver commanded (after the compensator and safety filter)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    ros_environment.add_arguments(parser)
    parser.add_argument("--robot", choices=("virtual", "real"), default="virtual",
                        help="virtual: the embedded virtual SO-101 (default); real: the arm on --port")
    parser.add_argument("--profile", default="default", help="gap profile of the virtual arm (name or YAML file)")
    parser.add_argument("--port", default="", help="the real arm's serial port (--robot real)")
    parser.add_argument("--robot-id", default=None,
                        help="the real arm's LeRobot id: its calibration is LeRobot's file for it (default: the "
                             "driver's robot_id)")
    parser.add_argument("--calibration-file", default="",
                        help="the real arm's LeRobot calibration JSON (default: the driver's robot_id file)")
    parser.add_argument("--motion", nargs="+", required=True, metavar="FILE",
                        help="SAGE motion files (or built-in motion names), played one after the other")
    parser.add_argument("--duration", type=non_negative_float, default=0.0, help="seconds of a built-in motion (0 = its default)")
    parser.add_argument("--compensator", type=Path, default=None,
                        help="GapONet compensator model (ONNX) in the chain; default none (ONNX, or TorchScript: "
                             "that is code, torch.jit.load runs it; use only files you trust)")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--format", choices=("bag", "sage"), default="bag",
                        help="bag: rosbag2 (MCAP) episodes only; sage: also SAGE real run folders")
    parser.add_argument("--sage-robot", default="so101", help="robot folder of the SAGE layout")
    parser.add_argument("--sage-source", default="custom", help="motion-source folder of the SAGE layout")
    parser.add_argument("--print-period", type=positive_float, default=1.0, help="seconds between live joint-state lines")


def _options(args: argparse.Namespace) -> GraphOptions:
    virtual = args.robot == "virtual"
    if not virtual and not args.port:
        raise ValueError("--robot real needs --port (the arm's serial device)")
    # servos configured as LeRobot configures a follower on connect (P 16, D 32, Acceleration 254): the settings
    # SAGE's and LeRobot's recordings were made with
    return GraphOptions(port="" if virtual else args.port, robot_id=None if virtual else args.robot_id,
                        calibration_file="" if virtual else args.calibration_file,
                        configure_servos=True, compensation=args.compensator is not None,
                        gaponet_model=str(args.compensator) if args.compensator is not None else None,
                        autostart_motion=False, hold_start_pose=True, record=True, bag_root=str(args.out / "bags"),
                        task="run-motion", gap_profile=args.profile if virtual else "")


def _motions(args: argparse.Namespace) -> list[MotionSpec]:
    motions = [MotionSpec(Path(source).stem, source, args.duration) for source in args.motion]
    if len({m.name for m in motions}) != len(motions):
        raise ValueError(f"motions need distinct names (file stems): {[m.name for m in motions]}")
    return motions


def write_sage(recorded: dict[str, RecordedMotion], root: Path) -> list[Path]:
    """Every recording as a SAGE real run folder ``root/<motion>/``; a faulted one ends (DISABLE) where the
    fault began: SAGE's layout has no place for a fault, and what follows it is not the arm's behaviour."""
    from so101_recorder.bag_reader import Bag, read_topic_pair
    from so101_sim2real.replay.core import write_sage_real_run

    folders = []
    for name, run in recorded.items():
        state, command = read_topic_pair(Bag(run.bag), STATE_TOPIC, DRIVER_COMMAND_TOPIC)
        if command is None:
            raise ValueError(f"{run.bag} has no {DRIVER_COMMAND_TOPIC}")
        stop = min([run.stop, *(run.start + span.start for span in run.faults)])
        folders.append(write_sage_real_run(root / name, command, state, run.start, stop))
    return folders


def run(args: argparse.Namespace) -> int:
    opts = _options(args)
    ros_environment.join(args)
    motions = _motions(args)
    sage_root = args.out / "real" / args.sage_robot / args.sage_source
    label = f"run-motion ({'compensated' if opts.compensation else 'uncompensated'})"
    try:
        recorded = run_session(label, opts, motions, args.print_period, virtual=args.robot == "virtual")
    except ServoFaultStop as stop:
        if args.format == "sage":
            write_sage(stop.recorded, sage_root)  # what was recorded up to the fault, as SAGE runs too
        raise
    if args.format == "sage":
        for folder in write_sage(recorded, sage_root):
            print(f"   SAGE real run: {folder}")
    print(f"\ndone: {len(recorded)} motion(s) recorded under {args.out}")
    return 0
