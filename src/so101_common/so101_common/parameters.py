"""Node parameters as a dataclass: one default, one description and one range per parameter (no rclpy).

A node's parameter dataclass is the single source of its defaults; the node declares every field from
it (``so101_ros.node_params.declare_parameters``, with a ``ParameterDescriptor`` carrying the
description and the range), and the YAML files under ``config/`` only set values that differ for a
deployment. Fields are made with :func:`parameter`::

    @dataclass(frozen=True)
    class ArmParameters:
        rate_hz: float = parameter(100.0, "control cycle rate (Hz)", low=1.0, high=1000.0)

A pydantic config model (the safety filter's ``SafetyConfig``) is the same kind of source: each field's
``description`` and its ``ge``/``gt``/``le``/``lt`` bounds give the description and the range, so a core
whose configuration is a validated model does not repeat its defaults in a dataclass.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

__all__ = ["ParameterSpec", "parameter", "parameter_specs", "defaults"]


@dataclass(frozen=True)
class ParameterSpec:
    name: str
    default: Any  # bool, int, float, str or a list of str
    description: str
    low: float | None = None  # inclusive range for numbers (None: unbounded on that side)
    high: float | None = None
    kind: type | None = None  # the value's type where the default is None (optional: unset unless given)
    element: type | None = None  # element type of a list whose default is empty (None: str)

    @property
    def value_type(self) -> type:
        return self.kind if self.kind is not None else type(self.default)


def parameter(default: Any, description: str, low: float | None = None, high: float | None = None,
              kind: type | None = None) -> Any:
    """A dataclass field that is a node parameter (lists are copied per instance); ``kind``: the element
    type of a list parameter whose default is empty (``float`` for a list of numbers; str otherwise)."""
    metadata = {"description": description, "low": low, "high": high, "kind": kind}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def parameter_specs(cls: type, prefix: str = "", exclude: Collection[str] = ()) -> list[ParameterSpec]:
    """The parameters of a parameter dataclass (every field made with :func:`parameter`) or of a pydantic
    model (every field described), in field order, named ``prefix + field``; ``exclude`` names fields the
    caller declares itself (a mapping of nested models)."""
    if issubclass(cls, BaseModel):
        return [_model_spec(cls, name, prefix) for name in cls.model_fields if name not in exclude]
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__}: neither a parameter dataclass nor a pydantic model")
    specs = []
    for f in dataclasses.fields(cls):
        if f.name in exclude:
            continue
        if "description" not in f.metadata:
            raise TypeError(f"{cls.__name__}.{f.name}: not made with so101_common.parameters.parameter()")
        default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        specs.append(ParameterSpec(prefix + f.name, default, f.metadata["description"], f.metadata["low"], f.metadata["high"],
                                   element=f.metadata.get("kind")))
    return specs


def _model_spec(model: type[BaseModel], name: str, prefix: str) -> ParameterSpec:
    info = model.model_fields[name]
    kind = _scalar_type(info.annotation)
    if kind is None or not info.description:
        raise TypeError(f"{model.__name__}.{name}: a node parameter needs a description and a bool, int, float "
                        f"or str type (got {info.annotation!r}); exclude it and declare it with a prefix")
    low = high = None
    for bound in info.metadata:  # pydantic's Field(ge=..., gt=..., le=..., lt=...) constraints
        for attr in ("ge", "gt"):
            low = float(getattr(bound, attr)) if getattr(bound, attr, None) is not None else low
        for attr in ("le", "lt"):
            high = float(getattr(bound, attr)) if getattr(bound, attr, None) is not None else high
    # a strict bound (gt/lt) becomes the inclusive ROS range: the model still refuses the bound itself
    default = info.get_default(call_default_factory=True)
    return ParameterSpec(prefix + name, default, info.description, low, high, kind=kind)


def _scalar_type(annotation: Any) -> type | None:
    """bool/int/float/str behind ``Annotated[...]`` and ``X | None``; None for anything else."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _scalar_type(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kinds = [_scalar_type(arg) for arg in typing.get_args(annotation) if arg is not type(None)]
        return kinds[0] if len(kinds) == 1 else None
    return annotation if annotation in (bool, int, float, str) else None


def defaults(cls: type) -> dict[str, Any]:
    return {spec.name: spec.default for spec in parameter_specs(cls)}
