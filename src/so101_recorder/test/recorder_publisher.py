"""Test helper: publish JointStates whose positions count messages (``python -m recorder_publisher``).

Positions of message k are ``k + j/10`` for joint j, so a reader can check that no message is lost.
"""

from __future__ import annotations

import argparse
import sys

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from sensor_msgs.msg import JointState

from so101_common.joints import JOINT_NAMES


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topics", nargs="+", default=["/joint_states"])
    parser.add_argument("--rate", type=float, default=100.0)
    args = parser.parse_args()
    rclpy.init()
    node = Node("test_joint_state_publisher")
    publishers = [node.create_publisher(JointState, topic, 100) for topic in args.topics]
    count = [0]

    def publish() -> None:
        msg = JointState()
        msg.header.stamp = node.get_clock().now().to_msg()
        msg.name = list(JOINT_NAMES)
        msg.position = [count[0] + j / 10 for j in range(len(JOINT_NAMES))]
        msg.velocity = [0.5] * len(JOINT_NAMES)
        for publisher in publishers:
            publisher.publish(msg)
        count[0] += 1

    node.create_timer(1.0 / args.rate, publish)
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
