"""Node parameters as a dataclass: one default, one description and one range per parameter (no rclpy).

A node's parameter dataclass is the single source of its defaults; the node declares every field from
it (``so101_ros.node_params.declare_parameters``, with a ``ParameterDescriptor`` carrying the
description and the range), and the YAML files under ``config/`` only set values that differ for a
deployment. Fields are made with :func:`parameter`::

    @dataclass(frozen=True)
    class ArmParameters:
        rate_hz: float = parameter(100.0, "control cycle rate (Hz)", low=1.0, high=1000.0)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["ParameterSpec", "parameter", "parameter_specs", "defaults"]


@dataclass(frozen=True)
class ParameterSpec:
    name: str
    default: Any  # bool, int, float, str or a list of str
    description: str
    low: float | None = None  # inclusive range for numbers (None: unbounded on that side)
    high: float | None = None


def parameter(default: Any, description: str, low: float | None = None, high: float | None = None) -> Any:
    """A dataclass field that is a node parameter (lists are copied per instance)."""
    metadata = {"description": description, "low": low, "high": high}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def parameter_specs(cls: type) -> list[ParameterSpec]:
    """The parameters of a parameter dataclass, in field order; every field must come from :func:`parameter`."""
    specs = []
    for f in dataclasses.fields(cls):
        if "description" not in f.metadata:
            raise TypeError(f"{cls.__name__}.{f.name}: not made with so101_common.parameters.parameter()")
        default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        specs.append(ParameterSpec(f.name, default, f.metadata["description"], f.metadata["low"], f.metadata["high"]))
    return specs


def defaults(cls: type) -> dict[str, Any]:
    return {spec.name: spec.default for spec in parameter_specs(cls)}
