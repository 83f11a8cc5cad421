"""A stand-in for the ``launch`` and ``launch_ros`` modules (not installable here), built from their upstream
definitions: the classes the graph launch files use, with upstream's constructor signatures, recording what
they are given, and an evaluator that performs the substitutions and conditions the way upstream does
(``EqualsSubstitution``: booleans, then numbers, then text; ``IfCondition``: ``true``/``1``/``false``/``0``;
``launch_ros`` parameters from substitutions typed by YAML).

``install(monkeypatch)`` puts the fakes into ``sys.modules``; ``evaluate(description, arguments, share)``
returns what a launch would start, as plain tuples.
"""

from __future__ import annotations

import math
import os
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

import yaml


class Context:
    def __init__(self, configurations: dict[str, str], share: Callable[[str], str]) -> None:
        self.configurations = configurations
        self.share = share


class Substitution:
    def perform(self, context: Context) -> str:
        raise NotImplementedError


def perform(value: Any, context: Context) -> str:
    """``perform_substitutions`` for a substitution, a text, or a list of both (concatenated)."""
    if isinstance(value, Substitution):
        return value.perform(context)
    if isinstance(value, list | tuple):
        return "".join(perform(v, context) for v in value)
    return str(value)


class LaunchConfiguration(Substitution):
    def __init__(self, variable_name: Any, *, default: Any = None) -> None:
        self.variable_name, self.default = variable_name, default

    def perform(self, context: Context) -> str:
        return context.configurations[self.variable_name]


class PathJoinSubstitution(Substitution):
    def __init__(self, substitutions: Any) -> None:
        self.substitutions = list(substitutions)

    def perform(self, context: Context) -> str:
        return os.path.join(*(perform(s, context) for s in self.substitutions))


class Command(Substitution):
    def __init__(self, command: Any, *, on_stderr: str = "fail") -> None:
        self.command, self.on_stderr = command, on_stderr

    def perform(self, context: Context) -> str:
        words = perform(self.command, context).split()
        assert words[0] == "cat" and len(words) == 2, f"the fake runs only 'cat FILE', got {words}"
        with open(words[1], encoding="utf-8") as f:
            return f.read()


class EqualsSubstitution(Substitution):
    def __init__(self, left: Any, right: Any) -> None:
        self.left, self.right = left, right

    def perform(self, context: Context) -> str:
        left, right = perform(self.left, context), perform(self.right, context)
        words = ("true", "false", "1", "0")
        if left.lower() in words and right.lower() in words:
            return str((left.lower() in ("true", "1")) == (right.lower() in ("true", "1"))).lower()
        try:
            return str(math.isclose(float(left), float(right))).lower()
        except ValueError:
            return str(left == right).lower()


class FindPackageShare(Substitution):
    def __init__(self, package: Any) -> None:
        self.package = package

    def perform(self, context: Context) -> str:
        return context.share(perform(self.package, context))


class IfCondition:
    def __init__(self, predicate_expression: Any) -> None:
        self.predicate_expression = predicate_expression

    def evaluate(self, context: Context) -> bool:
        text = perform(self.predicate_expression, context).lower()
        if text not in ("true", "1", "false", "0"):
            raise ValueError(f"IfCondition: {text!r} is not a boolean")
        return text in ("true", "1")


class ParameterValue:
    def __init__(self, value: Any, *, value_type: Any = None) -> None:
        self.value, self.value_type = value, value_type


class Action:
    def __init__(self, *, condition: Any = None) -> None:
        self.condition = condition


class DeclareLaunchArgument(Action):
    def __init__(self, name: str, *, default_value: Any = None, description: str | None = None,
                 choices: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.name, self.default_value, self.description, self.choices = name, default_value, description, choices


class ExecuteProcess(Action):
    def __init__(self, *, cmd: Any, name: Any = None, cwd: Any = None, env: Any = None, additional_env: Any = None,
                 shell: bool = False, output: str = "log", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cmd, self.output = cmd, output


class Node(ExecuteProcess):
    def __init__(self, *, executable: Any, package: Any = None, name: Any = None, namespace: Any = None,
                 exec_name: Any = None, parameters: Any = None, remappings: Any = None, ros_arguments: Any = None,
                 arguments: Any = None, **kwargs: Any) -> None:
        super().__init__(cmd=[package, executable], **kwargs)
        self.package, self.executable, self.name, self.namespace = package, executable, name, namespace
        self.parameters, self.remappings, self.arguments = parameters, remappings, arguments


class LaunchDescription:
    def __init__(self, initial_entities: list[Any] | None = None, *, deprecated_reason: str | None = None) -> None:
        self.entities = list(initial_entities or [])


def _parameter(value: Any, context: Context) -> Any:
    """launch_ros: a value made of substitutions is performed and typed as YAML; plain values stay."""
    if isinstance(value, ParameterValue):
        return perform(value.value, context)  # value_type=str: the text as it is
    if isinstance(value, Substitution | list | tuple):
        text = perform(value, context)
        typed = yaml.safe_load(text) if text else ""
        return text if typed is None or isinstance(typed, dict | list) else typed
    return value


def evaluate(description: LaunchDescription, arguments: Mapping[str, str], share: Callable[[str], str]) -> list[tuple]:
    """What launching ``description`` with ``arguments`` starts: ``("process", cmd)`` and
    ``("node", package, executable, name, namespace, params_files, overrides, remaps, arguments)``."""
    context = Context({}, share)
    started: list[tuple] = []
    for entity in description.entities:
        if isinstance(entity, DeclareLaunchArgument):
            value = arguments.get(entity.name)
            if value is None:
                assert entity.default_value is not None, f"{entity.name} is required"
                value = perform(entity.default_value, context)
            assert not entity.choices or value in entity.choices, f"{entity.name}:={value} not in {entity.choices}"
            context.configurations[entity.name] = value
            continue
        if entity.condition is not None and not entity.condition.evaluate(context):
            continue
        if isinstance(entity, Node):
            files, overrides = [], {}
            for item in entity.parameters or []:
                if isinstance(item, dict):
                    overrides.update({k: _parameter(v, context) for k, v in item.items()})
                else:
                    files.append(perform(item, context))
            remaps = tuple((perform(a, context), perform(b, context)) for a, b in entity.remappings or [])
            started.append(("node", entity.package, entity.executable, entity.name, entity.namespace, tuple(files),
                            overrides, remaps, tuple(perform(a, context) for a in entity.arguments or [])))
        else:
            started.append(("process", tuple(perform(c, context) for c in entity.cmd)))
    return started


def install(monkeypatch: Any) -> None:
    """Put the fake ``launch``/``launch_ros`` modules into ``sys.modules`` for one test."""
    modules: dict[str, dict[str, object]] = {
        "launch": {"LaunchDescription": LaunchDescription},
        "launch.actions": {"DeclareLaunchArgument": DeclareLaunchArgument, "ExecuteProcess": ExecuteProcess},
        "launch.conditions": {"IfCondition": IfCondition},
        "launch.substitutions": {"Command": Command, "EqualsSubstitution": EqualsSubstitution,
                                 "LaunchConfiguration": LaunchConfiguration,
                                 "PathJoinSubstitution": PathJoinSubstitution},
        "launch_ros": {},
        "launch_ros.actions": {"Node": Node},
        "launch_ros.parameter_descriptions": {"ParameterValue": ParameterValue},
        "launch_ros.substitutions": {"FindPackageShare": FindPackageShare},
    }
    for name, members in modules.items():
        module = types.ModuleType(name)
        module.__dict__.update(members)
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delitem(sys.modules, "so101_bringup.launch_graph", raising=False)
