"""ROS 2 shell of the live web view (:mod:`so101_apps.web_view`): open the printed URL in any browser.

Topics (relative, remappable): ``joint_states`` (the measured arm), ``joint_command`` (the command ghost:
what the driver is told; remap it to show another stage), ``twin/joint_states`` (the twin ghost),
``twin/gap``, ``twin/gap_rmse``, ``/diagnostics`` (servo telemetry, faults, warnings). Parameters:
:class:`so101_apps.web_view.WebViewConfig`.
"""

from __future__ import annotations

import sys
from functools import partial
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState

from so101_apps.web_view import Status, WebView, WebViewConfig
from so101_common import topics
from so101_ros.node_params import declare_parameters
from so101_ros.node_runner import run_node
from so101_ros.stamps import stamp_or

__all__ = ["WebViewNode", "main"]


class WebViewNode(Node):
    def __init__(self, **node_kwargs: Any) -> None:
        """``node_kwargs`` go to ``rclpy.node.Node`` (context, cli_args, parameter_overrides for in-process composition)."""
        super().__init__("web_view", **node_kwargs)
        self.view = WebView(declare_parameters(self, WebViewConfig))
        self.url = self.view.serve()
        depth = QoSProfile(depth=50)
        for topic, kind in ((topics.JOINT_STATES, "measured"), (topics.JOINT_COMMAND, "command"),
                            (topics.TWIN_STATES, "twin")):
            self.create_subscription(JointState, topic, partial(self._on_arm, kind), depth)
        self.create_subscription(JointState, topics.TWIN_GAP, partial(self._on_gap, "position"), depth)
        self.create_subscription(JointState, topics.TWIN_GAP_RMSE, partial(self._on_gap, "rmse"), depth)
        self.create_subscription(DiagnosticArray, topics.DIAGNOSTICS, self._on_diagnostics, depth)
        # the view judges the measured joint states' silence; this only asks it often enough to say so in time
        self.create_timer(min(1.0, self.view.config.quiet_s / 3), self.view.check_sources)
        self.get_logger().info(f"web view: open {self.url}")

    def _stamp(self, msg: Any) -> float:
        return stamp_or(msg.header.stamp, self.get_clock().now().nanoseconds * 1e-9)

    def _on_arm(self, kind: str, msg: JointState) -> None:
        self.view.on_joint_states(kind, self._stamp(msg), list(msg.name), list(msg.position))

    def _on_gap(self, quantity: str, msg: JointState) -> None:
        self.view.on_gap(quantity, self._stamp(msg), list(msg.name), list(msg.position))

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        self.view.on_diagnostics(self._stamp(msg), [
            Status(s.name, int.from_bytes(s.level, "little") if isinstance(s.level, bytes) else int(s.level), s.message,
                   {kv.key: kv.value for kv in s.values}) for s in msg.status])

    def destroy_node(self) -> None:
        self.view.close()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    return run_node(WebViewNode, args, "web_view", fatal=(OSError,))


if __name__ == "__main__":
    sys.exit(main())
