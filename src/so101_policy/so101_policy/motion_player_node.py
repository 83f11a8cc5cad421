"""``motion_player`` node: plays a scripted motion as a command source (a stand-in for a policy).

Publishes ``output`` (default remap ``policy/joint_command``; sensor_msgs/JointState, rad, stamped)
at ``rate_hz`` and, with each command, the motion's next ``chunk_steps`` commands on ``output_chunk``
(default remap ``policy/action_chunk``; trajectory_msgs/JointTrajectory, stamped like the command,
points ``1/rate_hz`` apart): what a chunking policy gives the compensator's look-ahead. Parameters: ``motion`` (built-in name or SAGE motion file), ``duration`` (s, built-in motions;
0 = default), ``rate_hz``, ``loop``,
``start_delay`` (s). Services ``~/start`` / ``~/stop`` (std_srvs/Trigger); ``autostart``;
``hold_start_pose`` (while stopped, command the motion's first pose). :meth:`MotionPlayerNode.hold`
stops the motion and commands a given pose (the arm's measured one, when a servo faults).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
from builtin_interfaces.msg import Duration
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory as ChunkMsg
from trajectory_msgs.msg import JointTrajectoryPoint

from so101_common.trajectory import JointTrajectory
from so101_policy.motions import MotionError, MotionPlayerParameters, load_motion, sample, sample_times
from so101_ros.node_params import declare_parameters
from so101_ros.node_runner import run_node

__all__ = ["MotionPlayerNode", "main"]


class MotionPlayerNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("motion_player", **kwargs)
        p = declare_parameters(self, MotionPlayerParameters)
        self.motion = load_motion(p.motion, duration=p.duration)
        rate_hz = p.rate_hz
        if rate_hz <= 0:
            raise ValueError(f"rate_hz must be positive, got {rate_hz}")
        self.loop = p.loop
        self.start_delay = p.start_delay
        self.playing = p.autostart
        # While not playing, command the motion's first pose, so the arm waits there to start.
        self.hold_start_pose = p.hold_start_pose
        self.finished = False
        self._held: np.ndarray | None = None  # a pose commanded instead of the motion (hold())
        self._start_ns = self.get_clock().now().nanoseconds
        self.rate_hz = rate_hz
        self.chunk_steps = p.chunk_steps
        self.pub = self.create_publisher(JointState, "output", 10)
        self.chunk_pub = self.create_publisher(ChunkMsg, "output_chunk", 10) if p.chunk_steps else None
        self.create_service(Trigger, "~/start", self._on_start)
        self.create_service(Trigger, "~/stop", self._on_stop)
        self.create_timer(1.0 / rate_hz, self._on_tick)
        self.get_logger().info(f"motion of {self.motion.duration:.1f} s at {rate_hz:g} Hz")

    def elapsed(self) -> float:
        return (self.get_clock().now().nanoseconds - self._start_ns) * 1e-9 - self.start_delay

    def _on_tick(self) -> None:
        if self._held is not None:
            self._publish_pose(self._held)
            return
        if not self.playing:
            if self.hold_start_pose:
                self._publish(0.0)
            return
        t = self.elapsed()
        if t < 0:
            return
        if t > self.motion.duration:
            if not self.loop:
                self.finished = True
                return
            t %= self.motion.duration
        self._publish(t)

    def _publish(self, t: float) -> None:
        msg = JointState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.name = list(self.motion.names)
        # the command, then the chunk's (the current command first, as a policy's), sampled together
        aheads = [k / self.rate_hz for k in range(self.chunk_steps + 1)] if self.chunk_pub is not None else []
        # while holding the start pose, or past the end without looping, the future is that pose
        whens = [t + ahead if self.playing and (self.loop or t + ahead <= self.motion.duration) else t for ahead in aheads]
        rows = sample_times(self.motion, np.array([t, *(when % self.motion.duration if self.loop else when
                                                        for when in whens)])).tolist()
        msg.position = rows[0]
        self.pub.publish(msg)
        if self.chunk_pub is not None:
            chunk = ChunkMsg()
            chunk.header.stamp = msg.header.stamp
            chunk.joint_names = list(self.motion.names)
            chunk.points = [JointTrajectoryPoint(positions=row, time_from_start=_after(ahead))
                            for row, ahead in zip(rows[1:], aheads, strict=True)]
            self.chunk_pub.publish(chunk)

    def _publish_pose(self, pose: np.ndarray) -> None:
        msg = JointState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.name = list(self.motion.names)
        msg.position = [float(v) for v in pose]
        self.pub.publish(msg)
        if self.chunk_pub is not None:  # a policy that stopped: its future is the pose it holds
            chunk = ChunkMsg(joint_names=msg.name)
            chunk.header.stamp = msg.header.stamp
            chunk.points = [JointTrajectoryPoint(positions=msg.position, time_from_start=_after(k / self.rate_hz))
                            for k in range(self.chunk_steps + 1)]
            self.chunk_pub.publish(chunk)

    def set_motion(self, motion: JointTrajectory) -> None:
        """Play ``motion`` from now on (stopped: its first pose is held if ``hold_start_pose``)."""
        self.motion = motion
        self.playing, self.finished, self._held = False, False, None

    def restart(self) -> None:
        """Play the motion from its beginning (after ``start_delay``)."""
        self._start_ns = self.get_clock().now().nanoseconds
        self.playing, self.finished, self._held = True, False, None

    def hold(self, pose: Sequence[float] | np.ndarray) -> None:
        """Stop the motion and command ``pose`` (the motion's joint order) until the next motion or restart;
        a NaN (a joint not measured) holds that joint's last command."""
        last = sample(self.motion, min(max(self.elapsed(), 0.0), self.motion.duration)) if self.playing \
            else sample(self.motion, 0.0)
        target = np.asarray(pose, dtype=np.float64)
        self._held = np.where(np.isfinite(target), target, last)
        self.playing = False

    def _on_start(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self.restart()
        response.success, response.message = True, "playing from the start"
        return response

    def _on_stop(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self.playing = False
        response.success, response.message = True, "stopped"
        return response


def _after(seconds: float) -> Duration:
    whole = int(seconds)
    return Duration(sec=whole, nanosec=int(round((seconds - whole) * 1e9)))


def main(args: Sequence[str] | None = None) -> int:
    return run_node(MotionPlayerNode, args, "motion_player", fatal=(MotionError, ValueError))



if __name__ == "__main__":
    sys.exit(main())
