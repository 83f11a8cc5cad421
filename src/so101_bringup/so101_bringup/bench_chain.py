"""Chain overhead: policy output → driver write, through the in-process composition.

The compensator (shipped model) and the safety filter run as composed by ``deploy_graph``; a probe
node plays both ends — it publishes ``/policy/joint_command`` and a steady ``/joint_states``, and
watches ``/joint_command``, which is what the driver writes. Each sample is a tiny step on one joint
(small enough to pass the safety filter's velocity and acceleration bounds within one tick); the
latency is the time from publishing it to the first ``/joint_command`` that shows it. The baseline,
measured in the same run and process, is the same probe through two bare relay nodes (the hop count
of compensator + safety). The safety filter publishes on its own timer (``rate_hz``, 100 Hz), so
the chain's figure includes up to one tick of waiting: about half a period on average.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState

from so101_bringup.composition import ComposedGraph, GraphOptions, NodeSpec, deploy_graph
from so101_common.bench import BenchResult, percentile
from so101_common.joints import JOINT_NAMES
from so101_testing import apply_private_ros_env, wait_for

__all__ = ["RelayNode", "benchmarks"]

_POSE = [0.1, -0.3, 0.4, 0.2, 0.0, 0.5]
_STEP = 5e-4  # rad: passes the safety filter's default acceleration bound in one 100 Hz tick
_SAMPLES = 150


class RelayNode(Node):
    """Republishes ``input`` on ``output`` unchanged: the baseline's stand-in for a chain stage."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("relay", **kwargs)
        pub = self.create_publisher(JointState, "output", 10)
        self.create_subscription(JointState, "input", pub.publish, 10)


class _Probe:
    def __init__(self, context: Context, output_topic: str) -> None:
        self.node = rclpy.create_node("chain_probe", context=context)
        self.cmd = self.node.create_publisher(JointState, "/policy/joint_command", 10)
        self.state = self.node.create_publisher(JointState, "/joint_states", 10)
        self.seen = threading.Event()
        self.latest = float("nan")  # last shoulder_pan value on the output
        self.before = float("nan")  # its value when the current step was sent
        self.node.create_subscription(JointState, output_topic, self._on_output, 10)
        self.node.create_timer(0.01, lambda: self.state.publish(self._msg(_POSE)))
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def _msg(self, pose: list[float]) -> JointState:
        msg = JointState()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.name = list(JOINT_NAMES)
        msg.position = [float(v) for v in pose]
        return msg

    def _on_output(self, msg: JointState) -> None:
        # The compensator adds its own (steady) Δ, so look for the step as a change, not a value.
        if msg.position:
            self.latest = msg.position[0]
            if abs(self.latest - self.before) > _STEP / 3:
                self.seen.set()

    def measure(self, samples: int) -> list[float]:
        latencies = []
        level = _POSE[0]
        for i in range(samples + 10):  # the first steps warm the chain up (compensator history, discovery)
            level = _POSE[0] + (_STEP if i % 2 == 0 else 0.0)
            self.before = self.latest
            self.seen.clear()
            start = time.perf_counter()
            self.cmd.publish(self._msg([level, *_POSE[1:]]))
            if self.seen.wait(0.5) and i >= 10:
                latencies.append(time.perf_counter() - start)
            # keep the command stream alive (watchdog) while the step settles
            for _ in range(5):
                time.sleep(0.01)
                self.cmd.publish(self._msg([level, *_POSE[1:]]))
        return latencies

    def close(self) -> None:
        self.executor.shutdown()
        self.thread.join(timeout=5.0)
        self.node.destroy_node()


def _chain_latencies(specs: list[NodeSpec], output_topic: str) -> list[float]:
    with ComposedGraph(specs) as graph:
        probe = _Probe(graph.context, output_topic)
        try:
            wait_for(lambda: probe.cmd.get_subscription_count() > 0, timeout=10.0)
            return probe.measure(_SAMPLES)
        finally:
            probe.close()


def benchmarks() -> Iterator[BenchResult]:
    apply_private_ros_env()
    chain = [s for s in deploy_graph(GraphOptions(port="")) if s.key in ("CompensatorNode", "SafetyNode")]
    relays = [NodeSpec("so101_bringup.bench_chain:RelayNode", None, {},
                       {"input": "/policy/joint_command", "output": "/bench/relay_1", "__node": "relay_1"}),
              NodeSpec("so101_bringup.bench_chain:RelayNode", None, {},
                       {"input": "/bench/relay_1", "output": "/joint_command", "__node": "relay_2"})]
    measured = _chain_latencies(chain, "/joint_command")
    baseline = _chain_latencies(relays, "/joint_command")
    if len(measured) < _SAMPLES // 2 or len(baseline) < _SAMPLES // 2:
        raise RuntimeError(f"only {len(measured)}/{_SAMPLES} steps came through the chain "
                           f"({len(baseline)}/{_SAMPLES} through the relays); is the safety filter holding?")
    for q, name in ((50, "p50"), (99, "p99")):
        yield BenchResult(f"chain.policy_to_driver_{name}", percentile(measured, q) * 1e3, "ms",
                          percentile(baseline, q) * 1e3, "two bare relay nodes in the same composition",
                          better="lower", target=20.0 if q == 99 else None)

