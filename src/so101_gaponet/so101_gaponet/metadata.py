"""The metadata every GapONet model file carries (JSON, schema 2), validated with pydantic.

The model itself sees normalised tensors only; everything needed to feed it and to read its
answer (role, joint order, history window, command look-ahead, rate, feature layout,
normalisation, Δ bounds) travels in this record, so a model file is self-describing and a
mismatch with its user shows at start-up.

Model signature (both formats): ``forward(history, commands) -> delta`` with

- ``history`` float32 ``(B, history, len(history_features) * J)``: features grouped by feature,
  then joint, oldest row first. One row per control step: the measured state (position,
  velocity) and the command that was in force when it was measured. For role ``sim_delta`` the
  "measured" state is the *simulated* state of the replay; the layout is the same for both roles.
- ``commands`` float32 ``(B, future_steps, J)``: the current command first, then the upcoming
  ones (``future_steps == 1``: the current command only).
- ``delta`` float32 ``(B, J)``: the correction added to the current command.

All three are normalised with the statistics in :class:`Normalisation` (commands share one
per-joint mean/std over every look-ahead row).

Recurrent models (``state_size > 0``, role ``sim_delta`` only): the graph takes a third input
``state`` float32 ``(B, state_size)`` and returns a second output ``next_state`` of the same shape,
in the graph's own units (not normalised here). The runtime starts every stream from zeros, feeds
each call's ``next_state`` to the next call and zeros it again on ``reset_state()``; a state of
zeros therefore has to mean "no step seen yet" to the graph. The state gives the model a memory
longer than its history window at the cost of one vector per call.

Roles:

- ``compensator`` (deploy side): the real arm driven with ``command + Δ`` should do what the sim
  does for ``command``.
- ``sim_delta`` (replay side, ASAP's delta action): the sim driven with ``command + Δ`` should do
  what the real arm did for ``command``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from so101_common.joints import JOINT_NAMES

__all__ = [
    "SCHEMA_VERSION",
    "METADATA_KEY",
    "TORCHSCRIPT_EXTRA_FILE",
    "HISTORY_FEATURES",
    "MODEL_KINDS",
    "ROLES",
    "ModelKind",
    "Role",
    "ModelFileError",
    "Normalisation",
    "GapModelMetadata",
]

SCHEMA_VERSION: Literal[2] = 2
METADATA_KEY = "so101_gaponet"  # ONNX metadata_props key
TORCHSCRIPT_EXTRA_FILE = "so101_gaponet.json"  # TorchScript _extra_files name
# One history row per control step: measured position, measured velocity, and the command that
# was in force when that state was measured (the previous step's output to the arm or the sim).
HISTORY_FEATURES: tuple[str, ...] = ("real_position", "real_velocity", "previous_command")
MODEL_KINDS: tuple[str, ...] = ("deeponet", "transformer", "mlp", "joint_mlp", "linear", "context_mlp")
ROLES: tuple[str, ...] = ("compensator", "sim_delta")

ModelKind = Literal["deeponet", "transformer", "mlp", "joint_mlp", "linear", "context_mlp"]
Role = Literal["compensator", "sim_delta"]
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class ModelFileError(ValueError):
    """A GapONet model file is missing, unreadable, or does not fit its metadata or its user."""


def _describe(err: ValidationError) -> str:
    """One line naming the first offending key (dotted path) and what is wrong with it."""
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "metadata"
    text = f"{where}: {first['msg']}"
    return text + (f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else "")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Normalisation(_Strict):
    """Per-feature affine normalisation ``x_n = (x - mean) / std`` (outputs: ``x = x_n * std + mean``)."""

    history_mean: tuple[FiniteFloat, ...]  # one per history column (features × joints)
    history_std: tuple[PositiveFloat, ...]
    command_mean: tuple[FiniteFloat, ...]  # one per joint, shared by every look-ahead row
    command_std: tuple[PositiveFloat, ...]
    delta_mean: tuple[FiniteFloat, ...]  # one per joint, rad
    delta_std: tuple[PositiveFloat, ...]

    def check_sizes(self, joints: int, columns: int) -> None:
        for name in type(self).model_fields:
            expected = columns if name.startswith("history") else joints
            if len(getattr(self, name)) != expected:
                raise ValueError(f"normalisation.{name}: expected a list of {expected} numbers, got {len(getattr(self, name))}")


class GapModelMetadata(_Strict):
    """What a model file says about itself; validated on construction (pydantic, unknown keys refused)."""

    schema_version: Literal[2] = SCHEMA_VERSION
    role: Role
    model_kind: ModelKind
    joints: tuple[str, ...]  # joint order of every per-joint vector, names from the joint spec
    history: int = Field(ge=1)  # rows of history the model reads (control steps)
    # Measured rows the compensator core needs before the model runs; the window's older rows then repeat the
    # first measurement (the arm at rest where it was first seen). None: the whole window.
    warmup_rows: int | None = Field(default=None, ge=1)
    future_steps: int = Field(default=1, ge=1)  # command rows the model reads: current first, then upcoming
    rate_hz: PositiveFloat  # control rate of the history and the command rows
    horizon: int = Field(ge=1)  # steps over which the training objective looks ahead (informational)
    history_features: tuple[str, ...] = HISTORY_FEATURES  # per-row feature groups, in column order
    normalisation: Normalisation
    delta_bounds: tuple[PositiveFloat, ...]  # |Δ| limit per joint, rad
    # Largest change of Δ from one step to the next per joint (rad/step); None: no limit.
    delta_slew_limit: tuple[PositiveFloat, ...] | None = None
    delta_smoothing_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)  # Δ low-pass time constant (s); 0 = none
    # Integral feedback of the compensator core per joint (1/step): each step it adds this share of the
    # tracking error (previous policy command − measured position) to a correction bounded like Δ.
    # None: no feedback (the network's Δ alone).
    feedback_gain: tuple[NonNegativeFloat, ...] | None = None
    # Recurrent state carried between calls (see the module doc); 0: a stateless model of (history, commands).
    state_size: int = Field(default=0, ge=0)
    # Width (rad) of the play operator that tells which way the reference moves: the integral keeps one
    # correction per direction of motion (dry friction flips with it). 0: one correction for both.
    direction_play: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    provenance: dict[str, Any] = Field(default_factory=dict)  # datasets, profile, date, git rev, losses
    architecture: dict[str, Any] = Field(default_factory=dict)  # hyper-parameters, informational

    @field_validator("joints")
    @classmethod
    def _known_joints(cls, joints: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [j for j in joints if j not in JOINT_NAMES]
        if not joints or unknown or len(set(joints)) != len(joints):
            raise ValueError(f"{list(joints)} do not match the joint spec {list(JOINT_NAMES)} (unknown or repeated: {unknown})")
        return joints

    @field_validator("history_features")
    @classmethod
    def _layout(cls, features: tuple[str, ...]) -> tuple[str, ...]:
        if tuple(features) != HISTORY_FEATURES:
            raise ValueError(f"input layout {list(features)} not supported; expected {list(HISTORY_FEATURES)}")
        return features

    @model_validator(mode="after")
    def _per_joint_lengths(self) -> GapModelMetadata:
        joints = len(self.joints)
        for name in ("delta_bounds", "delta_slew_limit", "feedback_gain"):
            values = getattr(self, name)
            if values is not None and len(values) != joints:
                raise ValueError(f"{name}: expected a list of {joints} numbers, got {len(values)}")
        self.normalisation.check_sizes(joints, self.history_columns)
        if self.warmup_rows is not None and self.warmup_rows > self.history:
            raise ValueError(f"warmup_rows: {self.warmup_rows} exceeds the history window ({self.history} rows)")
        if self.state_size and self.role != "sim_delta":
            # the compensator core resets and bypasses its model (warm-up, passthrough): no state semantics there
            raise ValueError(f"state_size: a recurrent state is supported for role 'sim_delta' only, not {self.role!r}")
        return self

    @property
    def num_joints(self) -> int:
        return len(self.joints)

    @property
    def history_columns(self) -> int:
        return len(self.history_features) * len(self.joints)

    def check_against(self, joints: Sequence[str] | None = None, rate_hz: float | None = None,
                      role: str | None = None) -> None:
        """Raise :class:`ModelFileError` if the model does not fit its user's joints, rate or role."""
        if role is not None and role != self.role:
            raise ModelFileError(f"model role is {self.role!r} but it is used as {role!r} "
                                 f"({'replay sim-delta' if role == 'sim_delta' else 'deploy compensator'})")
        if joints is not None and tuple(joints) != self.joints:
            raise ModelFileError(f"model joints {list(self.joints)} differ from the configured joints {list(joints)}")
        if rate_hz is not None and not math.isclose(rate_hz, self.rate_hz, rel_tol=1e-6):
            raise ModelFileError(f"model was trained at {self.rate_hz} Hz (history {self.history} steps) but the node runs at {rate_hz} Hz")

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> GapModelMetadata:
        """Parse and validate; every problem is a one-line :class:`ModelFileError` naming the key."""
        try:
            data = json.loads(text)
        except (ValueError, UnicodeDecodeError) as err:
            raise ModelFileError(f"metadata is not valid JSON: {err}") from err
        if not isinstance(data, dict):
            raise ModelFileError("metadata must be a JSON object")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ModelFileError(f"schema version {version!r} not supported (this runtime reads {SCHEMA_VERSION}; "
                                 "retrain or re-export the model)")
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            raise ModelFileError(f"metadata {_describe(err)}") from err
