"""Nodes a graph starts first (``subscribed_first``) have their subscriptions on the graph before any other node
starts: a publisher that starts after its subscribers is not held by their joining (Fast DDS held the driver's
joint states for 0.33 s when the web view joined it running)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from so101_bringup.children import ChildProcessFailed
from so101_bringup.composition import ComposedGraph
from so101_bringup.node_specs import NodeSpec
from so101_testing import wait_for

# One module for both nodes (its node name says which). The monitor is slow to subscribe, as the web view is while it
# loads rerun and the meshes: it subscribes only once another node is on the graph (the graph's start-up probe while
# the graph waits for it; without the wait, the publisher). Each writes when (CLOCK_MONOTONIC, the same in every
# process) the publisher started and the monitor's subscription existed.
TEST_NODE = '''
import os, sys, time
from pathlib import Path
import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from std_msgs.msg import Empty

if __name__ == "__main__":
    folder = Path(os.environ["SO101_TEST_FOLDER"])
    rclpy.init(args=sys.argv)
    node = Node("test_node")
    if node.get_name() == "publisher":
        folder.joinpath("started").write_text(repr(time.monotonic()))
        node.create_publisher(Empty, "state", 10)
    else:
        while len(node.get_node_names()) < 2:
            rclpy.spin_once(node, timeout_sec=0.05)
        node.create_subscription(Empty, "state", lambda msg: None, 10)
        folder.joinpath("subscribed").write_text(repr(time.monotonic()))
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
'''

FAILING_MONITOR = '''
import sys
if __name__ == "__main__":
    sys.exit("slow_monitor: no display")
'''


@pytest.fixture
def node_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setenv("SO101_TEST_FOLDER", str(tmp_path))
    (tmp_path / "publisher_node.py").write_text(TEST_NODE)
    (tmp_path / "slow_monitor_node.py").write_text(TEST_NODE)  # its own file: a test replaces it
    return tmp_path


SPECS = [NodeSpec("publisher_node:TestNode", name="publisher"), NodeSpec("slow_monitor_node:TestNode", name="slow_monitor")]


def test_the_nodes_after_a_subscribed_first_node_start_once_it_has_subscribed(node_modules: Path) -> None:
    with ComposedGraph(SPECS, own_process={"publisher", "slow_monitor"}, subscribed_first={"slow_monitor"}):
        assert wait_for(lambda: (node_modules / "started").exists(), timeout=30.0)
    assert float((node_modules / "started").read_text()) > float((node_modules / "subscribed").read_text())


def test_a_subscribed_first_node_that_exits_before_subscribing_stops_the_start_with_its_error(node_modules: Path) -> None:
    (node_modules / "slow_monitor_node.py").write_text(FAILING_MONITOR)
    graph = ComposedGraph(SPECS, own_process={"publisher", "slow_monitor"}, subscribed_first={"slow_monitor"})
    with pytest.raises(ChildProcessFailed, match="no display"):
        graph.start()
    assert not (node_modules / "started").exists()
    assert not graph.running


def test_subscribed_first_names_only_nodes_run_in_their_own_process() -> None:
    with pytest.raises(ValueError, match="subscribed_first names nodes not run in their own process"):
        ComposedGraph(SPECS, own_process={"publisher"}, subscribed_first={"slow_monitor"})

