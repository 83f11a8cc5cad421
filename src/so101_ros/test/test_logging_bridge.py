"""A node's Python log records (the driver's core and bus) go to its ROS logger, never to the root logger.

An application that configures Python logging (``so101 demo`` through the CLI's ``basicConfig``)
must not print the bus's DEBUG lines; ``--log-level debug`` on the node shows them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import rclpy
from rclpy.context import Context
from rclpy.logging import LoggingSeverity
from rclpy.node import Node

from so101_ros.logging_bridge import node_python_logger


@pytest.fixture
def node() -> Iterator[Node]:
    context = Context()
    rclpy.init(context=context)
    node = Node("driver_logging_probe", context=context)
    yield node
    node.destroy_node()
    rclpy.shutdown(context=context)


def test_records_do_not_reach_the_root_logger(node: Node, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # the root logger takes everything, as basicConfig(level=DEBUG) would
    pylog, handler = node_python_logger(node, "so101_driver")
    try:
        pylog.debug("opened /dev/pts/0 at 1000000 baud")
        pylog.warning("servo 3 faulted")
    finally:
        pylog.removeHandler(handler)
    assert [r for r in caplog.records if r.name.startswith("so101_driver")] == []


def test_level_follows_the_ros_logger(node: Node) -> None:
    pylog, handler = node_python_logger(node, "so101_driver")
    pylog.removeHandler(handler)
    assert not pylog.isEnabledFor(logging.DEBUG)  # ROS default: INFO
    node.get_logger().set_level(LoggingSeverity.DEBUG)
    pylog, handler = node_python_logger(node, "so101_driver")
    pylog.removeHandler(handler)
    assert pylog.isEnabledFor(logging.DEBUG)
