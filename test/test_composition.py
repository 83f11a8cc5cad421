"""The in-process composition (``so101_bringup.composition``) against the launch files and a live arm.

Static: the packages, YAML files and remappings of ``deploy_graph``/``teleop_graph`` agree with what
``launch/deploy.launch.py`` and ``launch/teleop.launch.py`` start (parsed with ``ast``; ``launch``
itself is not installed). Live: ``deploy_graph(compensation=False)`` runs in this process against the
virtual SO-101 in a child process, this test plays the policy, and the graph stops cleanly.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import test_deploy_chain as deploy

from so101_bringup.composition import ComposedGraph, GraphOptions, NodeSpec, deploy_graph, teleop_graph

ROOT = Path(__file__).resolve().parents[1]


def _launch_nodes(name: str) -> list[dict[str, object]]:
    """Workspace nodes of a launch file: package, YAML files, remappings, condition text."""
    source = (ROOT / "launch" / name).read_text()
    nodes = []
    for call in ast.walk(ast.parse(source)):
        if not (isinstance(call, ast.Call) and getattr(call.func, "id", None) == "Node"):
            continue
        kw: dict[str | None, Any] = {k.arg: k.value for k in call.keywords}
        package = kw["package"].value if isinstance(kw.get("package"), ast.Constant) else None
        if package is None or not package.startswith("so101_"):
            continue
        yamls = sorted(str(c.value) for c in ast.walk(kw.get("parameters", ast.List(elts=[])))
                       if isinstance(c, ast.Constant) and str(c.value).endswith(".yaml"))
        if isinstance(kw.get("parameters"), ast.Name):  # safety_params = [os.path.join(CONFIG, "safety.yaml")]
            yamls = ["safety.yaml"]
        remaps = {}
        if isinstance(kw.get("remappings"), ast.List):
            remaps = {t.elts[0].value: t.elts[1].value for t in kw["remappings"].elts}
        condition = ast.unparse(kw["condition"]) if "condition" in kw else ""
        nodes.append({"package": package, "yamls": yamls, "remaps": remaps, "condition": condition})
    return nodes


def _spec_view(spec: NodeSpec) -> tuple[str, list[str], dict[str, str]]:
    return spec.factory.split(".")[0], [spec.params_file] if spec.params_file else [], dict(spec.remaps)


def _launch_view(node: dict[str, object]) -> tuple[str, list[str], dict[str, str]]:
    return node["package"], node["yamls"], node["remaps"]  # type: ignore[return-value]


def _applies(node: dict[str, object], compensation: bool, record: bool) -> bool:
    condition = str(node["condition"])
    if "compensation" in condition:
        return compensation == condition.startswith("IfCondition")
    if "record" in condition:
        return record
    return True


@pytest.mark.parametrize("compensation", [True, False])
@pytest.mark.parametrize("record", [True, False])
def test_deploy_graph_matches_deploy_launch(compensation: bool, record: bool) -> None:
    launch = [_launch_view(n) for n in _launch_nodes("deploy.launch.py") if _applies(n, compensation, record)]
    launch.insert(0, ("so101_driver", ["driver.yaml"], {}))  # robot.launch.py, included
    specs = deploy_graph(GraphOptions(port="/dev/null", compensation=compensation, command_source="policy",
                                      record=record))
    assert sorted(map(str, map(_spec_view, specs))) == sorted(map(str, launch))


@pytest.mark.parametrize("record", [True, False])
def test_teleop_graph_matches_teleop_launch(record: bool) -> None:
    launch = [_launch_view(n) for n in _launch_nodes("teleop.launch.py") if _applies(n, True, record)]
    launch.insert(0, ("so101_driver", ["driver.yaml"], {}))
    specs = teleop_graph(GraphOptions(port="/dev/null", leader_port="/dev/null", record=record))
    assert sorted(map(str, map(_spec_view, specs))) == sorted(map(str, launch))


@pytest.fixture(scope="module")
def uncompensated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ComposedGraph, deploy.PolicyProbe]]:
    arm, link, calibration = deploy.start_virtual_arm(tmp_path_factory.mktemp("composition"))
    graph = probe = None
    try:
        opts = GraphOptions(port=str(link), calibration_file=str(calibration), compensation=False,
                            autostart_motion=False)  # the motion player stays silent: this test is the policy
        graph = ComposedGraph(deploy_graph(opts)).start()
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
    assert set(graph.nodes) == {"DriverNode", "MotionPlayerNode", "SafetyNode"}


def test_policy_straight_into_safety_without_compensation(
        uncompensated: tuple[ComposedGraph, deploy.PolicyProbe]) -> None:
    _, probe = uncompensated
    deploy.follow(probe, deploy.SAFE_POSE)
    deploy.settle(probe)
    last = probe.commands_since(probe.command_count() - 1)[0]
    assert last == pytest.approx(deploy.SAFE_POSE, abs=1e-9)  # no compensator: the command passes unchanged


def test_composed_graph_stops_cleanly(uncompensated: tuple[ComposedGraph, deploy.PolicyProbe]) -> None:
    graph, _ = uncompensated
    graph.stop()
    assert not graph.context.ok() and not graph.nodes
    assert not graph.running
