"""The MuJoCo backend behind the Isaac Sim ROS 2 bridge's topic contract (a drop-in for Isaac Sim).

Subscribes ``/isaac_joint_command`` (sensor_msgs/JointState by name, position targets, any subset of
joints), publishes ``/isaac_joint_states`` (position, velocity, effort = servo torque) stamped with
simulation time and ``/clock`` (rosgraph_msgs/Clock) after every physics step. Stepping is paced on
the steady wall clock times ``time_factor``; this node never uses sim time itself (it is the clock).

Parameters: ``physics_dt`` (s), ``time_factor``, ``kp``/``kd``/``force_limit`` (one value or one per
joint; empty = the official servo figures), ``start_position`` (rad, empty = zeros), ``gravity``,
``publish_every`` (physics steps per joint state). Topics are remappable.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import rclpy
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState

from so101_common import topics
from so101_common.joints import JOINT_NAMES
from so101_ros.node_runner import run_node
from so101_sim2real.replay.mujoco_backend import (
    DEFAULT_FORCE_LIMIT,
    DEFAULT_KD,
    DEFAULT_KP,
    MujocoSim,
    MujocoSimConfig,
    MujocoSimError,
    RealTimePacer,
)

__all__ = ["MujocoBridgeNode", "main"]


class MujocoBridgeNode(Node):
    def __init__(self, **node_kwargs: Any) -> None:
        super().__init__("mujoco_bridge", **node_kwargs)
        self.declare_parameter("physics_dt", MujocoSimConfig.physics_dt)
        self.declare_parameter("time_factor", 1.0)
        self.declare_parameter("kp", [DEFAULT_KP])
        self.declare_parameter("kd", [DEFAULT_KD])
        self.declare_parameter("force_limit", [DEFAULT_FORCE_LIMIT])
        self.declare_parameter("start_position", [0.0] * len(JOINT_NAMES))
        self.declare_parameter("gravity", True)
        self.declare_parameter("publish_every", 1)
        if self.get_parameter("use_sim_time").value:
            raise MujocoSimError("the MuJoCo bridge publishes /clock itself; run it without use_sim_time")

        def gains(name: str) -> float | tuple[float, ...]:
            values = [float(v) for v in self.get_parameter(name).value]
            return values[0] if len(values) == 1 else tuple(values)

        dt = float(self.get_parameter("physics_dt").value)
        config = MujocoSimConfig(physics_dt=dt, kp=gains("kp"), kd=gains("kd"), force_limit=gains("force_limit"),
                                 start_position=tuple(self.get_parameter("start_position").value),
                                 gravity=bool(self.get_parameter("gravity").value))
        self.publish_every = int(self.get_parameter("publish_every").value)
        if self.publish_every < 1:
            raise MujocoSimError(f"publish_every must be >= 1, got {self.publish_every}")
        self.sim = MujocoSim(config)
        self.pacer = RealTimePacer(dt, float(self.get_parameter("time_factor").value))
        self._steps = 0
        self._start = time.monotonic()
        self._states = self.create_publisher(JointState, topics.SIM_STATES, QoSProfile(depth=50))
        self._clock_publisher = self.create_publisher(ClockMsg, topics.CLOCK, QoSProfile(depth=50))
        self.create_subscription(JointState, topics.SIM_COMMAND, self._on_command, QoSProfile(depth=50))
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(dt / self.pacer.time_factor, self._on_tick, clock=steady)
        self.get_logger().info(f"MuJoCo bridge: {1 / dt:g} Hz physics at {self.pacer.time_factor:g}x real time, "
                               f"kp {config.kp_per_joint[0]:g}, kd {config.kd_per_joint[0]:g}")

    def _on_command(self, msg: JointState) -> None:
        try:
            self.sim.set_targets(list(msg.name), list(msg.position))
        except MujocoSimError as err:
            self.get_logger().warning(f"ignored command: {err}", throttle_duration_sec=5.0)

    def _on_tick(self) -> None:
        for _ in range(self.pacer.due(time.monotonic() - self._start)):
            self.sim.step()
            self._steps += 1
            if self._steps % self.publish_every == 0:
                self._publish()

    def _publish(self) -> None:
        seconds = self.sim.time
        sec = int(seconds)
        stamp = rclpy.time.Time(seconds=sec, nanoseconds=round((seconds - sec) * 1e9)).to_msg()
        self._clock_publisher.publish(ClockMsg(clock=stamp))
        state = JointState(name=list(JOINT_NAMES), position=self.sim.position().tolist(),
                           velocity=self.sim.velocity().tolist(), effort=self.sim.effort().tolist())
        state.header.stamp = stamp
        self._states.publish(state)


def main(args: list[str] | None = None) -> int:
    return run_node(MujocoBridgeNode, args, "mujoco_bridge", fatal=(MujocoSimError,))



if __name__ == "__main__":
    sys.exit(main())
