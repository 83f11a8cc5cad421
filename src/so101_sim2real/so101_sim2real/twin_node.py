"""ROS 2 shell of the live gap twin (:mod:`so101_sim2real.twin`): MuJoCo on the policy's commands, beside the arm.

Topics (relative, remappable): ``policy/joint_command`` (in: the command stream the sim replays, as the
offline gap does; remap it to replay another stage), ``joint_states`` (in: the measured arm),
``policy/action_chunk`` (in, with a sim-delta model that reads upcoming commands), ``twin/joint_states``,
``twin/gap``, ``twin/gap_rmse`` (out, ``sensor_msgs/JointState`` stamped with the measured state each is
paired with; see :mod:`so101_common.topics`), ``/diagnostics``. Service ``~/restart`` (std_srvs/Trigger):
start again from the measured pose. Parameters: :class:`so101_sim2real.twin_parameters.TwinParameters`.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time as TimeMsg
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from so101_common import topics
from so101_common.diagnostics import Level
from so101_common.joints import JOINT_NAMES, JointSpecError, reorder
from so101_common.schema import SchemaError
from so101_gaponet.chunks import ActionChunk
from so101_gaponet.metadata import ModelFileError
from so101_ros.diagnostics import diagnostic_array, diagnostic_status
from so101_ros.node_params import declare_parameters
from so101_ros.node_runner import run_node
from so101_ros.stamps import seconds, stamp_or
from so101_sim2real.replay.mujoco_backend import MujocoSim, MujocoSimConfig
from so101_sim2real.sim_delta.filter import LiveSimDeltaFilter
from so101_sim2real.twin import GapSample, GapTwin, TwinConfig, TwinError
from so101_sim2real.twin_band import Excursion, TwinBand, load_band
from so101_sim2real.twin_parameters import TwinParameters

__all__ = ["TwinNode", "main", "QUEUE_DEPTH"]

QUEUE_DEPTH = 1000  # messages per input topic: 10 s of joint states at 100 Hz, 20 s of commands at 50 Hz


class TwinNode(Node):
    def __init__(self, **node_kwargs: Any) -> None:
        """``node_kwargs`` go to ``rclpy.node.Node`` (context, cli_args, parameter_overrides for in-process composition)."""
        super().__init__("twin", **node_kwargs)
        p = declare_parameters(self, TwinParameters)
        self.params = p
        self.band: TwinBand | None = load_band(p.band_file) if p.band_file else None
        if self.band is not None and abs(self.band.window_s - p.window_s) > 1e-9:
            raise TwinError(f"band file {p.band_file} was recorded with a {self.band.window_s:g} s window: set "
                            f"window_s to {self.band.window_s:g} (it is {p.window_s:g})")
        delta = None
        config = MujocoSimConfig()
        if p.sim_delta_model:
            from so101_gaponet.model_file import load_model

            model = load_model(p.sim_delta_model, joints=JOINT_NAMES, role="sim_delta")
            delta = LiveSimDeltaFilter(model.delta, model.metadata, JOINT_NAMES, model.reset_state)
            config = MujocoSimConfig(control_rate_hz=model.metadata.rate_hz)
        self.delta = delta
        self.twin = GapTwin(MujocoSim(config), TwinConfig(p.window_s, p.restart_after_s, p.hold_after_s, p.history_s), delta)
        self._out_of_band: list[Excursion] = []
        self._states = self.create_publisher(JointState, topics.TWIN_STATES, QoSProfile(depth=10))
        self._gap = self.create_publisher(JointState, topics.TWIN_GAP, QoSProfile(depth=10))
        self._rmse = self.create_publisher(JointState, topics.TWIN_GAP_RMSE, QoSProfile(depth=10))
        self._diag = self.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, QoSProfile(depth=10))
        # deep queues: a monitor may run at a low priority on a busy machine; it catches up on every message
        # (it reads stamps, not its clock), while a dropped command would make its sim wrong
        self.create_subscription(JointState, topics.POLICY_COMMAND, self._on_command, QoSProfile(depth=QUEUE_DEPTH))
        self.create_subscription(JointState, topics.JOINT_STATES, self._on_state, QoSProfile(depth=QUEUE_DEPTH))
        if delta is not None and delta.future_rows:
            self.create_subscription(JointTrajectory, topics.POLICY_ACTION_CHUNK, self._on_chunk, QoSProfile(depth=10))
        self.create_service(Trigger, "~/restart", self._on_restart)
        self.create_timer(p.diagnostics_period, self._publish_diagnostics)
        sim = f"MuJoCo + Δ ({p.sim_delta_model})" if delta is not None else "nominal MuJoCo"
        self.get_logger().info(f"gap twin: {sim}, {p.window_s:g} s rolling window, "
                               + (f"band {p.band_file}" if self.band is not None else "no band file"))

    def _stamp(self, stamp: TimeMsg) -> float:
        """A message's header stamp (s), or now where the sender left it zero."""
        return stamp_or(stamp, self.get_clock().now().nanoseconds * 1e-9)

    def _on_command(self, msg: JointState) -> None:
        try:
            command = np.asarray(reorder(msg.name, msg.position, JOINT_NAMES), dtype=np.float64)
            if not np.isfinite(command).all():
                raise TwinError("command contains NaN or inf")
        except (JointSpecError, TwinError) as err:
            self.get_logger().warning(f"ignored command: {err}", throttle_duration_sec=5.0)
            return
        self._publish(self.twin.on_command(self._stamp(msg.header.stamp), command))

    def _on_state(self, msg: JointState) -> None:
        try:
            position = np.asarray(reorder(msg.name, msg.position, JOINT_NAMES), dtype=np.float64)
            velocity = (np.asarray(reorder(msg.name, msg.velocity, JOINT_NAMES), dtype=np.float64)
                        if len(msg.velocity) == len(msg.name) else None)
        except JointSpecError as err:
            self.get_logger().warning(f"ignored joint state: {err}", throttle_duration_sec=5.0)
            return
        self._publish(self.twin.on_measured(self._stamp(msg.header.stamp), position, velocity))

    def _on_chunk(self, msg: JointTrajectory) -> None:
        assert self.delta is not None
        try:
            self.delta.chunk = ActionChunk.from_points(
                self._stamp(msg.header.stamp), [seconds(p.time_from_start) for p in msg.points], msg.joint_names,
                [list(p.positions) for p in msg.points], JOINT_NAMES)
        except ValueError as err:
            self.get_logger().warning(f"ignored action chunk: {err}", throttle_duration_sec=5.0)

    def _on_restart(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self.twin.restart()
        response.success = True
        response.message = "the twin starts again from the measured pose at the next command"
        return response

    def _publish(self, samples: list[GapSample]) -> None:
        for sample in samples:
            stamp = TimeMsg(sec=int(sample.stamp // 1), nanosec=min(round((sample.stamp % 1) * 1e9), 999_999_999))
            for publisher, position, velocity, effort in (
                    (self._states, sample.sim_position, sample.sim_velocity, sample.sim_effort),
                    (self._gap, sample.position_gap, sample.velocity_gap, None),
                    (self._rmse, sample.position_rmse, sample.velocity_rmse, None)):
                msg = JointState(name=list(JOINT_NAMES), position=position.tolist(), velocity=velocity.tolist(),
                                 effort=[] if effort is None else effort.tolist())
                msg.header.stamp = stamp
                publisher.publish(msg)
        last = samples[-1] if samples else None
        if self.band is not None and last is not None:
            found = self.band.check(last.position_rmse, last.velocity_rmse) if last.warm else []
            changed = {(e.joint, e.quantity) for e in found} != {(e.joint, e.quantity) for e in self._out_of_band}
            self._out_of_band = found
            if changed:  # a joint leaving (or re-entering) its band is news now, not at the next period
                self._publish_diagnostics()

    def _publish_diagnostics(self) -> None:
        twin, last = self.twin, self.twin.last
        values = {"state": "running" if twin.started else "waiting for joint_states and commands",
                  "sim": self.params.sim_delta_model or "nominal MuJoCo", "band_file": self.params.band_file or "none",
                  "window_s": f"{self.params.window_s:g}", "starts": str(twin.starts),
                  "late_commands": str(twin.replay.late), "unpaired_states": str(twin.unpaired),
                  "out_of_band": ",".join(sorted({e.joint for e in self._out_of_band}))}
        if last is not None:
            for index, name in enumerate(JOINT_NAMES):
                values[f"{name}.position_rmse"] = f"{last.position_rmse[index]:.5f}"
                values[f"{name}.velocity_rmse"] = f"{last.velocity_rmse[index]:.4f}"
        if self._out_of_band:
            level, message = Level.WARN, "; ".join(e.describe() for e in self._out_of_band)
        else:
            level, message = Level.OK, values["state"] if last is None else (
                "within the band" if self.band is not None and last.warm else "running")
        self._diag.publish(diagnostic_array(self, diagnostic_status(
            level, f"{self.get_name()}: gap twin", message, "so101", values)))


def main(args: list[str] | None = None) -> int:
    return run_node(TwinNode, args, "twin", fatal=(TwinError, SchemaError, ModelFileError, OSError))


if __name__ == "__main__":
    sys.exit(main())
