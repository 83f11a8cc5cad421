"""Replay a recorded command stream onto a simulator over the Isaac Sim bridge topics, recording a sim bag.

Source (exactly one): parameter ``bag`` (its ``bag_command_topic``, initial state from
``bag_state_topic``), ``motion`` (SAGE motion file) or ``sage_real`` (SAGE real run folder). Once the
simulator publishes ``/isaac_joint_states`` and listens on ``/isaac_joint_command``, the node sends the
real initial position, waits ``settle_s``, then plays the commands at their original timing on the
node clock (``use_sim_time`` honoured: then it paces on the simulator's ``/clock``). Everything sent
and everything the simulator publishes (joint states, ``/clock`` when ``record_clock``) is written as
raw CDR into the sim bag ``out``; the node exits when the stream and ``tail_s`` are over.
Other parameters: ``joint_names`` (names the simulator uses, in the joint spec's order), ``tick_rate_hz``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import rclpy
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState

from so101_common import topics
from so101_common.joints import JOINT_NAMES
from so101_common.trajectory import JointTrajectory
from so101_recorder.bag_reader import read_joint_states
from so101_recorder.errors import RecorderError
from so101_ros.node_runner import run_node
from so101_sim2real.replay.core import (
    COMMAND_TOPIC,
    JOINT_STATE_TYPE,
    SIM_COMMAND_TOPIC,
    SIM_STATE_TOPIC,
    STATE_TOPIC,
    LiveReplay,
    ReplayError,
    ReplaySchedule,
    ReplaySource,
    joint_state_cdr,
    load_bag_source,
    load_motion_source,
    load_sage_real_source,
)

__all__ = ["ReplayNode", "main", "replay_over_ros", "simulator_waits"]

_CLOCK_TYPE = "rosgraph_msgs/msg/Clock"


class ReplayNode(Node):
    def __init__(self, source: ReplaySource | None = None, **node_kwargs: Any) -> None:
        """``source`` given: replay it (the source parameters are then ignored)."""
        super().__init__("replay", **node_kwargs)
        for name in ("bag", "motion", "sage_real", "out"):
            self.declare_parameter(name, "")
        self.declare_parameter("bag_command_topic", COMMAND_TOPIC)
        self.declare_parameter("bag_state_topic", STATE_TOPIC)
        self.declare_parameter("settle_s", 1.0)
        self.declare_parameter("tail_s", 0.5)
        self.declare_parameter("tick_rate_hz", 200.0)
        self.declare_parameter("record_clock", True)
        self.declare_parameter("joint_names", list(JOINT_NAMES))
        self.names = [str(n) for n in self.get_parameter("joint_names").value]
        if len(self.names) != len(JOINT_NAMES):
            raise ReplayError(f"joint_names needs {len(JOINT_NAMES)} names (joint spec order), got {self.names}")
        out = str(self.get_parameter("out").value)
        rate = float(self.get_parameter("tick_rate_hz").value)
        if not out or rate <= 0:
            raise ReplayError("parameters: 'out' (sim bag path) is required and tick_rate_hz must be > 0")
        source = source or self._load_source()
        self.replay = LiveReplay(ReplaySchedule(source, float(self.get_parameter("settle_s").value)), out,
                                 tail_s=float(self.get_parameter("tail_s").value))
        self.done = False
        self._sim_seen = False
        self._commands = self.create_publisher(JointState, SIM_COMMAND_TOPIC, QoSProfile(depth=50))
        self._command_topic = self._commands.topic_name
        state_sub = self.create_subscription(JointState, SIM_STATE_TOPIC, self._on_state, QoSProfile(depth=200), raw=True)
        self._state_topic = state_sub.topic_name
        if self.get_parameter("record_clock").value:
            clock_sub = self.create_subscription(ClockMsg, topics.CLOCK, self._on_clock, QoSProfile(depth=200), raw=True)
            self._clock_topic = clock_sub.topic_name
        self.create_timer(1.0 / rate, self._on_tick)
        self.get_logger().info(f"replay {source.name}: {len(source.command)} commands over "
                               f"{source.command.duration:.2f} s -> {out}; waiting for the simulator")

    def _load_source(self) -> ReplaySource:
        given = {k: str(self.get_parameter(k).value) for k in ("bag", "motion", "sage_real")}
        chosen = [k for k, v in given.items() if v]
        if len(chosen) != 1:
            raise ReplayError(f"set exactly one of the parameters bag, motion, sage_real (got {chosen or 'none'})")
        if given["bag"]:
            return load_bag_source(given["bag"], str(self.get_parameter("bag_command_topic").value),
                                   str(self.get_parameter("bag_state_topic").value))
        return load_motion_source(given["motion"]) if given["motion"] else load_sage_real_source(given["sage_real"])

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_state(self, data: bytes) -> None:
        self._sim_seen = True
        self.replay.record(self._state_topic, JOINT_STATE_TYPE, data, self.get_clock().now().nanoseconds)

    def _on_clock(self, data: bytes) -> None:
        self.replay.record(self._clock_topic, _CLOCK_TYPE, data, self.get_clock().now().nanoseconds)

    def _on_tick(self) -> None:
        if self.done:
            return
        now = self._now()
        if not self.replay.started:
            waits = simulator_waits(self._sim_seen, now, self._commands.get_subscription_count(), self._state_topic,
                                    self._command_topic)
            if waits:  # said again every 10 s: a replay waits for a simulator as long as it takes to start
                self.get_logger().info(f"waiting for the simulator: {'; '.join(waits)}", throttle_duration_sec=10.0)
                return
            self.replay.start(now)
            self.get_logger().info("simulator is up: sending the real initial state, then the commands")
        for target in self.replay.tick(now):
            stamp = self.get_clock().now()
            msg = JointState(name=self.names, position=[float(v) for v in target])
            msg.header.stamp = stamp.to_msg()
            self._commands.publish(msg)
            # recorded through rosbags' serializer: rmw's bytes may carry uninitialised padding
            data = joint_state_cdr(stamp.nanoseconds * 1e-9, tuple(self.names), np.asarray(target))
            self.replay.record(self._command_topic, JOINT_STATE_TYPE, data, stamp.nanoseconds)
        if self.replay.finished(now):
            path = self.replay.close()
            self.done = True
            self.get_logger().info(f"replay finished: sim bag {path}")


def simulator_waits(sim_seen: bool, now: float, command_subscribers: int, state_topic: str,
                    command_topic: str) -> list[str]:
    """What the replay still waits for before it sends the first command, in words (none: the simulator is up)."""
    return [wait for wait in (
        None if sim_seen else f"no joint states on {state_topic} yet",
        None if now > 0 else "no /clock yet (use_sim_time)",  # under use_sim_time the clock reads 0 until then
        None if command_subscribers else f"nothing subscribes to {command_topic} yet",
    ) if wait]


def _spin_until_done(node: ReplayNode) -> None:
    while rclpy.ok() and not node.done:
        rclpy.spin_once(node, timeout_sec=0.1)


def replay_over_ros(source: ReplaySource, command_topic: str = SIM_COMMAND_TOPIC, state_topic: str = SIM_STATE_TOPIC,
                    settle_s: float = 1.0) -> tuple[JointTrajectory, JointTrajectory]:
    """Replay ``source`` against a running simulator in process (``use_sim_time``); ``(sent commands, sim states)``."""
    remaps = ["--ros-args", "-r", f"{SIM_COMMAND_TOPIC}:={command_topic}", "-r", f"{SIM_STATE_TOPIC}:={state_topic}"]
    with tempfile.TemporaryDirectory(prefix="so101_replay_") as tmp:
        out = Path(tmp) / "sim"
        context = rclpy.Context()
        rclpy.init(args=remaps, context=context)
        try:
            node = ReplayNode(source, context=context, cli_args=remaps, parameter_overrides=[
                rclpy.parameter.Parameter("out", value=str(out)),
                rclpy.parameter.Parameter("settle_s", value=float(settle_s)),
                rclpy.parameter.Parameter("use_sim_time", value=True)])
            executor = rclpy.executors.SingleThreadedExecutor(context=context)
            executor.add_node(node)
            while context.ok() and not node.done:
                executor.spin_once(timeout_sec=0.1)
            node.destroy_node()
        finally:
            context.try_shutdown()
        if not out.exists() or not (out / "metadata.yaml").exists():
            raise ReplayError("replay interrupted before the simulator answered")
        try:
            return read_joint_states(out, command_topic), read_joint_states(out, state_topic)
        except RecorderError as err:
            raise ReplayError(f"cannot read the recorded sim bag: {err}") from err


def _abort_unfinished(node: ReplayNode) -> None:
    if not node.done and node.replay.writer.is_open:
        node.replay.writer.abort("replay interrupted")


def main(args: list[str] | None = None) -> int:
    return run_node(ReplayNode, args, "replay", fatal=(ReplayError,), spin=_spin_until_done, on_exit=_abort_unfinished)



if __name__ == "__main__":
    sys.exit(main())
