"""The subscriptions that feed a recording session's :class:`~so101_apps.arm_watch.ArmWatch` (its rclpy side)."""

from __future__ import annotations

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from sensor_msgs.msg import JointState

from so101_apps.arm_watch import ArmWatch
from so101_common import topics
from so101_ros.diagnostics import status_entries
from so101_ros.stamps import stamp_or

__all__ = ["DeployMonitor"]


class DeployMonitor:
    """The subscriptions feeding an :class:`~so101_apps.arm_watch.ArmWatch` (``watch``) on ``node``'s clock:
    ``joint_states``, ``policy/joint_command`` (relative: in the graph's namespace), the servo faults on
    ``/diagnostics`` and, with ``twin``, the live gap twin's state."""

    def __init__(self, node: Node, twin: bool = False) -> None:
        self._clock = node.get_clock()
        self.watch = ArmWatch(self.now())
        node.create_subscription(JointState, topics.JOINT_STATES, self._on_state, 10)
        if twin:  # the live gap twin: an episode starts once it runs, so the bag is paired from its first sample
            node.create_subscription(JointState, topics.TWIN_STATES, lambda _msg: self.watch.on_twin(self.now()), 10)
        node.create_subscription(JointState, topics.POLICY_COMMAND, self._on_command, 10)
        node.create_subscription(DiagnosticArray, topics.DIAGNOSTICS, self._on_diagnostics, 50)

    def now(self) -> float:
        return self._clock.now().nanoseconds * 1e-9

    def _on_state(self, msg: JointState) -> None:
        self.watch.on_state(msg.name, msg.position, self.now(), stamp_or(msg.header.stamp, None))

    def _on_command(self, msg: JointState) -> None:
        self.watch.on_command(msg.name, msg.position)

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        self.watch.on_diagnostics(status_entries(msg), self.now())
