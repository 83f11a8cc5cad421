"""Chain overhead: policy output → driver write, through the in-process composition.

The compensator (shipped model) and the safety filter run as composed by ``deploy_graph``; a probe
node plays both ends — it publishes ``policy/joint_command`` as a policy does (a steady stream, one
message per ``_PERIOD``) and a steady ``joint_states``, and watches ``joint_command``, which is what the
driver writes. Each sample is a tiny step on one joint, sent on the stream's beat (small enough to pass
the safety filter's velocity and acceleration bounds over one period: the bounds use the real time
since the previous output, so a step squeezed in right after another message could only move a
little); the latency is the time from publishing it to the first ``joint_command`` that shows it. The
baseline, measured in the same run and process, is the same probe through two bare relay nodes (the
hop count of compensator + safety). The safety filter forwards each command when it arrives, so the
chain's figure is the two hops plus the compensator's and the filter's computation.
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

from so101_bringup.composition import ComposedGraph
from so101_bringup.node_specs import GraphOptions, NodeSpec, deploy_graph
from so101_common import topics
from so101_common.bench import BenchResult, percentile
from so101_common.joints import JOINT_NAMES
from so101_common.waiting import wait_for

__all__ = ["RelayNode", "benchmarks"]

_POSE = [0.1, -0.3, 0.4, 0.2, 0.0, 0.5]
_STEP = 5e-4  # rad: passes the safety filter's default acceleration bound within one period
# s: the probe policy's command period: the shipped model's 50 Hz. The compensator steps on its own clock at
# the model's rate, phase-locked to the commands: a policy at that rate is stepped on arrival (a faster one
# would wait for the next step, by the rate contract).
_PERIOD = 0.02
_BEATS = 3  # commands per sample: the step, then the same command again while it settles
_SAMPLES = 300  # p99 of 300: the third-slowest sample


class RelayNode(Node):
    """Republishes ``input`` on ``output`` unchanged: the baseline's stand-in for a chain stage."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("relay", **kwargs)
        pub = self.create_publisher(JointState, "output", 10)
        self.create_subscription(JointState, "input", pub.publish, 10)


class _Probe:
    """The policy and the arm for one graph under ``namespace`` (relative topics), and the output's watcher."""

    def __init__(self, context: Context, namespace: str) -> None:
        self.node = rclpy.create_node("chain_probe", namespace=namespace, context=context)
        self.cmd = self.node.create_publisher(JointState, topics.POLICY_COMMAND, 10)
        self.state = self.node.create_publisher(JointState, topics.JOINT_STATES, 10)
        self.seen_at: float | None = None  # when the current step first showed on the output
        self.latest = float("nan")  # last shoulder_pan value on the output
        self.before = float("nan")  # its value when the current step was sent
        self.node.create_subscription(JointState, topics.JOINT_COMMAND, self._on_output, 10)
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
        now = time.perf_counter()
        if msg.position:
            self.latest = msg.position[0]
            if self.seen_at is None and abs(self.latest - self.before) > _STEP / 3:
                self.seen_at = now

    def heard(self) -> bool:
        """Whether the chain's input subscribes to this probe's policy commands."""
        return self.cmd.get_subscription_count() > 0

    def sample(self, level: float, beat: float) -> tuple[float | None, float]:
        """Send ``level`` on the beat after ``beat``, then the same command for the other beats of the sample;
        returns (latency or None when the step never showed, the last beat)."""
        start = 0.0
        for k in range(_BEATS):
            beat += _PERIOD
            time.sleep(max(0.0, beat - time.perf_counter()))  # pacing the probe policy, not waiting on it
            if k == 0:
                self.before, self.seen_at = self.latest, None
                start = time.perf_counter()
            self.cmd.publish(self._msg([level, *_POSE[1:]]))
        seen_at = self.seen_at
        return (None if seen_at is None else seen_at - start), beat

    def close(self) -> None:
        self.executor.shutdown()
        self.thread.join(timeout=5.0)
        self.node.destroy_node()


def _interleaved_latencies(graphs: dict[str, list[NodeSpec]], samples: int) -> dict[str, list[float]]:
    """Run every graph at once, each under its own namespace, and step them in turn: the chain and its
    baseline see the same machine load at the same time (a loaded machine moves both alike)."""
    composed = [ComposedGraph(specs, namespace=f"/bench_{name}") for name, specs in graphs.items()]
    probes: dict[str, _Probe] = {}
    try:
        for graph in composed:
            graph.start()
        probes = {name: _Probe(graph.context, f"/bench_{name}") for name, graph in zip(graphs, composed, strict=True)}
        for probe in probes.values():
            wait_for(probe.heard, timeout=10.0)
        latencies: dict[str, list[float]] = {name: [] for name in graphs}
        beat = time.perf_counter()
        for i in range(samples + 10):  # the first steps warm the chain up (compensator history, discovery)
            level = _POSE[0] + (_STEP if i % 2 == 0 else 0.0)
            for name, probe in probes.items():
                latency, beat = probe.sample(level, beat)
                if latency is not None and i >= 10:
                    latencies[name].append(latency)
        return latencies
    finally:
        for probe in probes.values():
            probe.close()
        for graph in composed:
            graph.stop()


def benchmarks() -> Iterator[BenchResult]:
    chain = [s for s in deploy_graph(GraphOptions(port="")) if s.key in ("gaponet_compensator", "safety_filter")]
    relays = [NodeSpec("so101_apps.bench_chain:RelayNode", None, {},
                       {"input": topics.POLICY_COMMAND, "output": "relay_1", "__node": "relay_1"}),
              NodeSpec("so101_apps.bench_chain:RelayNode", None, {},
                       {"input": "relay_1", "output": topics.JOINT_COMMAND, "__node": "relay_2"})]
    latencies = _interleaved_latencies({"chain": chain, "relays": relays}, _SAMPLES)
    measured, baseline = latencies["chain"], latencies["relays"]
    if len(measured) < _SAMPLES // 2 or len(baseline) < _SAMPLES // 2:
        raise RuntimeError(f"only {len(measured)}/{_SAMPLES} steps came through the chain "
                           f"({len(baseline)}/{_SAMPLES} through the relays); is the safety filter holding?")
    for q, name in ((50, "p50"), (99, "p99")):
        reference = percentile(baseline, q) * 1e3
        # the issue's target: the chain's p99 at most twice the two relays' p99 of this run
        yield BenchResult(f"chain.policy_to_driver_{name}", percentile(measured, q) * 1e3, "ms", reference,
                          "two bare relay nodes, run at the same time (interleaved steps)",
                          better="lower", target=2.0 * reference if q == 99 else None)

