"""The metadata every GapONet model file carries (JSON), and its validation.

The model itself sees normalised tensors only; everything needed to feed it and to read its
answer (joint order, history window, rate, feature layout, normalisation, Δ bounds) travels in
this record, so a model file is self-describing and a mismatch with the node shows at start-up.

Model signature (both formats): ``forward(history, target) -> delta`` with
``history`` float32 ``(B, history, len(history_features) * J)`` (features grouped by feature,
then joint, oldest row first), ``target`` float32 ``(B, J)`` and ``delta`` float32 ``(B, J)``,
all normalised with the statistics below.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from so101_common.joints import JOINT_NAMES

__all__ = [
    "SCHEMA_VERSION",
    "METADATA_KEY",
    "TORCHSCRIPT_EXTRA_FILE",
    "HISTORY_FEATURES",
    "MODEL_KINDS",
    "ModelFileError",
    "Normalisation",
    "GapModelMetadata",
]

SCHEMA_VERSION = 1
METADATA_KEY = "so101_gaponet"  # ONNX metadata_props key
TORCHSCRIPT_EXTRA_FILE = "so101_gaponet.json"  # TorchScript _extra_files name
# One history row per control step: measured position, measured velocity, and the command that
# was in force when that state was measured (the previous step's output to the arm).
HISTORY_FEATURES: tuple[str, ...] = ("real_position", "real_velocity", "previous_command")
TARGET_FEATURES: tuple[str, ...] = ("target_position",)
MODEL_KINDS: tuple[str, ...] = ("deeponet", "mlp")


class ModelFileError(ValueError):
    """A GapONet model file is missing, unreadable, or does not fit its metadata or the node."""


def _floats(values: Any, length: int, what: str, positive: bool = False) -> tuple[float, ...]:
    if not isinstance(values, list | tuple) or len(values) != length:
        raise ModelFileError(f"{what}: expected a list of {length} numbers, got {values!r:.80}")
    try:
        out = tuple(float(v) for v in values)
    except (TypeError, ValueError) as err:
        raise ModelFileError(f"{what}: not numbers: {values!r:.80}") from err
    if not all(math.isfinite(v) for v in out):
        raise ModelFileError(f"{what}: values must be finite")
    if positive and not all(v > 0 for v in out):
        raise ModelFileError(f"{what}: values must be > 0")
    return out


@dataclass(frozen=True)
class Normalisation:
    """Per-feature affine normalisation ``x_n = (x - mean) / std`` (outputs: ``x = x_n * std + mean``)."""

    history_mean: tuple[float, ...]  # one per history column (features × joints)
    history_std: tuple[float, ...]
    target_mean: tuple[float, ...]  # one per joint
    target_std: tuple[float, ...]
    delta_mean: tuple[float, ...]  # one per joint, rad
    delta_std: tuple[float, ...]

    @classmethod
    def from_dict(cls, data: Any, joints: int, columns: int) -> Normalisation:
        if not isinstance(data, dict):
            raise ModelFileError("normalisation: expected an object")
        try:
            return cls(
                history_mean=_floats(data["history_mean"], columns, "normalisation.history_mean"),
                history_std=_floats(data["history_std"], columns, "normalisation.history_std", positive=True),
                target_mean=_floats(data["target_mean"], joints, "normalisation.target_mean"),
                target_std=_floats(data["target_std"], joints, "normalisation.target_std", positive=True),
                delta_mean=_floats(data["delta_mean"], joints, "normalisation.delta_mean"),
                delta_std=_floats(data["delta_std"], joints, "normalisation.delta_std", positive=True),
            )
        except KeyError as err:
            raise ModelFileError(f"normalisation: missing {err.args[0]!r}") from err


@dataclass(frozen=True)
class GapModelMetadata:
    """What a model file says about itself; validated on construction."""

    model_kind: str  # one of MODEL_KINDS
    joints: tuple[str, ...]  # joint order of every per-joint vector, names from the joint spec
    history: int  # rows of history the model reads (control steps)
    rate_hz: float  # control rate the history was sampled at
    horizon: int  # steps ahead the target position is meant to be reached (training objective)
    history_features: tuple[str, ...]  # per-row feature groups, in column order
    normalisation: Normalisation
    delta_bounds: tuple[float, ...]  # |Δ| limit per joint, rad
    # Largest change of Δ from one step to the next per joint (rad/step): keeps the compensator from
    # becoming a high-gain loop around the arm. None (files written before the field): no limit.
    delta_slew_limit: tuple[float, ...] | None = None
    delta_smoothing_s: float = 0.0  # time constant of a first-order low-pass on Δ (s); 0 = none
    provenance: dict[str, Any] = field(default_factory=dict)  # datasets, profile, date, git rev, loss
    architecture: dict[str, Any] = field(default_factory=dict)  # hyper-parameters, informational
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.schema_version != SCHEMA_VERSION:
            raise ModelFileError(f"schema version {self.schema_version} not supported (this runtime reads {SCHEMA_VERSION})")
        if self.model_kind not in MODEL_KINDS:
            raise ModelFileError(f"model kind {self.model_kind!r} unknown; expected one of {list(MODEL_KINDS)}")
        unknown = [j for j in self.joints if j not in JOINT_NAMES]
        if not self.joints or unknown or len(set(self.joints)) != len(self.joints):
            raise ModelFileError(f"joints {list(self.joints)} do not match the joint spec {list(JOINT_NAMES)} (unknown or repeated: {unknown})")
        if not isinstance(self.history, int) or self.history < 1:
            raise ModelFileError(f"history must be an integer ≥ 1, got {self.history!r}")
        if not isinstance(self.horizon, int) or self.horizon < 1:
            raise ModelFileError(f"horizon must be an integer ≥ 1, got {self.horizon!r}")
        if not (isinstance(self.rate_hz, int | float) and math.isfinite(self.rate_hz) and self.rate_hz > 0):
            raise ModelFileError(f"rate_hz must be > 0, got {self.rate_hz!r}")
        if tuple(self.history_features) != HISTORY_FEATURES:
            raise ModelFileError(f"input layout {list(self.history_features)} not supported; expected {list(HISTORY_FEATURES)}")
        _floats(list(self.delta_bounds), len(self.joints), "delta_bounds", positive=True)
        if self.delta_slew_limit is not None:
            _floats(list(self.delta_slew_limit), len(self.joints), "delta_slew_limit", positive=True)
        if not (isinstance(self.delta_smoothing_s, int | float) and math.isfinite(self.delta_smoothing_s)
                and self.delta_smoothing_s >= 0):
            raise ModelFileError(f"delta_smoothing_s must be ≥ 0 (s), got {self.delta_smoothing_s!r}")

    @property
    def num_joints(self) -> int:
        return len(self.joints)

    @property
    def history_columns(self) -> int:
        return len(self.history_features) * len(self.joints)

    def check_against(self, joints: Sequence[str] | None = None, rate_hz: float | None = None) -> None:
        """Raise :class:`ModelFileError` if the model does not fit the node's configured joints or rate."""
        if joints is not None and tuple(joints) != self.joints:
            raise ModelFileError(f"model joints {list(self.joints)} differ from the configured joints {list(joints)}")
        if rate_hz is not None and not math.isclose(rate_hz, self.rate_hz, rel_tol=1e-6):
            raise ModelFileError(f"model was trained at {self.rate_hz} Hz (history {self.history} steps) but the node runs at {rate_hz} Hz")

    def to_json(self) -> str:
        record = asdict(self)
        record["joints"] = list(self.joints)
        record["history_features"] = list(self.history_features)
        record["delta_slew_limit"] = None if self.delta_slew_limit is None else list(self.delta_slew_limit)
        record["target_features"] = list(TARGET_FEATURES)
        return json.dumps(record, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> GapModelMetadata:
        try:
            data = json.loads(text)
        except (ValueError, UnicodeDecodeError) as err:
            raise ModelFileError(f"metadata is not valid JSON: {err}") from err
        if not isinstance(data, dict):
            raise ModelFileError("metadata must be a JSON object")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ModelFileError(f"schema version {version!r} not supported (this runtime reads {SCHEMA_VERSION})")
        try:
            joints = tuple(str(j) for j in data["joints"])
            features = tuple(str(f) for f in data["history_features"])
            if features != HISTORY_FEATURES:
                raise ModelFileError(f"input layout {list(features)} not supported; expected {list(HISTORY_FEATURES)}")
            return cls(
                model_kind=str(data["model_kind"]),
                joints=joints,
                history=data["history"],
                rate_hz=data["rate_hz"],
                horizon=data["horizon"],
                history_features=features,
                normalisation=Normalisation.from_dict(data["normalisation"], len(joints), len(features) * len(joints)),
                delta_bounds=_floats(data["delta_bounds"], len(joints), "delta_bounds", positive=True),
                delta_slew_limit=(None if data.get("delta_slew_limit") is None else
                                  _floats(data["delta_slew_limit"], len(joints), "delta_slew_limit", positive=True)),
                delta_smoothing_s=data.get("delta_smoothing_s", 0.0),
                provenance=dict(data.get("provenance", {})),
                architecture=dict(data.get("architecture", {})),
                schema_version=version,
            )
        except KeyError as err:
            raise ModelFileError(f"metadata lacks the field {err.args[0]!r}") from err
        except TypeError as err:
            raise ModelFileError(f"metadata has a field of the wrong type: {err}") from err
