"""Policy metadata (``so101_policy.json``): the pydantic schema, where it is found, and the spec built from it.

Schema (``schema_version`` 1; unknown keys are errors)::

    {"schema_version": 1,
     "state_names": ["shoulder_pan.pos", ...],      # observation.state order (default: SO-101 order)
     "action_names": ["shoulder_pan.pos", ...],     # action order (default: SO-101 order)
     "units": "lerobot",                            # "lerobot" (deg, gripper 0..100) or "rad"
     "chunk_size": 10, "n_action_steps": 10,        # actions per inference / actions used of them
     "rate_hz": 30,                                  # rate the policy was trained at (optional; 0 = unknown)
     "image_features": {"observation.images.front": [3, 96, 96]},   # optional
     "uses_task": false,                             # language-conditioned (optional)
     "description": "..."}                           # free text (optional)

A model file's metadata is embedded (TorchScript ``_extra_files["so101_policy.json"]``, ONNX
``metadata_props["so101_policy"]``) or in a sidecar next to the model (``policy.onnx`` →
``policy.onnx.json`` or ``policy.json``; the sidecar wins). In a LeRobot directory an optional
``so101_policy.json`` overrides what ``config.json`` cannot say (names, units, rate, steps used).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from so101_common.schema import SchemaError, StrictModel, read_json, validate
from so101_policy.spec import METADATA_KEY, PolicyLoadError, PolicySpec, default_feature_names

__all__ = ["PolicyMetadata", "spec_from_metadata", "read_metadata", "read_json_object", "sidecar_candidates"]


class PolicyMetadata(StrictModel):
    """The ``so101_policy`` metadata record (see the module docstring)."""

    schema_version: Literal[1] = 1  # SCHEMA_VERSION
    state_names: list[str] | None = None
    action_names: list[str] | None = None
    units: str = "lerobot"  # checked by PolicySpec, which names the supported ones
    chunk_size: int = Field(1, ge=1)
    n_action_steps: int | None = Field(None, ge=1)
    rate_hz: float | None = Field(None, ge=0.0)  # 0 or null: unknown
    image_features: dict[str, list[int]] = Field(default_factory=dict)  # key -> (C, H, W), checked by PolicySpec
    uses_task: bool = False
    description: str = ""


def spec_from_metadata(meta: Mapping[str, Any], *, kind: str, source: str, policy_type: str | None = None,
                       defaults: Mapping[str, Any] | None = None, where: str | None = None) -> PolicySpec:
    """Build a :class:`PolicySpec` from a metadata mapping read from ``where`` (default: ``source``).

    ``defaults`` are values the loader knows from elsewhere (LeRobot's ``config.json``); ``meta`` wins.
    Any problem is one :class:`PolicyLoadError` line naming the file and the key.
    """
    if not isinstance(meta, Mapping):
        raise PolicyLoadError(f"{where or source}: policy metadata must be a JSON object, got {type(meta).__name__}")
    try:
        record = validate(PolicyMetadata, {**(defaults or {}), **meta}, where or source)
    except SchemaError as err:
        raise PolicyLoadError(str(err)) from None
    return PolicySpec(
        kind=kind, source=source, policy_type=policy_type or kind,
        state_names=tuple(record.state_names or default_feature_names()),
        action_names=tuple(record.action_names or default_feature_names()),
        units=record.units, chunk_size=record.chunk_size,
        n_action_steps=record.n_action_steps if record.n_action_steps is not None else record.chunk_size,
        rate_hz=record.rate_hz or None,
        image_features={k: tuple(v) for k, v in record.image_features.items()},  # type: ignore[misc]
        uses_task=record.uses_task,
    )


def sidecar_candidates(model: Path) -> list[Path]:
    """Where a model file's sidecar metadata may lie, in order of preference."""
    return [model.with_name(model.name + ".json"), model.with_suffix(".json")]


def read_metadata(model: Path, embedded: str | bytes | None) -> tuple[dict[str, Any], str]:
    """A model file's metadata and where it came from: a sidecar JSON next to it wins over the embedded copy."""
    for candidate in sidecar_candidates(model):
        if candidate.is_file():
            return read_json_object(candidate), str(candidate)
    if embedded:
        where = f"{model} (embedded {METADATA_KEY})"
        text = embedded.decode() if isinstance(embedded, bytes) else embedded
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise PolicyLoadError(f"{where}: JSON syntax error: {err.msg} (line {err.lineno}, column {err.colno})") \
                from None
        return _require_object(data, where), where
    raise PolicyLoadError(
        f"{model}: no policy metadata; embed it (TorchScript _extra_files[{METADATA_KEY + '.json'!r}] "
        f"or ONNX metadata_props[{METADATA_KEY!r}]) or put a sidecar at {sidecar_candidates(model)[0]}")


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON file that must hold an object; syntax errors are one :class:`PolicyLoadError` line with file:line:col."""
    try:
        data = read_json(path)
    except SchemaError as err:
        raise PolicyLoadError(str(err)) from None
    return _require_object(data, str(path))


def _require_object(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise PolicyLoadError(f"{where}: must be a JSON object, got {type(data).__name__}")
    return data
