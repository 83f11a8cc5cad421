"""A core's status as ``diagnostic_msgs``: the one conversion every node shell publishes through."""

from __future__ import annotations

from collections.abc import Mapping

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node

__all__ = ["diagnostic_status", "diagnostic_array", "status_entries"]


def diagnostic_status(level: int, name: str, message: str, hardware_id: str,
                      values: Mapping[str, object]) -> DiagnosticStatus:
    """One status (``level``: a :class:`so101_common.diagnostics.Level` or the same number; values as strings)."""
    return DiagnosticStatus(level=bytes([int(level)]), name=name, message=message, hardware_id=hardware_id,
                            values=[KeyValue(key=str(k), value=str(v)) for k, v in values.items()])


def diagnostic_array(node: Node, *statuses: DiagnosticStatus) -> DiagnosticArray:
    """``statuses`` stamped with ``node``'s clock, ready for ``/diagnostics``."""
    array = DiagnosticArray(status=list(statuses))
    array.header.stamp = node.get_clock().now().to_msg()
    return array


def status_entries(array: DiagnosticArray) -> list[tuple[dict[str, str], str]]:
    """Each status of a received array as (its key/values, its message): what the ROS-free readers take
    (``so101_common.servo_faults.read_servo_faults``)."""
    return [({kv.key: kv.value for kv in status.values}, status.message) for status in array.status]
