"""``safety_filter`` node: the ROS shell around :class:`so101_safety.core.SafetyFilter`.

Subscribes ``input`` (JointState command, remapped to ``gaponet/joint_command`` in the deploy graph),
``joint_states`` (positions; the gripper's effort in N·m gives its load) and ``~/estop_trigger``
(std_msgs/Bool: true latches the e-stop, false does nothing). Publishes ``output`` (JointState, all
joints, positions only, remapped to ``joint_command``) once for every accepted command as it arrives
(at most ``max_rate_hz``: faster commands are coalesced, the latest wins), and on a ``rate_hz`` timer while the output has something to do on its own (watchdog hold, e-stop,
travelling to its target: :meth:`SafetyFilter.tick_due`); its state goes to ``/diagnostics``. Services ``~/estop`` and ``~/reset`` (std_srvs/Trigger). Parameters: see
``config/safety.yaml`` and the package README; they are read at start-up (changes at run time are
refused). Every input is stamped with this node's clock at arrival (``use_sim_time`` honoured).
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence

from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.time import Time
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from so101_common import topics
from so101_common.rejections import LogThrottle
from so101_ros.diagnostics import diagnostic_array, diagnostic_status
from so101_ros.node_params import declare_parameter_values
from so101_ros.node_runner import run_node
from so101_safety.config import node_parameter_specs, split_parameters
from so101_safety.core import SafeCommand, SafetyFilter, Verdict
from so101_safety.diagnostics import status_report
from so101_safety.errors import SafetyConfigError

__all__ = ["SafetyNode", "main"]

# Commands and joint states: best effort accepts reliable and best-effort publishers alike.
_STREAM_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)


class SafetyNode(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("safety_filter", **kwargs)
        self.config, self.options = split_parameters(self._declare_parameters())
        self.filter = SafetyFilter(self.config)
        self._t0_ns = self.get_clock().now().nanoseconds
        self._reported_rejections = 0
        self._rejection_log = LogThrottle(self.options.log_throttle)
        self.add_on_set_parameters_callback(self._on_set_parameters)

        self.pub = self.create_publisher(JointState, "output", 10)
        self._out = JointState(name=list(self.filter.names))
        self.diag_pub = self.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, 10)
        self.create_subscription(JointState, "input", self._on_command, _STREAM_QOS)
        self.create_subscription(JointState, topics.JOINT_STATES, self._on_joint_states, _STREAM_QOS)
        self.create_subscription(Bool, "~/estop_trigger", self._on_estop_trigger, 10)
        self.create_service(Trigger, "~/estop", self._on_estop)
        self.create_service(Trigger, "~/reset", self._on_reset)
        self._period = 1.0 / self.config.rate_hz
        self.create_timer(self._period, self._on_tick)
        self.create_timer(self.options.diagnostics_period, self._publish_diagnostics)
        limits = ", ".join(f"{lim.name} [{lim.lower:.3f}, {lim.upper:.3f}] rad ≤{lim.max_velocity:g} rad/s "
                           f"≤{lim.max_acceleration:g} rad/s²" for lim in self.config.limits)
        self.get_logger().info(f"safety filter at {self.config.rate_hz:g} Hz, watchdog "
                               f"{self.config.watchdog_timeout:g} s; {limits}")

    def _declare_parameters(self) -> dict[str, object]:
        """Every field of the config models, with its description and range; the models validate."""
        return declare_parameter_values(self, node_parameter_specs())

    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        refused = [p.name for p in params if p.name != "use_sim_time"]
        if refused:
            return SetParametersResult(successful=False, reason=f"{refused}: safety parameters are read at start-up; "
                                       "restart the node to change them")
        return SetParametersResult(successful=True)

    def _now(self) -> tuple[Time, float]:
        """This node's clock now, and as seconds since start (relative: float precision stays sub-microsecond)."""
        now = self.get_clock().now()
        return now, (now.nanoseconds - self._t0_ns) * 1e-9

    # ---------------------------------------------------------------- inputs
    def _on_command(self, msg: JointState) -> None:
        stamp, now = self._now()
        verdict = self.filter.on_command(msg.name, msg.position, now)
        self._log_rejection("command", verdict)
        if verdict.accepted and self.filter.forward_due(now):
            self._publish(self.filter.step(now), stamp)  # forwarded at arrival: no wait for the next tick
        # (a command faster than max_rate_hz waits for the next tick, replaced by any later one)

    def _on_joint_states(self, msg: JointState) -> None:
        self._log_rejection(topics.JOINT_STATES, self.filter.on_measured(msg.name, msg.position, msg.velocity,
                                                                    msg.effort, self._now()[1]))

    def _on_estop_trigger(self, msg: Bool) -> None:
        if msg.data:
            self._estop("~/estop_trigger")

    def _log_rejection(self, what: str, verdict: Verdict) -> None:
        if not verdict.accepted and (held := self._rejection_log.admit()) is not None:
            reason = verdict.reason.value if verdict.reason else "?"
            self.get_logger().warning(f"rejected {what} ({reason}): {verdict.detail}{LogThrottle.suffix(held)}")

    # ---------------------------------------------------------------- e-stop
    def _estop(self, source: str) -> str:
        was = self.filter.estopped
        self.filter.estop(f"requested via {source}")
        if not was:
            self.get_logger().error(f"E-STOP latched via {source}: output held until ~/reset")
        return "e-stop latched" if not was else f"e-stop already latched ({self.filter.stats.estops} so far)"

    def _on_estop(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = True, self._estop("~/estop")
        return response

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        released = self.filter.reset()
        response.success = True
        response.message = ("e-stop released: holding the measured position until a new command" if released
                            else "no e-stop latched: nothing changed")
        self.get_logger().info(response.message)
        return response

    # ---------------------------------------------------------------- output
    def _on_tick(self) -> None:
        stamp, now = self._now()
        if self.filter.tick_due(now, self._period):
            self._publish(self.filter.step(now), stamp)

    def _publish(self, command: SafeCommand | None, stamp: Time) -> None:
        """Publish ``command`` stamped with the time it was computed for. One message is reused (publish
        serializes it before returning): the names never change, the positions go in as a float array,
        the message type's fast path; nothing is allocated per command but the positions."""
        if command is None:
            return
        self._out.header.stamp = stamp.to_msg()
        self._out.position = array("d", command.positions)
        self.pub.publish(self._out)

    def _publish_diagnostics(self) -> None:
        stats = self.filter.stats
        new_rejections = stats.rejected_total - self._reported_rejections
        self._reported_rejections = stats.rejected_total
        report = status_report(self.filter.last, stats, new_rejections, self.filter.estop_reason)
        self.diag_pub.publish(diagnostic_array(self, diagnostic_status(
            report.level, f"{self.get_name()}: filter", report.message, "so101_safety", report.values)))


def main(args: Sequence[str] | None = None) -> int:
    return run_node(SafetyNode, args, "safety_filter", fatal=(SafetyConfigError,))



if __name__ == "__main__":
    sys.exit(main())
