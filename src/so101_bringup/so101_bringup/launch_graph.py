"""A graph of :mod:`so101_bringup.graphs` as a ``launch`` ``LaunchDescription`` (what ``launch/*.launch.py`` return).

Imports ``launch``/``launch_ros`` (a ROS install); nothing else in the workspace needs them. The mapping:

- :class:`~so101_bringup.graphs.Arg` → ``DeclareLaunchArgument(name, default_value=..., description=..., choices=...)``;
- :class:`~so101_bringup.graphs.When` → ``IfCondition(EqualsSubstitution(LaunchConfiguration(arg), value))``
  (``LaunchConfigurationEquals`` is deprecated upstream);
- :class:`~so101_bringup.graphs.LaunchArg` → ``LaunchConfiguration``; :class:`~so101_bringup.graphs.ShareFile` →
  ``PathJoinSubstitution([FindPackageShare(package), *path])``; :class:`~so101_bringup.graphs.FileText` →
  ``ParameterValue(Command(["cat ", path]), value_type=str)``;
- a node → ``launch_ros.actions.Node`` with ``parameters=[<config file>, {overrides}]``; a process →
  ``ExecuteProcess(cmd=[...])``; both with ``output="screen"``.
"""

from __future__ import annotations

from typing import Any

# mypy always searches the working directory, where the workspace's launch/ folder (the launch files) passes for a
# namespace package `launch` without LaunchDescription; where a ROS install provides `launch`, nothing is ignored.
from launch import LaunchDescription  # type: ignore[attr-defined, unused-ignore]
from launch.actions import DeclareLaunchArgument, ExecuteProcess
from launch.conditions import IfCondition
from launch.substitutions import (
    Command,
    EqualsSubstitution,
    LaunchConfiguration,
    PathJoinSubstitution,
)
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from so101_bringup.graphs import PACKAGE, FileText, Graph, LaunchArg, NodeDecl, ShareFile, Value, When

__all__ = ["launch_description"]


def _share_file(file: ShareFile) -> Any:
    return PathJoinSubstitution([FindPackageShare(file.package), *file.path.split("/")])


def _value(value: Value) -> Any:
    if isinstance(value, LaunchArg):
        return LaunchConfiguration(value.name)
    if isinstance(value, ShareFile):
        return _share_file(value)
    if isinstance(value, FileText):
        return ParameterValue(Command(["cat ", _share_file(value.file)]), value_type=str)
    return value


def _condition(when: When | None) -> dict[str, Any]:
    return {} if when is None else {"condition": IfCondition(EqualsSubstitution(LaunchConfiguration(when.arg), when.value))}


def _node(node: NodeDecl) -> Any:
    parameters: list[Any] = []
    if node.params_file:
        parameters.append(_share_file(ShareFile(PACKAGE, f"config/{node.params_file}")))
    if node.overrides:
        parameters.append({key: _value(v) for key, v in node.overrides.items()})
    optional: dict[str, Any] = {}
    if node.name is not None:
        optional["name"] = node.name
    if node.namespace is not None:
        optional["namespace"] = node.namespace
    if parameters:
        optional["parameters"] = parameters
    if node.remaps:
        optional["remappings"] = [(source, _value(target)) for source, target in node.remaps]
    if node.arguments:
        optional["arguments"] = [_value(v) for v in node.arguments]
    return Node(package=node.package, executable=node.executable, output="screen", **optional, **_condition(node.when))


def launch_description(graph: Graph) -> Any:
    """The ``LaunchDescription`` of ``graph``: its arguments, then its processes and nodes in order."""
    entities: list[Any] = []
    for arg in graph.args:
        optional: dict[str, Any] = {}
        if arg.default is not None:
            optional["default_value"] = arg.default if isinstance(arg.default, str) else _share_file(arg.default)
        if arg.choices:
            optional["choices"] = list(arg.choices)
        entities.append(DeclareLaunchArgument(arg.name, description=arg.description, **optional))
    for action in graph.actions:
        if isinstance(action, NodeDecl):
            entities.append(_node(action))
        else:
            entities.append(ExecuteProcess(cmd=[_value(v) for v in action.cmd], output="screen", **_condition(action.when)))
    return LaunchDescription(entities)
