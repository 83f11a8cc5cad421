"""``so101 record``: record episodes from the command line, or recover the bag of a killed recorder.

    so101 record --topics /joint_states /leader/joint_states --out bags/ --episodes 5 --duration 20 --task pick
    so101 record --episodes 3 --task wave            # Enter starts and stops each episode
    so101 record --recover bags/20250101T120000Z_pick_003

Runs the recorder node in this process (rclpy), records N episodes back to back: each lasts
``--duration`` seconds (or until Enter), and the next starts after ``--pause`` seconds (or Enter
when ``--pause`` is not given and ``--duration`` is not either: full teleop hand control).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time

from so101_common.cli_args import non_negative_float, positive_float, positive_int
from so101_recorder.errors import RecorderError
from so101_recorder.parameters import DEFAULT_TOPICS

__all__ = ["add_arguments", "run"]

LOG = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--recover", nargs="+", metavar="BAG", help="rebuild these truncated bags and exit")
    parser.add_argument("--delete-damaged", action="store_true",
                        help="with --recover: delete the damaged original instead of keeping it as *.mcap.truncated")
    parser.add_argument("--topics", nargs="+", default=None, metavar="TOPIC",
                        help=f"topics to record (default: {' '.join(DEFAULT_TOPICS)})")
    parser.add_argument("--out", default="bags", help="directory that receives the episode bags (default: bags/)")
    parser.add_argument("--episodes", type=positive_int, default=1, help="number of episodes to record back to back")
    parser.add_argument("--duration", type=positive_float, default=None, metavar="S",
                        help="seconds per episode (default: until Enter)")
    parser.add_argument("--pause", type=non_negative_float, default=None, metavar="S",
                        help="seconds between episodes (default: 0 with --duration, else wait for Enter)")
    parser.add_argument("--task", default="episode", help="task / motion name stored with each episode")
    parser.add_argument("--notes", default="", help="operator notes stored with each episode")
    parser.add_argument("--robot-id", default="so101", help="robot id stored with each episode")
    parser.add_argument("--calibration-file", default="", help="calibration JSON in use (hashed into the metadata)")
    parser.add_argument("--gap-profile", default="", help="virtual robot gap profile (name or file), if virtual")
    parser.add_argument("--wait-topics", type=non_negative_float, default=5.0, metavar="S",
                        help="wait this long for the topics to appear before the first episode")


def run(args: argparse.Namespace) -> int:
    if args.recover:
        return _recover(args.recover, keep_damaged=not args.delete_damaged)
    if args.duration is None and not sys.stdin.isatty():
        print("so101 record: error: without --duration, episodes are stopped with Enter, which needs a terminal", file=sys.stderr)
        return 2
    return _record(args)


def _recover(bags: list[str], keep_damaged: bool) -> int:
    from so101_recorder.recovery import recover_bag

    failed = 0
    for bag in bags:
        try:
            print(recover_bag(bag, keep_damaged=keep_damaged).summary())
        except RecorderError as err:
            print(f"so101 record: error: {err}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def _record(args: argparse.Namespace) -> int:
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from rclpy.signals import SignalHandlerOptions

    from so101_recorder.recorder_node import RecorderNode

    overrides = [
        Parameter("topics", value=list(args.topics or DEFAULT_TOPICS)), Parameter("bag_root", value=str(args.out)),
        Parameter("task", value=args.task), Parameter("notes", value=args.notes), Parameter("robot_id", value=args.robot_id),
        Parameter("calibration_file", value=args.calibration_file), Parameter("gap_profile", value=args.gap_profile),
    ]
    # Ctrl-C / SIGTERM raise KeyboardInterrupt in this (main) thread, so the episode is closed below;
    # rclpy's own handlers would only stop the spin thread and leave the main thread waiting.
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    previous_sigterm = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    node: RecorderNode | None = None
    executor: SingleThreadedExecutor | None = None
    thread: threading.Thread | None = None

    def spin() -> None:
        assert executor is not None
        try:
            executor.spin()
        except ExternalShutdownException:
            pass

    try:
        node = RecorderNode("so101_record", parameter_overrides=overrides)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        thread = threading.Thread(target=spin, daemon=True)
        thread.start()
        _wait_for_topics(node, args.wait_topics)
        return _episodes(node, args)
    except RecorderError as err:
        print(f"so101 record: error: {err}", file=sys.stderr)
        return 1
    finally:
        if executor is not None:
            executor.shutdown()  # stops spinning (the spin thread returns)
        if thread is not None:
            thread.join(timeout=5)
        if node is not None:
            node.destroy_node()  # closes a running episode
        rclpy.try_shutdown()
        signal.signal(signal.SIGTERM, previous_sigterm)


def _raise_keyboard_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _wait_for_topics(node, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and node.topics.missing():
        time.sleep(0.05)
        node.discover()
    missing = node.topics.missing()
    if missing:
        print(f"so101 record: not (yet) published: {' '.join(missing)}; they are recorded if they appear", file=sys.stderr)


def _episodes(node, args: argparse.Namespace) -> int:
    for index in range(args.episodes):
        if index or args.duration is None:
            if args.pause is not None or args.duration is not None:
                time.sleep(args.pause or 0.0)
            else:
                input(f"Enter starts episode {index + 1}/{args.episodes} ")
        try:
            path = node.start_episode()
        except RecorderError as err:
            print(f"so101 record: error: {err}", file=sys.stderr)
            return 1
        print(f"episode {index + 1}/{args.episodes}: recording {path}", flush=True)
        if args.duration is not None:
            time.sleep(args.duration)
        else:
            input("Enter stops the episode ")
        try:
            bag = node.stop_episode()
        except RecorderError as err:
            print(f"so101 record: error: {err}", file=sys.stderr)
            return 1
        status = node.recorder.status()
        counts = ", ".join(f"{topic} {n}" for topic, n in sorted(status.topics.items())) or "no messages"
        print(f"episode {index + 1}/{args.episodes}: {bag} ({counts})", flush=True)
    return 0
