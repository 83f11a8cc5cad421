"""Which ROS 2 environment a flow's nodes join: the one it is started in, or a private one (``--isolated``).

``so101 demo``, ``run-motion`` and ``bench`` start nodes. By default they join the user's ROS environment
(``ROS_DOMAIN_ID``, ``ROS_AUTOMATIC_DISCOVERY_RANGE``, ``RMW_IMPLEMENTATION`` as exported), so RViz,
``ros2 topic echo`` or a recorder in another shell on that domain see them, and a robot's run is visible from
the laptop beside it. ``--isolated`` gives a private domain on loopback, as the tests use: nothing else hears it.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

from so101_ros.ros_env import apply_private_ros_env

__all__ = ["add_arguments", "join", "describe"]

_DEFAULT_DOMAIN = "0"  # rcl's default when ROS_DOMAIN_ID is unset
_DEFAULT_RANGE = "SUBNET"  # Jazzy's default discovery range
_DEFAULT_RMW = "rmw_fastrtps_cpp"  # Jazzy's default middleware


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--isolated", action="store_true",
                        help="run the nodes on a private DDS domain on loopback (nothing else hears them) instead of "
                             "the ROS environment this command is started in")


def describe(env: Mapping[str, str]) -> str:
    """One line: the domain, discovery range and middleware that nodes started with ``env`` use."""
    domain = env.get("ROS_DOMAIN_ID") or _DEFAULT_DOMAIN
    discovery = env.get("ROS_AUTOMATIC_DISCOVERY_RANGE") or _DEFAULT_RANGE
    rmw = env.get("RMW_IMPLEMENTATION") or _DEFAULT_RMW
    return f"ROS 2 domain {domain} (discovery {discovery}, {rmw})"


def join(args: argparse.Namespace) -> str:
    """Apply ``--isolated`` (before any node starts) and print which environment the nodes join; returns the line."""
    if args.isolated:
        apply_private_ros_env()
        line = f"{describe(os.environ)}: private (--isolated), not visible from other shells"
    else:
        line = (f"{describe(os.environ)}: the environment this command was started in "
                f"(watch it from another shell on the same domain: ros2 topic echo /joint_states)")
    print(line, flush=True)
    return line
