"""The in-process composition (``so101_bringup.composition``): the graph data's in-process nodes, live.

Static: for every combination of the arguments that conditions test, ``deploy_graph``/``teleop_graph``
start exactly the nodes with an rclpy class that the launch file starts (launch evaluated with the fake
``launch`` modules), with the same parameter files, overrides and remappings. Live:
``deploy_graph(compensation=False)`` runs against the virtual SO-101 in a child process, its driver in a
process of its own (as the demo runs it) and the other nodes in this one; this test plays the policy, and the
graph stops cleanly, its driver's process too. A child node that cannot start says why.
"""

from __future__ import annotations

import runpy
from collections.abc import Iterator
from pathlib import Path

import fake_launch
import pytest
import test_deploy_chain as deploy
from test_launch_files import ROOT, _share

from so101_bringup.composition import ComposedGraph
from so101_bringup.graphs import DEPLOY, TELEOP
from so101_bringup.node_specs import GraphOptions, deploy_graph, teleop_graph
from so101_safety.safety_node import SafetyNode

FACTORY_PACKAGES = {"so101_driver", "so101_safety", "so101_gaponet", "so101_policy", "so101_recorder", "so101_bringup"}


def _launched_in_process_nodes(name: str, arguments: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    fake_launch.install(monkeypatch)
    description = runpy.run_path(str(ROOT / "launch" / f"{name}.launch.py"))["generate_launch_description"]()
    return sorted((s[1], s[3], s[5], sorted(s[6].items()), s[7]) for s in fake_launch.evaluate(description, arguments, _share)
                  if s[0] == "node" and s[1] in FACTORY_PACKAGES)


def _composed(specs: list) -> list[tuple]:
    return sorted((s.factory.split(".")[0], s.name, (s.params_file,) if s.params_file else (),
                   sorted(s.overrides.items()), tuple(s.remaps.items())) for s in specs)


@pytest.mark.parametrize("compensation", [True, False])
@pytest.mark.parametrize("record", [True, False])
@pytest.mark.parametrize("source", ["policy", "motion"])
def test_deploy_graph_matches_deploy_launch(compensation: bool, record: bool, source: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    opts = GraphOptions(port="/dev/null", calibration_file="/c.json", compensation=compensation,
                        command_source=source, record=record, policy_path="/p.onnx", motion="wave")
    assert _composed(deploy_graph(opts)) == _launched_in_process_nodes("deploy", opts.arguments(DEPLOY), monkeypatch)


def test_a_virtual_arm_gets_lerobots_servo_settings_a_real_one_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The virtual SO-101's servos boot with factory settings (P 32, no acceleration ramp), not the LeRobot
    settings its gap profile was fitted with and the compensator harness runs: the driver configures them."""
    def driver(arguments: dict[str, str]) -> dict:
        fake_launch.install(monkeypatch)
        description = runpy.run_path(str(ROOT / "launch" / "deploy.launch.py"))["generate_launch_description"]()
        return next(s[6] for s in fake_launch.evaluate(description, arguments, _share) if s[0] == "node" and s[2] == "driver")

    assert driver({"hardware": "virtual"})["configure_servos"] is True
    assert driver({"hardware": "real"})["configure_servos"] is True
    assert driver({"hardware": "real", "configure_servos": "false"})["configure_servos"] is False
    composed = {s.name: s for s in deploy_graph(GraphOptions(port="/tmp/virtual_arm", configure_servos=True))}
    assert composed["so101_driver"].overrides["configure_servos"] is True
    assert deploy_graph(GraphOptions(port="/dev/ttyACM0", configure_servos=False))[0].overrides["configure_servos"] is False


@pytest.mark.parametrize("record", [True, False])
def test_teleop_graph_matches_teleop_launch(record: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    opts = GraphOptions(port="/dev/null", leader_port="/dev/zero", record=record, task="pick")
    assert _composed(teleop_graph(opts)) == _launched_in_process_nodes("teleop", opts.arguments(TELEOP), monkeypatch)


@pytest.fixture(scope="module")
def uncompensated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ComposedGraph, deploy.PolicyProbe]]:
    arm, link, calibration = deploy.start_virtual_arm(tmp_path_factory.mktemp("composition"))
    graph = probe = None
    try:
        opts = GraphOptions(port=str(link), calibration_file=str(calibration), compensation=False,
                            command_source="motion", autostart_motion=False)  # the motion player stays silent: this test is the policy
        graph = ComposedGraph(deploy_graph(opts), own_process={"so101_driver"}).start()
        probe = deploy.PolicyProbe()
        assert deploy.wait_for(lambda: probe.measured is not None and bool(probe.safety_status),
                               timeout=deploy.STARTUP_TIMEOUT), f"no joint states:\n{arm.output()}"
        yield graph, probe
    finally:
        if probe is not None:
            probe.close()
        if graph is not None:
            graph.stop()
        arm.stop()


def test_composed_graph_has_the_deploy_nodes(uncompensated: tuple[ComposedGraph, deploy.PolicyProbe]) -> None:
    graph, _ = uncompensated
    assert set(graph.nodes) == {"motion_player", "safety_filter"}  # by node name
    assert isinstance(graph.node("safety_filter", SafetyNode), SafetyNode)
    with pytest.raises(TypeError, match="'motion_player' is a MotionPlayerNode, not a SafetyNode"):
        graph.node("motion_player", SafetyNode)
    with pytest.raises(KeyError, match="'so101_driver' runs in its own process"):
        graph.node("so101_driver", SafetyNode)
    assert set(graph.children) == {"so101_driver"} and graph.children["so101_driver"].poll() is None
    graph.raise_for_stopped_nodes()  # running: nothing to report
    # what the child was given: its parameter file's value, and the graph's override
    assert graph.parameter("so101_driver", "rate_hz") == 100.0
    assert graph.parameter("so101_driver", "port") == next(s for s in graph.specs if s.key == "so101_driver").overrides["port"]


def test_policy_straight_into_safety_without_compensation(
        uncompensated: tuple[ComposedGraph, deploy.PolicyProbe]) -> None:
    _, probe = uncompensated
    deploy.follow(probe, deploy.SAFE_POSE)
    deploy.settle(probe)
    last = probe.commands_since(probe.command_count() - 1)[0]
    assert last == pytest.approx(deploy.SAFE_POSE, abs=1e-9)  # no compensator: the command passes unchanged


def test_composed_graph_stops_cleanly(uncompensated: tuple[ComposedGraph, deploy.PolicyProbe]) -> None:
    graph, _ = uncompensated
    driver = graph.children["so101_driver"]
    graph.stop()
    assert not graph.context.ok() and not graph.nodes and not graph.children
    assert not graph.running
    assert driver.returncode == 0  # shut down by its Ctrl-C, not killed


def test_a_node_in_its_own_process_that_cannot_start_says_why(tmp_path: Path) -> None:
    from so101_bringup.children import ChildProcessFailed

    specs = deploy_graph(GraphOptions(port=str(tmp_path / "no_such_port"), compensation=False, autostart_motion=False))
    with pytest.raises(ValueError, match="does not have"):
        ComposedGraph(specs, own_process={"Driver"})
    with pytest.raises(ValueError, match=r"low_priority names nodes not run in their own process: \['safety_filter'\]"):
        ComposedGraph(specs, own_process={"so101_driver"}, low_priority={"safety_filter"})
    graph = ComposedGraph([s for s in specs if s.key == "so101_driver"], own_process={"so101_driver"}).start()
    try:
        assert deploy.wait_for(lambda: graph.children["so101_driver"].poll() is not None, timeout=deploy.STARTUP_TIMEOUT)
        with pytest.raises(ChildProcessFailed, match=r"^node so101_driver: no LeRobot calibration for robot_id .*no_such_port"):
            graph.raise_for_stopped_nodes()
    finally:
        graph.stop()


def test_a_node_in_its_own_process_stops_when_its_parent_is_killed(tmp_path: Path) -> None:
    """A driver must not outlive a killed demo: it would hold the arm's port and its last command."""
    import os
    import signal
    import subprocess
    import sys

    arm, link, calibration = deploy.start_virtual_arm(tmp_path)
    parent = None
    try:
        script = ("import sys\n"
                  "from so101_bringup.composition import ComposedGraph\n"
                  "from so101_bringup.node_specs import GraphOptions, robot_graph\n"
                  f"graph = ComposedGraph(robot_graph(GraphOptions(port={str(link)!r}, calibration_file={str(calibration)!r})),\n"
                  "                      own_process={'so101_driver'}).start()\n"
                  "print(graph.children['so101_driver'].pid, flush=True)\n"
                  "sys.stdin.read()\n")
        parent = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        assert parent.stdout is not None
        driver = int(parent.stdout.readline())

        def running(pid: int) -> bool:
            try:
                return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            except OSError:
                return False

        assert running(driver)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert deploy.wait_for(lambda: not running(driver), timeout=deploy.STARTUP_TIMEOUT), "the driver outlived its parent"
    finally:
        if parent is not None and parent.poll() is None:
            parent.kill()
        arm.stop()
