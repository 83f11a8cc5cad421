"""ROS 2 node of the SO-101 follower: ``joint_states`` + ``/diagnostics`` out, ``joint_command`` in.

    ros2 run so101_driver driver --ros-args -p port:=/dev/ttyACM0 -p robot_id:=my_arm

A plain node (not a lifecycle node): it opens the port and reads the arm in its constructor (a
calibration problem ends the process with a clear message and exit code 1; a port that is not there
yet is waited for, with ERROR on ``/diagnostics`` and a log line, and reopened the same way when it is
lost) and releases the port when it is destroyed (Ctrl-C / SIGTERM). Logic lives in :class:`DriverCore`; parameters: README.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.duration import Duration
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from so101_common import topics
from so101_common.rejections import LogThrottle
from so101_driver.bus import FeetechBus
from so101_driver.driver_core import DriverConfig, DriverCore, JointSample
from so101_driver.errors import CommandRejected, DriverError
from so101_driver.parameters import ArmParameters, FollowerParameters
from so101_feetech.calibration import CalibrationError, load_calibration, resolve_calibration_path
from so101_ros.diagnostics import diagnostic_array, diagnostic_status
from so101_ros.logging_bridge import node_python_logger
from so101_ros.node_params import declare_parameters
from so101_ros.node_runner import run_node

__all__ = ["ArmNode", "DriverNode", "main", "run_node"]


class ArmNode(Node):
    """Reads one SO-101 through :class:`DriverCore` and publishes its joint states and diagnostics."""

    role = "follower"
    state_topic = topics.JOINT_STATES
    parameters: type[ArmParameters] = FollowerParameters
    parameter_defaults: Mapping[str, object] = {}  # where this node's defaults differ from the dataclass's

    def __init__(self, name: str, write_goals: bool, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        # the core's and the bus's messages go to this node's ROS logger (one Python logger per node)
        self._pylog, self._log_handler = node_python_logger(self, "so101_driver")
        self.params = p = declare_parameters(self, self.parameters, **self.parameter_defaults)
        # rates are range-checked where declared; the joint names by ArmParameters
        path = resolve_calibration_path(p.calibration_file, p.robot_id, self.role, p.port)
        calibration = load_calibration(path)
        self.get_logger().info(f"calibration {path}; bus {p.port} at {p.baudrate} baud")
        bus = FeetechBus(p.port, p.baudrate, timeout_ms=p.timeout_ms, retries=p.retries, log=self._pylog,
                         reply_gap_ms=p.reply_gap_ms)
        config = replace(self._core_config(write_goals), rate_hz=float(p.rate_hz), **p.health_thresholds())
        self.core = DriverCore(bus, calibration, list(p.joint_names), config, log=self._pylog)
        self.state_pub = self.create_publisher(JointState, self.state_topic, 10)
        self.diag_pub = self.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, 10)
        try:
            self.start_core()
        except BaseException:
            self.core.stop()  # a failed start still releases the port
            raise
        self._started = True
        self.create_timer(1.0 / p.rate_hz, self._tick)
        self.create_timer(1.0 / p.diagnostics_rate_hz, self._publish_diagnostics)

    def _core_config(self, write_goals: bool) -> DriverConfig:
        return DriverConfig(write_goals=write_goals)

    def start_core(self) -> None:
        self.core.start()

    def _tick(self) -> None:
        result = self.core.cycle()
        if result.sample is not None:
            self.state_pub.publish(self._joint_state(result.sample))
        if result.faults_changed:  # a servo fault began or ended: report it now, not at the next period
            self._publish_diagnostics()

    def _joint_state(self, sample: JointSample) -> JointState:
        msg = JointState()
        # stamped when the servos sampled it (the ROS convention for a sensor reading), not when it arrived
        msg.header.stamp = (self.get_clock().now() - Duration(seconds=self.core.sample_age(sample))).to_msg()
        msg.name = list(sample.names)
        msg.position = sample.position.tolist()
        msg.velocity = sample.velocity.tolist()
        msg.effort = sample.effort.tolist()
        return msg

    def _publish_diagnostics(self) -> None:
        self.diag_pub.publish(diagnostic_array(self, *(
            diagnostic_status(e.level, e.name, e.message, e.hardware_id, e.values)
            for e in self.core.diagnostics(self.get_name()))))

    def close(self) -> None:
        """Release the port and stop forwarding logs (idempotent)."""
        if getattr(self, "_started", False):
            self._started = False
            self.core.stop()
        self._pylog.removeHandler(self._log_handler)

    def destroy_node(self) -> None:
        self.close()  # composed graphs destroy nodes without calling close(): release the port here too
        super().destroy_node()


class DriverNode(ArmNode):
    """The follower: also takes ``joint_command`` and offers ``~/enable_torque`` / ``~/disable_torque``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("so101_driver", write_goals=True, **kwargs)
        assert isinstance(self.params, FollowerParameters)
        self._rejection_log = LogThrottle(self.params.log_throttle)
        self.create_subscription(JointState, topics.JOINT_COMMAND, self._on_command, 10)
        self.create_service(Trigger, "~/enable_torque", lambda req, res: self._torque(True, res))
        self.create_service(Trigger, "~/disable_torque", lambda req, res: self._torque(False, res))

    def _core_config(self, write_goals: bool) -> DriverConfig:
        p = self.params
        assert isinstance(p, FollowerParameters)
        self._torque_on_start = p.torque_on_start
        return DriverConfig(write_goals=write_goals, configure_servos=p.configure_servos, write_on_command=p.write_on_command,
                            max_relative_target=p.max_relative_target)

    def start_core(self) -> None:
        self.core.start(torque_on=self._torque_on_start)
        if self.core.bus_error:
            self.get_logger().error(f"waiting for {self.core.bus.port}: {self.core.bus_error}")
        else:
            self.get_logger().info(f"driver running, torque {'on' if self.core.torque_enabled else 'off'}")

    def _on_command(self, msg: JointState) -> None:
        try:
            result = self.core.command(list(msg.name), list(msg.position))
        except CommandRejected as err:  # counted per reason on /diagnostics; the log is throttled
            held = self._rejection_log.admit()
            if held is not None:
                self.get_logger().warning(f"joint_command rejected ({err.reason.value}): {err}"
                                          f"{LogThrottle.suffix(held)}")
            return
        if result.clamped:
            self.get_logger().warning(f"joint_command clamped to the calibrated range: {list(result.clamped)}",
                                      throttle_duration_sec=1.0)

    def _torque(self, enabled: bool, response: Trigger.Response) -> Trigger.Response:
        state = "on" if enabled else "off"
        try:
            self.core.set_torque(enabled)
            response.success, response.message = True, f"torque {state}"
            self.get_logger().info(response.message)
        except DriverError as err:
            response.success, response.message = False, f"torque {state} failed: {err}"
            self.get_logger().error(response.message)
        return response



def main(args: Sequence[str] | None = None) -> int:
    return run_node(DriverNode, args, "so101_driver", fatal=(DriverError, CalibrationError))


if __name__ == "__main__":
    sys.exit(main())
