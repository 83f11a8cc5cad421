"""The launch files cannot run here (no `launch`/`launch_ros`), so check what they refer to:
every workspace executable exists as a console script, every config file exists and is a
``/**: ros__parameters:`` YAML, and every ``so101`` subcommand they start exists.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from so101_bringup.cli import SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[1]
LAUNCH_FILES = sorted((ROOT / "launch").glob("*.launch.py"))
EXTERNAL_PACKAGES = {"robot_state_publisher", "rviz2", "tf2_ros"}


def _console_scripts(package: str) -> set[str]:
    tree = ast.parse((ROOT / "src" / package / "setup.py").read_text())
    scripts: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and " = " in node.value:
            scripts.add(node.value.split(" = ")[0].strip())
    return scripts


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    def called(func: ast.expr) -> str | None:
        return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None

    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and called(n.func) == name]


def _keyword(call: ast.Call, key: str) -> object:
    for kw in call.keywords:
        if kw.arg == key and isinstance(kw.value, ast.Constant):
            return kw.value.value
    return None


def test_launch_files_exist() -> None:
    names = {p.name for p in LAUNCH_FILES}
    assert {"robot.launch.py", "teleop.launch.py", "deploy.launch.py", "monitor.launch.py"} <= names


@pytest.mark.parametrize("launch_file", LAUNCH_FILES, ids=lambda p: p.name)
def test_nodes_name_real_executables(launch_file: Path) -> None:
    tree = ast.parse(launch_file.read_text())
    nodes = _calls(tree, "Node")
    assert nodes, "a launch file without nodes"
    for call in nodes:
        package, executable = _keyword(call, "package"), _keyword(call, "executable")
        if package in EXTERNAL_PACKAGES:
            continue
        assert (ROOT / "src" / str(package)).is_dir(), f"{launch_file.name}: unknown package {package}"
        assert executable in _console_scripts(str(package)), f"{launch_file.name}: {package} has no {executable}"


@pytest.mark.parametrize("launch_file", LAUNCH_FILES, ids=lambda p: p.name)
def test_config_files_are_ros_parameter_yaml(launch_file: Path) -> None:
    referenced = 0
    for call in _calls(ast.parse(launch_file.read_text()), "join"):
        # os.path.join(CONFIG, "<file>.yaml"), CONFIG being the launch file's path to config/
        first, last = (call.args[0], call.args[-1]) if len(call.args) == 2 else (None, None)
        if isinstance(first, ast.Name) and first.id == "CONFIG" and isinstance(last, ast.Constant):
            path = ROOT / "config" / str(last.value)
            assert path.is_file(), f"{launch_file.name} needs {path}"
            document = yaml.safe_load(path.read_text())
            assert "ros__parameters" in document["/**"], f"{path} is not in the /**: ros__parameters: layout"
            referenced += 1
    if _calls(ast.parse(launch_file.read_text()), "Node") and launch_file.name != "monitor.launch.py":
        assert referenced, f"{launch_file.name} passes no YAML parameters"


@pytest.mark.parametrize("launch_file", LAUNCH_FILES, ids=lambda p: p.name)
def test_so101_subcommands_exist(launch_file: Path) -> None:
    known = {c.name for c in SUBCOMMANDS}
    for call in _calls(ast.parse(launch_file.read_text()), "ExecuteProcess"):
        for kw in call.keywords:
            if kw.arg == "cmd" and isinstance(kw.value, ast.List):
                words = [e.value for e in kw.value.elts if isinstance(e, ast.Constant)]
                if words and words[0] == "so101":
                    assert words[1] in known
