"""Teleoperation over real DDS: a virtual leader arm (torque off, moved by a scripted "hand") and a
virtual follower, each serving the Feetech protocol in its own process; the leader node, safety
filter and driver composed in this process exactly as ``launch/teleop.launch.py`` wires them.
The follower must track the leader.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState

from so101_bringup.composition import ComposedGraph
from so101_bringup.node_specs import GraphOptions, teleop_graph
from so101_common.joints import JOINT_NAMES, reorder
from so101_testing import NodeProcess, wait_for

STARTUP_TIMEOUT = 90.0  # s: several interpreters importing rclpy/mujoco on a loaded 2-core machine
LAG_ALLOWANCE = 0.5  # s: leader read → safety ramp → driver → servo, generous for a loaded machine


def _virtual_bus(folder: Path, role: str) -> tuple[NodeProcess, Path]:
    link = folder / f"so101_{role}"
    arm = NodeProcess("so101_apps.cli", ["virtual-bus", "--link", str(link), "--role", role,
                                            "--profile", "ideal"]).start()
    if not (wait_for(lambda: link.exists() or not arm.alive(), timeout=STARTUP_TIMEOUT) and arm.alive()):
        arm.stop()
        pytest.fail(f"virtual {role} did not start:\n{arm.output()}")
    return arm, link


class Watcher:
    """Time-stamped leader and follower positions as this process receives them."""

    def __init__(self) -> None:
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("teleop_watcher", context=self.context)
        self.lock = threading.Lock()
        self.leader: list[tuple[float, list[float]]] = []
        self.follower: list[tuple[float, list[float]]] = []
        self.node.create_subscription(JointState, "/leader/joint_states", lambda m: self._store(m, self.leader), 50)
        self.node.create_subscription(JointState, "/joint_states", lambda m: self._store(m, self.follower), 50)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self.executor.spin, daemon=True)
        self._thread.start()

    def _store(self, msg: JointState, into: list[tuple[float, list[float]]]) -> None:
        with self.lock:
            into.append((time.monotonic(), reorder(msg.name, msg.position)))

    def series(self, which: str) -> tuple[np.ndarray, np.ndarray]:
        with self.lock:
            samples = list(self.leader if which == "leader" else self.follower)
        return np.array([t for t, _ in samples]), np.array([p for _, p in samples]).reshape(-1, len(JOINT_NAMES))

    def close(self) -> None:
        self.executor.shutdown()
        self._thread.join(timeout=5.0)
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


@pytest.fixture(scope="module")
def teleop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watcher]:
    folder = tmp_path_factory.mktemp("teleop")
    NodeProcess("so101_apps.cli", ["virtual-bus", "--write-calibration", str(folder)]).start().process.wait(120)
    processes: list[NodeProcess] = []
    graph = watcher = None
    try:
        for role in ("follower", "leader"):
            processes.append(_virtual_bus(folder, role)[0])
        opts = GraphOptions(port=str(folder / "so101_follower"),
                            calibration_file=str(folder / "virtual_follower.json"),
                            leader_port=str(folder / "so101_leader"),
                            leader_calibration_file=str(folder / "virtual_leader.json"))
        graph = ComposedGraph(teleop_graph(opts)).start()
        watcher = Watcher()
        yield watcher
    finally:
        if watcher is not None:
            watcher.close()
        if graph is not None:
            graph.stop()
        for process in processes:
            process.stop()


def test_follower_tracks_the_leader(teleop: Watcher) -> None:
    # Wait until the leader has moved visibly and the follower has had time to follow.
    def leader_moved() -> bool:
        _, leader = teleop.series("leader")
        return len(leader) > 50 and float(np.ptp(leader, axis=0).max()) > 0.2

    assert wait_for(leader_moved, timeout=STARTUP_TIMEOUT), "the virtual leader never moved"
    # ... then until the follower's joint states cover another 4 s (a window of data, not a fixed sleep)
    mark = teleop.series("follower")[0]
    since = float(mark[-1]) if len(mark) else 0.0
    assert wait_for(lambda: len(t := teleop.series("follower")[0]) > 0 and float(t[-1]) - since >= 4.0,
                    timeout=STARTUP_TIMEOUT), "the follower stopped publishing"
    t_leader, leader = teleop.series("leader")
    t_follower, follower = teleop.series("follower")
    assert len(follower) > 50, "no follower joint states"
    # Compare the follower's last seconds with the leader's pose at any time in the lag window before:
    # the error is the smallest over plausible lags, per sample.
    recent = t_follower > t_follower[-1] - 3.0
    errors = []
    for t, position in zip(t_follower[recent], follower[recent], strict=True):
        window = (t_leader >= t - LAG_ALLOWANCE) & (t_leader <= t)
        if window.any():
            errors.append(np.abs(leader[window] - position).max(axis=1).min())
    assert errors, "leader and follower samples never overlapped"
    assert float(np.median(errors)) < 0.1, f"follower does not track the leader: median error {np.median(errors):.3f} rad"
