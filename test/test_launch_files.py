"""The launch files against the graph data they are derived from (``so101_bringup.graphs``).

``launch``/``launch_ros`` are not installed here, so each ``launch/*.launch.py`` runs against a fake of
those modules built from their upstream definitions (``fake_launch``): the test records what the launch
description constructs, performs its substitutions and conditions for every combination of the
arguments that conditions test, and checks the result equals the graph resolved for the same arguments
(nodes, executables, node names, parameter files, parameter overrides, remappings, processes). The
graph data itself is checked against the workspace: every executable is a console script, every
parameter file a ``/**: ros__parameters:`` YAML, every ``so101`` subcommand exists.
"""

from __future__ import annotations

import ast
import itertools
import runpy
from pathlib import Path

import fake_launch
import pytest
import yaml

from so101_apps.cli import SUBCOMMANDS
from so101_bringup.graphs import GRAPHS, Graph, NodeDecl, ProcessDecl, ResolvedNode, resolve
from so101_description.paths import package_dir

ROOT = Path(__file__).resolve().parents[1]
EXTERNAL_PACKAGES = {"robot_state_publisher", "rviz2", "tf2_ros"}


def _share(package: str) -> str:
    """Share folders as this checkout holds them (so101_bringup: the root; so101_description: its package)."""
    return {"so101_bringup": str(ROOT), "so101_description": str(package_dir())}.get(package, f"/share/{package}")


def _combinations(graph: Graph) -> list[dict[str, str]]:
    tested = sorted({a.when.arg for a in graph.actions if a.when is not None})
    choices = [graph.arg(name).choices or (str(graph.arg(name).default),) for name in tested]
    return [dict(zip(tested, values, strict=True)) for values in itertools.product(*choices)]


def _expected(graph: Graph, arguments: dict[str, str]) -> list[tuple]:
    started: list[tuple] = []
    for action in resolve(graph, arguments, _share):
        if isinstance(action, ResolvedNode):
            files = (action.params_file,) if action.params_file else ()
            started.append(("node", action.package, action.executable, action.name, action.namespace, files,
                            action.overrides, action.remaps, action.arguments))
        else:
            started.append(("process", action.cmd))
    return started


def _launch(graph: Graph, monkeypatch: pytest.MonkeyPatch) -> fake_launch.LaunchDescription:
    fake_launch.install(monkeypatch)
    module = runpy.run_path(str(ROOT / "launch" / f"{graph.name}.launch.py"))
    return module["generate_launch_description"]()


def test_every_launch_file_is_a_graph() -> None:
    assert {p.name.removesuffix(".launch.py") for p in (ROOT / "launch").glob("*.launch.py")} == set(GRAPHS)


@pytest.mark.parametrize("graph", GRAPHS.values(), ids=lambda g: g.name)
def test_launch_file_starts_what_the_graph_says(graph: Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    description = _launch(graph, monkeypatch)
    combinations = _combinations(graph)
    assert len(combinations) >= 1
    for arguments in combinations:
        started = fake_launch.evaluate(description, arguments, _share)
        assert started == _expected(graph, arguments), arguments


def test_deploy_overrides_and_remappings_reach_the_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Known answers for one case: the values a user gives on the command line arrive in the nodes."""
    description = _launch(GRAPHS["deploy"], monkeypatch)
    started = fake_launch.evaluate(description, {"hardware": "real", "port": "/dev/ttyACM0", "compensation": "false",
                                                 "policy_path": "/p/model.onnx", "record": "true",
                                                 "calibration_file": "/c.json"}, _share)
    nodes = {s[2]: s for s in started if s[0] == "node"}
    assert [s for s in started if s[0] == "process"] == []  # real hardware: no virtual bus
    assert set(nodes) == {"driver", "robot_state_publisher", "policy", "safety_filter", "recorder"}
    assert nodes["driver"][6]["port"] == "/dev/ttyACM0" and nodes["driver"][6]["calibration_file"] == "/c.json"
    assert nodes["driver"][5] == (str(ROOT / "config" / "driver.yaml"),)
    assert nodes["policy"][6] == {"policy_path": "/p/model.onnx"}
    assert nodes["safety_filter"][7] == (("input", "policy/joint_command"), ("output", "joint_command"))
    assert nodes["recorder"][6]["task"] == "deploy"


def test_the_twin_runs_in_the_monitor_graph_and_on_request_in_deploy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Known answers: the monitor graph runs the gap twin on the policy's commands (remappable), deploy only
    with twin:=true, each with the band file and sim-delta model the user gives."""
    def twins(graph: str, arguments: dict[str, str]) -> list[tuple]:
        started = fake_launch.evaluate(_launch(GRAPHS[graph], monkeypatch), arguments, _share)
        return [s for s in started if s[0] == "node" and s[1:3] == ("so101_sim2real", "twin")]

    (monitor,) = twins("monitor", {"twin_band_file": "/b.yaml"})
    assert monitor[3] == "twin" and monitor[6]["band_file"] == "/b.yaml" and monitor[6]["sim_delta_model"] == ""
    assert monitor[7] == (("policy/joint_command", "policy/joint_command"),)
    (remapped,) = twins("monitor", {"twin_command_topic": "joint_command"})
    assert remapped[7] == (("policy/joint_command", "joint_command"),)
    assert twins("deploy", {"hardware": "real"}) == []
    (deploy,) = twins("deploy", {"hardware": "real", "twin": "true", "twin_sim_delta_model": "/m.onnx"})
    assert deploy[6]["sim_delta_model"] == "/m.onnx"


def test_launch_conditions_use_no_deprecated_class() -> None:
    source = (ROOT / "src" / "so101_bringup" / "so101_bringup" / "launch_graph.py").read_text()
    assert "LaunchConfigurationEquals" not in {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}


def _console_scripts(package: str) -> set[str]:
    tree = ast.parse((ROOT / "src" / package / "setup.py").read_text())
    return {node.value.split(" = ")[0].strip() for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and " = " in node.value}


@pytest.mark.parametrize("graph", GRAPHS.values(), ids=lambda g: g.name)
def test_graph_nodes_name_real_executables_and_parameter_files(graph: Graph) -> None:
    for action in graph.actions:
        if isinstance(action, ProcessDecl):
            words = [w for w in action.cmd if isinstance(w, str)]
            assert words[0] == "so101" and words[1] in {c.name for c in SUBCOMMANDS}
            continue
        assert isinstance(action, NodeDecl)
        if action.package in EXTERNAL_PACKAGES:
            assert action.factory is None
            continue
        assert action.executable in _console_scripts(action.package), f"{action.package} has no {action.executable}"
        assert action.factory is not None and action.factory.split(".")[0] == action.package
        if action.params_file:
            document = yaml.safe_load((ROOT / "config" / action.params_file).read_text())
            assert "ros__parameters" in document["/**"], f"{action.params_file}: not /**: ros__parameters:"
