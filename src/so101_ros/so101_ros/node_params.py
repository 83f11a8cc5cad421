"""Declare a node's parameters from its parameter dataclass (:mod:`so101_common.parameters`).

Every parameter gets a ``ParameterDescriptor`` with its description, its type and, for numbers, its
range (``FloatingPointRange``/``IntegerRange``: ROS refuses values outside it, at start-up from YAML and
at run time). Floats are declared with dynamic typing so ``30`` and ``30.0`` are both accepted.
Imported only by node modules (rclpy).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable
from typing import Any, TypeVar

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType
from rclpy.node import Node
from rclpy.parameter import Parameter

from so101_common.parameters import ParameterSpec, parameter_specs

__all__ = ["descriptor", "declare_parameters", "declare_parameter_values"]

T = TypeVar("T")

_TYPES = {bool: ParameterType.PARAMETER_BOOL, int: ParameterType.PARAMETER_INTEGER,
          float: ParameterType.PARAMETER_DOUBLE, str: ParameterType.PARAMETER_STRING,
          list: ParameterType.PARAMETER_STRING_ARRAY}


def descriptor(spec: ParameterSpec) -> ParameterDescriptor:
    kind = spec.value_type
    result = ParameterDescriptor(name=spec.name, type=_TYPES[kind], description=spec.description)
    if kind is float:
        result.dynamic_typing = True  # an integer in YAML ("rate_hz: 30") is fine
        low = -sys.float_info.max if spec.low is None else float(spec.low)
        high = sys.float_info.max if spec.high is None else float(spec.high)
        if spec.low is not None or spec.high is not None:
            result.floating_point_range = [FloatingPointRange(from_value=low, to_value=high, step=0.0)]
    elif kind is int and (spec.low is not None or spec.high is not None):
        low_i = -(2**63) if spec.low is None else int(spec.low)
        high_i = 2**63 - 1 if spec.high is None else int(spec.high)
        result.integer_range = [IntegerRange(from_value=low_i, to_value=high_i, step=1)]
    return result


def declare_parameters(node: Node, cls: type[T], **default_overrides: Any) -> T:
    """Declare every field of the parameter dataclass ``cls`` on ``node`` and return the values as ``cls``.

    ``default_overrides`` replace a field's default for this node (the leader's port and robot_id)."""
    specs = [dataclasses.replace(spec, default=default_overrides[spec.name]) if spec.name in default_overrides
             else spec for spec in parameter_specs(cls)]
    return cls(**declare_parameter_values(node, specs))


def declare_parameter_values(node: Node, specs: Iterable[ParameterSpec]) -> dict[str, Any]:
    """Declare each spec on ``node`` (with its descriptor) and return the values by name: floats as float,
    lists as list, an optional parameter (default None) that nobody set as None. For a core whose
    config model validates the values itself (``parameter_specs`` of a pydantic model)."""
    values: dict[str, Any] = {}
    for spec in specs:
        # an empty list says nothing about its element type: declare the type instead (unset = empty)
        empty = Parameter.Type.DOUBLE_ARRAY if spec.element is float else Parameter.Type.STRING_ARRAY
        initial = empty if spec.default == [] else spec.default
        value = node.declare_parameter(spec.name, initial, descriptor(spec)).value
        if spec.value_type is float and value is not None:
            value = float(value)
        elif spec.value_type is list:
            value = list(value or [])
        values[spec.name] = value
    return values
