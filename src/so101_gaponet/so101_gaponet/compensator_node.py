"""ROS 2 shell of the GapONet compensator: policy command in, command + Δ out, diagnostics.

Topics (remappable): ``/policy/joint_command`` (in), ``/joint_states`` (measured history),
``/gaponet/joint_command`` (out), ``/diagnostics``. Service ``~/enable`` (std_srvs/SetBool).
Parameters: ``model_path`` ('' = passthrough), ``enabled``, ``rate_hz`` (must equal the model's),
``joints`` (must equal the model's), ``delta_bounds`` (rad per joint; unset = the model's),
``delta_slew_limit`` (rad/step per joint; unset = the model's), ``delta_smoothing_s`` (s; unset = the
model's), ``diagnostics_period`` (s).
"""

from __future__ import annotations

import sys
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import SetParametersResult
from rclpy.exceptions import ParameterUninitializedException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool

from so101_common.joints import JOINT_NAMES, JointSpecError, reorder
from so101_gaponet.compensator import Compensator, CompensatorConfig, CompensatorError
from so101_gaponet.metadata import ModelFileError
from so101_gaponet.model_file import load_model
from so101_ros.node_runner import run_node

__all__ = ["CompensatorNode", "main"]


class CompensatorNode(Node):
    def __init__(self, **node_kwargs: Any) -> None:
        """``node_kwargs`` go to ``rclpy.node.Node`` (context, cli_args, parameter_overrides for in-process composition)."""
        super().__init__("gaponet_compensator", **node_kwargs)
        self.declare_parameter("model_path", "")
        self.declare_parameter("enabled", True)
        self.declare_parameter("rate_hz", 50.0)
        self.declare_parameter("joints", list(JOINT_NAMES))
        self.declare_parameter("delta_bounds", Parameter.Type.DOUBLE_ARRAY)
        self.declare_parameter("delta_slew_limit", Parameter.Type.DOUBLE_ARRAY)
        self.declare_parameter("delta_smoothing_s", Parameter.Type.DOUBLE)
        self.declare_parameter("diagnostics_period", 1.0)
        joints = tuple(self.get_parameter("joints").value)
        model_path = str(self.get_parameter("model_path").value)
        bounds, slew, smoothing = (self._optional(n) for n in ("delta_bounds", "delta_slew_limit", "delta_smoothing_s"))
        model = load_model(model_path, joints=joints, rate_hz=float(self.get_parameter("rate_hz").value)) if model_path else None
        self.core = Compensator(CompensatorConfig(
            joints=joints, enabled=bool(self.get_parameter("enabled").value), delta_bounds=tuple(bounds) if bounds else None,
            delta_slew_limit=tuple(slew) if slew else None,
            delta_smoothing_s=float(smoothing) if smoothing is not None else None), model)
        self.joints = joints
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._out = self.create_publisher(JointState, "gaponet/joint_command", QoSProfile(depth=10))
        self._diag = self.create_publisher(DiagnosticArray, "/diagnostics", QoSProfile(depth=10))
        self.create_subscription(JointState, "policy/joint_command", self._on_command, QoSProfile(depth=10))
        self.create_subscription(JointState, "joint_states", self._on_state, qos_profile_sensor_data)
        self.create_service(SetBool, "~/enable", self._on_enable)
        self.create_timer(float(self.get_parameter("diagnostics_period").value), self._publish_diagnostics)
        self.get_logger().info(f"compensator: {self.core.status()['mode']}" + (f", model {model_path}" if model else ""))

    def _optional(self, name: str) -> Any:
        """A parameter's value, or None when it was not given (the model's own setting applies)."""
        try:
            return self.get_parameter(name).value
        except ParameterUninitializedException:
            return None

    def _stamp(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_state(self, msg: JointState) -> None:
        try:
            position = reorder(msg.name, msg.position, self.joints)
            velocity = reorder(msg.name, msg.velocity, self.joints) if len(msg.velocity) == len(msg.name) else None
            self.core.update_measured(position, velocity, self._stamp())
        except (JointSpecError, CompensatorError) as err:
            self.get_logger().warning(f"ignored joint state: {err}", throttle_duration_sec=5.0)

    def _on_command(self, msg: JointState) -> None:
        try:
            command = reorder(msg.name, msg.position, self.joints)
            result = self.core.compensate(command, self._stamp())
        except (JointSpecError, CompensatorError) as err:
            self.get_logger().warning(f"ignored command: {err}", throttle_duration_sec=5.0)
            return
        out = JointState()
        out.header.stamp = msg.header.stamp if msg.header.stamp.sec or msg.header.stamp.nanosec else self.get_clock().now().to_msg()
        out.header.frame_id = msg.header.frame_id
        out.name = list(self.joints)
        out.position = result.command.tolist()
        self._out.publish(out)

    def _on_enable(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        self.core.enabled = bool(request.data)
        response.success = True
        response.message = self.core.status()["mode"]
        self.get_logger().info(f"compensation {'enabled' if request.data else 'disabled'} ({response.message})")
        return response

    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        for param in params:
            if param.name == "enabled":
                self.core.enabled = bool(param.value)
            elif param.name in ("model_path", "rate_hz", "joints", "delta_bounds", "delta_slew_limit", "delta_smoothing_s"):
                return SetParametersResult(successful=False, reason=f"{param.name} is read at start-up only")
        return SetParametersResult(successful=True)

    def _publish_diagnostics(self) -> None:
        info = self.core.status()
        status = DiagnosticStatus(name=f"{self.get_name()}: GapONet compensator", hardware_id="so101")
        status.level = DiagnosticStatus.WARN if info["faults"] else DiagnosticStatus.OK
        status.message = info["mode"] + ("" if info["warm"] or self.core.model is None else " (warming up)")
        status.values = [KeyValue(key=str(k), value=str(v)) for k, v in info.items()]
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.get_clock().now().to_msg()
        self._diag.publish(array)


def main(args: list[str] | None = None) -> int:
    return run_node(CompensatorNode, args, "gaponet_compensator", fatal=(ModelFileError, CompensatorError))



if __name__ == "__main__":
    sys.exit(main())
