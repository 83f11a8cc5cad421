"""``recorder`` node: raw subscriptions to the chosen topics, episodes on ``~/start``/``~/stop``/``~/toggle``.

Topics are subscribed raw (no deserialisation) with the type each one advertises; topics that
appear later are picked up by periodic rediscovery. Which topics, and their QoS (following the publishers,
as ``ros2 bag record`` does): :mod:`so101_recorder.topic_selection`. State goes to ``/diagnostics``.
Servo faults the driver reports on ``/diagnostics`` go into the episode's metadata as spans
(``so101_common.servo_faults``): a fault is not a gap, and pairing and training need to know where it was.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path

from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Empty
from std_srvs.srv import Trigger

from so101_common import topics
from so101_common.servo_faults import read_servo_faults
from so101_recorder.errors import RecorderError
from so101_recorder.msgtypes import message_class
from so101_recorder.parameters import DEFAULT_TOPICS, RecorderParameters
from so101_recorder.recorder import Recorder, RecorderConfig
from so101_recorder.topic_selection import TopicSelection, matching_qos
from so101_ros.diagnostics import diagnostic_array, diagnostic_status, status_entries
from so101_ros.node_params import declare_parameters
from so101_ros.node_runner import run_node
from so101_ros.stamps import seconds

__all__ = ["DEFAULT_TOPICS", "RecorderNode", "main"]


class RecorderNode(Node):
    def __init__(self, name: str = "recorder", **kwargs) -> None:
        super().__init__(name, **kwargs)
        params = declare_parameters(self, RecorderParameters)
        get = lambda key: getattr(params, key)  # noqa: E731
        self.recorder = Recorder(RecorderConfig(
            root=get("bag_root"), robot_id=get("robot_id"), task=get("task"),
            calibration_file=get("calibration_file") or None, gap_profile=get("gap_profile") or None,
            notes=get("notes"), max_episode_s=get("max_episode_s") or None, flush_period_s=get("flush_period_s"),
            fsync=get("fsync")))
        self.topics = TopicSelection([self.resolve_topic_name(t) for t in get("topics") if t])
        self.qos_depth = int(get("qos_depth"))
        self._discovery_lock = threading.Lock()  # discover() also runs from `so101 record`'s main thread
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.diagnostics = self.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, 10)
        self.create_service(Trigger, "~/start", self._start)
        self.create_service(Trigger, "~/stop", self._stop)
        self.create_subscription(Empty, "~/toggle", self._toggle, 10)
        self.create_subscription(DiagnosticArray, topics.DIAGNOSTICS, self._on_diagnostics, 50)
        self.create_timer(float(get("discovery_period_s")), self.discover)
        self.create_timer(min(0.1, self.recorder.config.flush_period_s / 2), self._tick)
        self.create_timer(float(get("diagnostics_period_s")), self.publish_diagnostics)
        self.discover()
        if get("autostart"):
            with contextlib.suppress(RecorderError):  # logged where it was raised; the node keeps running
                self.start_episode()

    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        """Episode metadata may change between episodes (``ros2 param set /recorder task pick``)."""
        try:
            self.recorder.config.update({p.name: p.value for p in params})
        except RecorderError as err:
            return SetParametersResult(successful=False, reason=str(err))
        return SetParametersResult(successful=True)

    # -- topics ----------------------------------------------------------------------------------
    def discover(self) -> None:
        with self._discovery_lock:
            self._discover()

    def _discover(self) -> None:
        for topic, msgtype in self.topics.to_subscribe(dict(self.get_topic_names_and_types())):
            try:
                self.recorder.check_type(msgtype)
                msg_class = message_class(msgtype)
            except RecorderError as err:
                self.topics.refused[topic] = f"{msgtype}: {err}"
                self.get_logger().error(f"not recording {topic}: {self.topics.refused[topic]}")
                continue
            self.create_subscription(msg_class, topic, partial(self._on_message, topic, msgtype),
                                     self._qos(topic), raw=True)
            self.topics.subscribed[topic] = msgtype
            self.get_logger().info(f"subscribed to {topic} [{msgtype}]")

    def _qos(self, topic: str) -> QoSProfile:
        reliable, latched = matching_qos([
            (p.qos_profile.reliability == ReliabilityPolicy.RELIABLE, p.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL)
            for p in self.get_publishers_info_by_topic(topic)])
        return QoSProfile(depth=self.qos_depth,
                          reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
                          durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)

    def _on_message(self, topic: str, msgtype: str, data: bytes) -> None:
        try:
            self.recorder.write(topic, msgtype, data, self.get_clock().now().nanoseconds)
        except RecorderError as err:
            self.get_logger().error(str(err))

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        try:
            faults = read_servo_faults(status_entries(msg))
        except ValueError as err:
            self.get_logger().error(f"/diagnostics from {msg.status[0].name if msg.status else '?'}: {err}")
            return
        if faults:
            stamp = seconds(msg.header.stamp)
            try:
                self.recorder.observe_faults(stamp, faults)
            except RecorderError as err:
                self.get_logger().error(str(err))

    # -- episodes --------------------------------------------------------------------------------
    def start_episode(self, task: str | None = None) -> Path:
        """Start an episode (``task``: this episode's task, else the ``task`` parameter); returns its bag folder.
        Raises :class:`RecorderError` (already recording, I/O), logged too."""
        try:
            path = self.recorder.start(task=task)
        except RecorderError as err:
            self.get_logger().error(str(err))
            raise
        self.get_logger().info(f"recording {path}")
        return path

    def stop_episode(self) -> Path:
        """Close the episode; returns its bag folder. Raises :class:`RecorderError` (not recording, I/O), logged too."""
        try:
            episode = self.recorder.stop()
            if episode is None:
                raise RecorderError("not recording")
        except RecorderError as err:
            self.get_logger().error(str(err))
            raise
        bag = self.recorder.status().bag
        assert bag is not None  # the episode just closed was written there
        self.get_logger().info(f"episode {episode.name} complete: {episode.message_count} messages")
        return bag

    def _start(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        return _answer(response, self.start_episode)

    def _stop(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        return _answer(response, self.stop_episode)

    def _toggle(self, _msg: Empty) -> None:
        with contextlib.suppress(RecorderError):  # logged where it was raised
            if self.recorder.recording:
                self.stop_episode()
            else:
                self.start_episode()

    def _tick(self) -> None:
        try:
            finished = self.recorder.tick()
        except RecorderError as err:
            self.get_logger().error(str(err))
            return
        if finished is not None:
            self.get_logger().info(f"episode {finished.name} reached max_episode_s: {finished.message_count} messages")

    def publish_diagnostics(self) -> None:
        s = self.recorder.status()
        self.diagnostics.publish(diagnostic_array(self, diagnostic_status(
            s.level(bool(self.topics.refused)), f"{self.get_name()}: recorder", s.summary(), self.recorder.config.robot_id,
            s.key_values(self.topics.subscribed, self.topics.refused))))

    def destroy_node(self) -> None:
        try:
            self.recorder.close()
        except RecorderError as err:
            self.get_logger().error(str(err))
        super().destroy_node()


def _answer(response: Trigger.Response, episode: Callable[[], Path]) -> Trigger.Response:
    """A Trigger service's answer: the episode's bag folder, or why there is none."""
    try:
        response.success, response.message = True, str(episode())
    except RecorderError as err:
        response.success, response.message = False, str(err)
    return response


def main(args: list[str] | None = None) -> int:
    return run_node(RecorderNode, args, "recorder", fatal=(RecorderError,))


if __name__ == "__main__":
    sys.exit(main())
