"""Command floods: the driver's ``/joint_states`` rate while something floods the command topics.

The virtual SO-101 (default profile) runs in its own process, and so do the driver and the safety filter
with the shipped ``config/driver.yaml`` and ``config/safety.yaml`` (driver at 100 Hz with
``write_on_command``; the filter's input is ``policy/joint_command``, as in the deploy graph without the
compensator), as a launch runs them. A probe in this process counts ``/joint_states`` by their stamps (the
driver's clock: a probe that falls behind still counts every message) and, in turns of ``PHASE_S``
seconds, publishes nothing (the baseline) or a 1 kHz flood of:

- ``valid``: the arm's own pose straight into ``joint_command`` (nothing moves; every command is good);
- ``nan``: NaN positions straight into ``joint_command`` (every command is rejected);
- ``valid_via_safety`` / ``nan_via_safety``: the same into the safety filter's input.

Turns alternate (no flood, a flood, no flood, the next flood, ...) over ``ROUNDS`` rounds, so machine
load hits the floods and the baseline alike; each flood's median rate stands beside the median no-flood
rate of the same run (medians: one turn that another process on the machine slowed down does not decide). Target: at least 95 % of it (issue 19: ``/joint_states`` fell to 84 Hz under 1 kHz of valid
commands, to 38 Hz through the safety filter).
"""

from __future__ import annotations

import math
import statistics
import tempfile
import threading
import time
from bisect import bisect_left
from collections.abc import Iterator
from pathlib import Path

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState

from so101_apps.motion_runs import start_virtual_arm, stop_virtual_arm
from so101_bringup.composition import ComposedGraph
from so101_bringup.node_specs import GraphOptions, deploy_graph
from so101_common import topics
from so101_common.bench import BenchResult
from so101_common.joints import JOINT_NAMES
from so101_common.waiting import wait_for
from so101_ros.stamps import seconds

__all__ = ["benchmarks", "FLOODS"]

PROFILE = "default"
FLOOD_HZ = 1000.0
PHASE_S = 3.0  # s per turn
SETTLE_S = 0.5  # s at the start of a turn that are not counted (the previous turn's flood draining)
ROUNDS = 3
TARGET_FRACTION = 0.95
FLOODS = ("valid", "nan", "valid_via_safety", "nan_via_safety")
_NODES = ("so101_driver", "safety_filter")
_BASELINE = "no flood (alternating turns of the same run)"


class _Probe:
    """Counts ``joint_states`` by stamp and floods ``joint_command`` or the safety filter's input."""

    def __init__(self, context: Context) -> None:
        self.node = rclpy.create_node("flood_probe", context=context)
        self._lock = threading.Lock()
        self._stamps: list[float] = []  # s, the driver's stamps of every joint state, in arrival order
        self.pose: list[float] | None = None  # the arm's measured pose (latest)
        # a deep queue: the flood shares this process's interpreter, and a late probe must not lose states
        self.node.create_subscription(JointState, topics.JOINT_STATES, self._on_state, QoSProfile(depth=5000))
        self._direct = self.node.create_publisher(JointState, topics.JOINT_COMMAND, 10)
        self._via_safety = self.node.create_publisher(JointState, topics.POLICY_COMMAND, 10)
        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._executor.spin, name="so101-flood-probe", daemon=True)
        self._thread.start()

    def _on_state(self, msg: JointState) -> None:
        stamp = seconds(msg.header.stamp)
        with self._lock:
            self._stamps.append(stamp)
            if all(math.isfinite(p) for p in msg.position) and len(msg.position) == len(JOINT_NAMES):
                self.pose = list(msg.position)

    def now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    def rate(self, start: float, end: float) -> float:
        """Joint states per second stamped within [start, end)."""
        with self._lock:
            stamps = sorted(self._stamps)
        return (bisect_left(stamps, end) - bisect_left(stamps, start)) / (end - start)

    def run_turn(self, flood: str | None, seconds: float) -> float:
        """Flood (or not) for ``seconds``; the joint-state rate over the turn, its first ``SETTLE_S`` left out."""
        start = self.now()
        deadline = time.perf_counter() + seconds
        if flood is None:
            time.sleep(seconds)  # pacing the turn, not waiting on anything
        else:
            publisher = self._via_safety if flood.endswith("_via_safety") else self._direct
            msg = JointState(name=list(JOINT_NAMES))
            assert self.pose is not None
            msg.position = [math.nan] * len(JOINT_NAMES) if flood.startswith("nan") else list(self.pose)
            period = 1.0 / FLOOD_HZ
            beat = time.perf_counter()
            while beat < deadline:
                msg.header.stamp = self.node.get_clock().now().to_msg()
                publisher.publish(msg)
                beat += period
                time.sleep(max(0.0, beat - time.perf_counter()))  # pacing the flood at FLOOD_HZ
        end = self.now()
        return self.rate(start + SETTLE_S, end)

    def close(self) -> None:
        self._executor.shutdown(timeout_sec=2.0)
        self._thread.join(timeout=5.0)
        self.node.destroy_node()


def flood_rates(rounds: int = ROUNDS, seconds: float = PHASE_S) -> dict[str, list[float]]:
    """Joint-state rates (Hz) per turn kind (``None`` → ``"none"``), each measured ``rounds`` times."""
    rates: dict[str, list[float]] = {"none": [], **{flood: [] for flood in FLOODS}}
    with tempfile.TemporaryDirectory(prefix="so101_bench_flood_") as folder:
        arm, link, calibration = start_virtual_arm(PROFILE, Path(folder) / "arm")
        try:
            opts = GraphOptions(port=str(link), calibration_file=str(calibration), compensation=False, command_source="motion")
            specs = [spec for spec in deploy_graph(opts) if spec.key in _NODES]
            with ComposedGraph(specs, own_process=set(_NODES)) as graph:
                probe = _Probe(graph.context)
                try:
                    if not wait_for(lambda: probe.pose is not None or graph.node_stopped(), timeout=90.0):
                        raise RuntimeError("no joint states from the driver within 90 s")
                    graph.raise_for_stopped_nodes()
                    for _ in range(rounds):
                        for flood in FLOODS:
                            rates["none"].append(probe.run_turn(None, seconds))
                            rates[flood].append(probe.run_turn(flood, seconds))
                    rates["none"].append(probe.run_turn(None, seconds))
                    graph.raise_for_stopped_nodes()  # a node that died under a flood is a failure, not a figure
                finally:
                    probe.close()
        finally:
            stop_virtual_arm(arm)
    return rates


def benchmarks() -> Iterator[BenchResult]:
    rates = flood_rates()
    baseline = statistics.median(rates["none"])
    for flood in FLOODS:
        value = statistics.median(rates[flood])
        yield BenchResult(f"flood.joint_states_rate_{flood}", value, "Hz", baseline, _BASELINE,
                          target=TARGET_FRACTION * baseline)
