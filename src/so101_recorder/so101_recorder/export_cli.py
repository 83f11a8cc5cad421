"""``so101 export-lerobot``: recorded bags → a local LeRobotDataset v3.0.

    so101 export-lerobot --bags bags/*_pick_* --repo-id local/so101_teleop --root datasets/so101_teleop --fps 30
"""

from __future__ import annotations

import argparse
import sys

from so101_common import topics
from so101_recorder.errors import RecorderError

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bags", nargs="+", required=True, metavar="BAG", help="episode bags, one LeRobot episode each")
    parser.add_argument("--repo-id", default="local/so101_teleop", help="dataset repo id (stored locally only)")
    parser.add_argument("--root", required=True, help="dataset directory to create (must not exist)")
    parser.add_argument("--fps", type=int, default=30, help="frame rate (default 30)")
    parser.add_argument("--task", default=None, help="task text for every frame (default: each episode's task)")
    parser.add_argument("--state-topic", default=topics.absolute(topics.JOINT_STATES), help="measured joint positions")
    parser.add_argument("--action-topics", nargs="+", default=[topics.absolute(topics.JOINT_COMMAND), topics.absolute(topics.LEADER_STATES)],
                        help="command stream: the first topic present in a bag is used")
    parser.add_argument("--camera", action="append", default=[], metavar="NAME=TOPIC",
                        help="add an image feature observation.images.NAME from an Image/CompressedImage topic")
    parser.add_argument("--time-source", choices=("header", "receive"), default="header",
                        help="sample times: message header stamps (default) or bag receive times")


def run(args: argparse.Namespace) -> int:
    from so101_recorder.lerobot_export import ExportConfig, export_lerobot

    try:
        cameras = dict(_camera(spec) for spec in args.camera)
        config = ExportConfig(repo_id=args.repo_id, root=args.root, fps=args.fps, task=args.task,
                              state_topic=args.state_topic, action_topics=tuple(args.action_topics),
                              cameras=cameras, time_source=args.time_source)
        report = export_lerobot(args.bags, config)
    except RecorderError as err:
        print(f"so101 export-lerobot: error: {err}", file=sys.stderr)
        return 1
    for line in report.per_bag:
        print(line)
    print(f"wrote {report.episodes} episodes, {report.frames} frames to {report.root}")
    return 0


def _camera(spec: str) -> tuple[str, str]:
    name, sep, topic = spec.partition("=")
    if not sep or not name or not topic:
        raise RecorderError(f"--camera expects NAME=TOPIC, got {spec!r}")
    return name, topic
