"""``policy`` node: a learned policy driving ``policy/joint_command`` at a fixed rate.

Subscribes ``joint_states`` (sensor_msgs/JointState, rad; any joint order) and, only for the cameras
the policy needs, the ``sensor_msgs/Image`` topics named in ``image_topics``; publishes
``policy/joint_command`` (JointState, rad, stamped, names = the joint spec) from a timer at
``rate_hz``, and its state on ``/diagnostics``. A policy that produces chunks (LeRobot ACT/diffusion, an
ONNX/TorchScript output with a time axis: more than one action per inference) also publishes, with every
fresh action, the actions it will play next as ``policy/action_chunk`` (trajectory_msgs/JointTrajectory:
stamp = the time of the first point, which is the action published with it; joint_names = the joint
spec; positions in rad, ``time_from_start`` = i / ``rate_hz``); a single-step policy has no such topic. Inference runs in a worker thread
(:class:`so101_policy.runner.AsyncPolicyRunner`); the timer only pops the action queue.

Parameters
----------
policy_path (str)            LeRobot ``pretrained_model`` dir, ONNX file or TorchScript file (TorchScript is code:
                             ``torch.jit.load`` runs it; load only files you trust, prefer ONNX)
policy_kind (str)            auto | lerobot | torchscript | onnx
rate_hz (float)              control/publish rate (0: the policy's own rate from its metadata, else 30)
device (str)                 torch device for LeRobot/TorchScript (cpu, cuda, cuda:0)
image_topics (str[])         ``observation.images.<cam>=<topic>`` (or ``<cam>=<topic>``) pairs
task (str)                   task string for language-conditioned policies
autostart (bool)             start running (true) or stopped, waiting for ``~/start`` (false)
on_miss (str)                hold | none: what a tick does when inference is late and the queue is empty
n_action_steps (int)         actions used per chunk (0: the policy's ``n_action_steps``)
refill_threshold (int)       request inference when the queue holds this many or fewer (-1: auto)
align_chunks (bool)          skip the actions whose time passed while the model ran
max_observation_age_s (float) no new inference on a joint state older than this (0: no check)
warmup (bool)                run one inference on a neutral observation at load time
inference_delay_s (float)    extra delay after each inference (tests/demos: simulates a slow model)
diagnostics_period_s (float) period of ``/diagnostics`` messages
trust_remote_code (bool)     let a LeRobot folder's processors name classes outside LeRobot (runs their code)
allow_network (bool)         let loading reach the Hugging Face hub (default: forced offline)
aggregate_fn_name (str)      a new chunk's action on a tick the queue covers: weighted_average, latest_only, ...

A LeRobot policy server instead of ``policy_path`` (names as in LeRobot's ``RobotClient``):
server_address (str)         host:port of ``python -m lerobot.async_inference.policy_server``
policy_type (str)            the LeRobot policy type the server loads (act, smolvla, pi0, ...)
pretrained_name_or_path (str) the checkpoint the server loads (a path on the server machine, or a Hub id)
policy_device (str)          the server's torch device
actions_per_chunk (int)      actions per chunk the server returns
chunk_size_threshold (float) send the next observation when the queue holds this fraction of a chunk or less
server_timeout_s, server_load_timeout_s (float) how long a chunk / the policy's loading may take

Services: ``~/start``, ``~/stop`` (std_srvs/Trigger).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from functools import partial

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from so101_common import topics
from so101_common.joints import JOINT_NAMES, JointSpecError, reorder
from so101_policy.deployment import deploy_policy
from so101_policy.diagnostics import NodeCounters
from so101_policy.images import image_msg_to_array
from so101_policy.parameters import PolicyParameters
from so101_policy.spec import PolicyError
from so101_ros.diagnostics import diagnostic_array, diagnostic_status
from so101_ros.node_params import declare_parameters
from so101_ros.node_runner import run_node

__all__ = ["PolicyNode", "main"]

class PolicyNode(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("policy", **kwargs)
        p = declare_parameters(self, PolicyParameters)
        deployment = deploy_policy(p)
        for warning in deployment.warnings:
            self.get_logger().warning(warning)
        self.runner, self.rate_hz, self.image_topics = deployment.runner, deployment.rate_hz, deployment.image_topics
        self.diagnostics = deployment.diagnostics
        self.policy_source = deployment.source

        self.pub = self.create_publisher(JointState, topics.POLICY_COMMAND, 10)
        self.chunk_pub = (self.create_publisher(JointTrajectory, topics.POLICY_ACTION_CHUNK, 10)
                          if self.runner.serves_chunks else None)
        self.diag_pub = self.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, 10)
        self.create_subscription(JointState, topics.JOINT_STATES, self._on_joint_state, 10)
        for key, topic in self.image_topics.items():
            self.create_subscription(Image, topic, partial(self._on_image, key), qos_profile_sensor_data)
        self.create_service(Trigger, "~/start", self._on_start)
        self.create_service(Trigger, "~/stop", self._on_stop)
        self.timer = self.create_timer(1.0 / self.rate_hz, self._on_tick)
        self.diag_timer = self.create_timer(p.diagnostics_period_s, self._publish_diagnostics)
        self.published = 0
        self.bad_joint_states = 0
        self.bad_images = 0
        self._images_seen: set[str] = set()
        if p.autostart:
            self.runner.start()
        self.get_logger().info(deployment.summary(p.autostart))

    # ---------------------------------------------------------------- inputs
    def _on_joint_state(self, msg: JointState) -> None:
        try:
            self.runner.set_positions(reorder(msg.name, msg.position))
        except (JointSpecError, ValueError) as err:
            self.bad_joint_states += 1
            self.get_logger().warning(f"ignoring /joint_states: {err}", throttle_duration_sec=5.0)

    def _on_image(self, key: str, msg: Image) -> None:
        try:
            self.runner.set_image(key, image_msg_to_array(msg))
            self._images_seen.add(key)
        except ValueError as err:
            self.bad_images += 1
            self.get_logger().warning(f"ignoring image for {key}: {err}", throttle_duration_sec=5.0)

    # ---------------------------------------------------------------- control
    def _on_tick(self) -> None:
        result = self.runner.tick()
        if result.action is None:
            return
        stamp = self.get_clock().now().to_msg()
        msg = JointState()
        msg.header.stamp = stamp
        msg.name = list(JOINT_NAMES)
        msg.position = result.action.tolist()
        self.pub.publish(msg)
        self.published += 1
        if self.chunk_pub is not None and result.chunk is not None:
            chunk = JointTrajectory(joint_names=list(JOINT_NAMES))
            chunk.header.stamp = stamp
            chunk.points = [JointTrajectoryPoint(positions=positions.tolist(),
                                                 time_from_start=Duration(seconds=i / self.rate_hz).to_msg())
                            for i, positions in enumerate(result.chunk)]
            self.chunk_pub.publish(chunk)

    def _on_start(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        was_running = self.runner.running
        self.runner.start()
        waiting = self.runner.stats().observation_age_s == float("inf")
        response.success = True
        response.message = ("restarted" if was_running else "started") + \
            (": waiting for /joint_states" if waiting else "")
        self.get_logger().info(f"policy {response.message}")
        return response

    def _on_stop(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        was_running = self.runner.running
        self.runner.stop()
        response.success = True
        response.message = "stopped" if was_running else "already stopped"
        self.get_logger().info(f"policy {response.message}")
        return response

    # ---------------------------------------------------------------- diagnostics
    def _publish_diagnostics(self) -> None:
        missing_images = [k for k in self.image_topics if k not in self._images_seen]
        counters = NodeCounters(self.published, self.bad_joint_states, self.bad_images)
        report = self.diagnostics.report(self.runner.stats(), counters, missing_images)
        self.diag_pub.publish(diagnostic_array(self, diagnostic_status(
            report.level, f"{self.get_name()}: policy", report.message, self.policy_source, report.values)))

    def destroy_node(self) -> None:
        self.runner.close()
        super().destroy_node()


def main(args: Sequence[str] | None = None) -> int:
    return run_node(PolicyNode, args, "policy_node", fatal=(PolicyError, JointSpecError, ValueError))



if __name__ == "__main__":
    sys.exit(main())
