"""ROS 2 shell of the GapONet compensator: policy command (and action chunk) in, command + Δ out.

Topics (relative, remappable): ``policy/joint_command`` (in), ``policy/action_chunk`` (in, optional:
``trajectory_msgs/JointTrajectory``, the policy's upcoming commands), ``joint_states`` (measured
history), ``joint_command`` (with a model: the safety filter's output, the goals the arm got: where the filter holds
a goal back the output stays within the commands ahead, and the guard judges Δ by them), ``gaponet/joint_command`` (out), ``/diagnostics``. Services ``~/enable`` (std_srvs/SetBool) and
``~/new_episode`` (std_srvs/Trigger: an episode starts from the pose the arm holds, :meth:`Compensator.new_episode`).
Parameters: :class:`so101_gaponet.parameters.CompensatorParameters`.

Rate contract (:class:`so101_gaponet.step_clock.StepClock`): a model was trained on history rows one
control period apart, so the compensator steps at the model's rate whatever the policy's rate. A policy
at the model's rate is stepped on each command as it arrives (it waits for nothing, also when its
messages come late or unevenly). Otherwise a command that comes less than three quarters of a period
after the previous step waits for the timer, one period after that step (a faster policy: its latest
command once a period). The timer steps on its own, holding the latest command, only for a policy slower
than the model (a 30 Hz policy into a 50 Hz model: each command is used on the steps until the next one
arrives). Without a model the node forwards each command as it arrives. No command
for ``command_timeout`` s: nothing is published (the safety filter's watchdog holds the arm).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import JointTrajectory

from so101_common import topics
from so101_common.joints import JointSpecError, reorder
from so101_gaponet.chunks import ActionChunk
from so101_gaponet.compensator import Compensator, CompensatorConfig, CompensatorError, GuardSettings
from so101_gaponet.metadata import ModelFileError
from so101_gaponet.model_file import load_model
from so101_gaponet.parameters import CHUNK_TOPIC, CompensatorParameters
from so101_gaponet.step_clock import StepClock
from so101_ros.diagnostics import diagnostic_array, diagnostic_status
from so101_ros.node_params import declare_parameters
from so101_ros.node_runner import run_node
from so101_ros.stamps import seconds, stamp_or

__all__ = ["CompensatorNode", "NODE_NAME", "main"]

NODE_NAME = "gaponet_compensator"  # the deploy graph names it so too (so101_bringup.graphs)


class CompensatorNode(Node):
    def __init__(self, **node_kwargs: Any) -> None:
        """``node_kwargs`` go to ``rclpy.node.Node`` (context, cli_args, parameter_overrides for in-process composition)."""
        super().__init__(NODE_NAME, **node_kwargs)
        p = declare_parameters(self, CompensatorParameters)
        joints = tuple(p.joints)
        model = load_model(p.model_path, joints=joints, rate_hz=p.rate_hz or None) if p.model_path else None
        self.core = Compensator(CompensatorConfig(
            joints=joints, enabled=p.enabled, delta_bounds=tuple(p.delta_bounds) or None,
            delta_slew_limit=tuple(p.delta_slew_limit) or None,
            delta_smoothing_s=p.delta_smoothing_s if p.delta_smoothing_s >= 0 else None,
            feedback_gain=tuple(p.feedback_gain) or None, max_delta=tuple(p.max_delta),
            max_delta_rate=tuple(p.max_delta_rate), guard=GuardSettings() if p.guard else None), model)
        self.joints = joints
        self.command_timeout = p.command_timeout
        self.period = 1.0 / model.metadata.rate_hz if model is not None else 0.0
        self._command: np.ndarray | None = None
        self._command_stamp: Any = None
        self._chunk: ActionChunk | None = None
        self._step_clock = StepClock(self.period, self.command_timeout)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._out = self.create_publisher(JointState, topics.COMPENSATED_COMMAND, QoSProfile(depth=10))
        self._diag = self.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, QoSProfile(depth=10))
        self.create_subscription(JointState, topics.POLICY_COMMAND, self._on_command, QoSProfile(depth=10))
        self.create_subscription(JointTrajectory, CHUNK_TOPIC, self._on_chunk, QoSProfile(depth=10))
        self.create_subscription(JointState, topics.JOINT_STATES, self._on_state, qos_profile_sensor_data)
        if model is not None:
            self.create_subscription(JointState, topics.JOINT_COMMAND, self._on_goal, QoSProfile(depth=10))
        self.create_service(SetBool, "~/enable", self._on_enable)
        self.create_service(Trigger, "~/new_episode", self._on_new_episode)
        self._step_timer = self.create_timer(self.period, self._on_tick) if model is not None else None
        self.create_timer(p.diagnostics_period, self._publish_diagnostics)
        rate = f" at {model.metadata.rate_hz:g} Hz, {model.metadata.future_steps} command rows" if model else ""
        self.get_logger().info(f"compensator: {self.core.status()['mode']}{rate}" + (f", model {p.model_path}" if model else ""))
        if model is not None and model.probe is not None and not model.probe.within_bounds:
            self.get_logger().warning(f"{p.model_path}: {model.probe.describe()}; clipped to them")

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_state(self, msg: JointState) -> None:
        try:
            position = reorder(msg.name, msg.position, self.joints)
            velocity = reorder(msg.name, msg.velocity, self.joints) if len(msg.velocity) == len(msg.name) else None
            effort = reorder(msg.name, msg.effort, self.joints) if len(msg.effort) == len(msg.name) else None
            # stamped when the servos sampled it (the driver): the core places its history rows by it; no stamp, or one
            # ahead of this node's clock (another machine's), is now
            now = self._now()
            self.core.update_measured(position, velocity, min(stamp_or(msg.header.stamp, now), now), effort)
        except (JointSpecError, CompensatorError) as err:
            self.get_logger().warning(f"ignored joint state: {err}", throttle_duration_sec=5.0)

    def _on_goal(self, msg: JointState) -> None:
        try:
            self.core.goal_reached(reorder(msg.name, msg.position, self.joints))
        except (JointSpecError, CompensatorError) as err:
            self.get_logger().warning(f"ignored goal on {topics.JOINT_COMMAND}: {err}", throttle_duration_sec=5.0)

    def _on_chunk(self, msg: JointTrajectory) -> None:
        try:
            self._chunk = ActionChunk.from_points(
                stamp_or(msg.header.stamp, self._now()), [seconds(p.time_from_start) for p in msg.points], msg.joint_names,
                [list(p.positions) for p in msg.points], self.joints)
        except ValueError as err:
            self.get_logger().warning(f"ignored action chunk: {err}", throttle_duration_sec=5.0)

    def _on_command(self, msg: JointState) -> None:
        try:
            command = np.asarray(reorder(msg.name, msg.position, self.joints))
            if not np.isfinite(command).all():
                raise CompensatorError("command contains NaN or inf")
        except (JointSpecError, CompensatorError) as err:
            self.get_logger().warning(f"ignored command: {err}", throttle_duration_sec=5.0)
            return
        now = self._now()
        self._command = command
        self._command_stamp = msg.header
        if self._step_timer is None:
            self._step(now)
        elif self._step_clock.on_command(now):
            self._step(now)
            self._step_timer.reset()  # the next tick one period from this step

    def _on_tick(self) -> None:
        now = self._now()
        if self._step_clock.on_tick(now):
            self._step(now)

    def _on_new_episode(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self.core.new_episode()
        response.success, response.message = True, "a new episode starts at the next step"
        return response

    def _step(self, now: float) -> None:
        assert self._command is not None
        self._step_clock.stepped(now)
        rows = self.core.future_steps - 1
        upcoming = self._chunk.upcoming(now, self.period, rows) if self._chunk is not None and rows > 0 else None
        try:
            result = self.core.compensate(self._command, now, upcoming)
        except CompensatorError as err:
            self.get_logger().warning(f"compensation step skipped: {err}", throttle_duration_sec=5.0)
            return
        out = JointState()
        out.header.stamp = self.get_clock().now().to_msg()
        out.header.frame_id = self._command_stamp.frame_id
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
            elif param.name != "diagnostics_period":
                return SetParametersResult(successful=False, reason=f"{param.name} is read at start-up only")
        return SetParametersResult(successful=True)

    def _publish_diagnostics(self) -> None:
        info = self.core.status()
        level, message = self.core.health(info)
        info["action_chunk"] = "none" if self._chunk is None else f"{len(self._chunk.time)} points"
        self._diag.publish(diagnostic_array(self, diagnostic_status(
            level, f"{self.get_name()}: GapONet compensator", message, "so101", info)))


def main(args: list[str] | None = None) -> int:
    return run_node(CompensatorNode, args, NODE_NAME, fatal=(ModelFileError, CompensatorError))


if __name__ == "__main__":
    sys.exit(main())
