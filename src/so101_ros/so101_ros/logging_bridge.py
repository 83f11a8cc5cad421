"""A node's Python loggers (its core's, its bus's) forwarded to the node's ROS logger."""

from __future__ import annotations

import logging

from rclpy.node import Node

__all__ = ["node_python_logger"]


class _RosLogHandler(logging.Handler):
    """Forwards Python log records to a node's ROS logger."""

    def __init__(self, node: Node) -> None:
        super().__init__(logging.DEBUG)
        self._logger = node.get_logger()

    def emit(self, record: logging.LogRecord) -> None:  # one call site per severity: rclpy requires it
        text, level = self.format(record), record.levelno
        if level >= logging.ERROR:
            self._logger.error(text)
        elif level >= logging.WARNING:
            self._logger.warning(text)
        elif level >= logging.INFO:
            self._logger.info(text)
        else:
            self._logger.debug(text)


def node_python_logger(node: Node, package: str) -> tuple[logging.Logger, logging.Handler]:
    """The Python logger ``<package>.node.<node name>`` for ``node``'s core: its records go to the node's ROS
    logger only.

    It does not propagate to the root logger (an application's ``logging.basicConfig``, e.g. ``so101
    demo``, would otherwise print the bus's DEBUG lines), and its level follows the ROS logger's
    (``--ros-args --log-level debug`` shows them).
    """
    pylog = logging.getLogger(f"{package}.node.{node.get_name()}")
    pylog.propagate = False
    pylog.setLevel(int(node.get_logger().get_effective_level()) or logging.INFO)
    handler = _RosLogHandler(node)
    pylog.addHandler(handler)
    return pylog, handler
