"""Safety filter configuration: validated limits per joint, built from defaults plus per-joint overrides.

Position limits come from the joint specification (:mod:`so101_common.joints`) shrunk by a
margin; velocity and acceleration limits are configured (a default for every joint, optionally
overridden per joint). The configuration is immutable and checked in ``__post_init__``; a bad value
raises :class:`~so101_safety.errors.SafetyConfigError` naming the parameter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from so101_common.joints import JOINT_NAMES, joint
from so101_safety.errors import SafetyConfigError

__all__ = ["JointOverride", "JointLimits", "SafetyConfig", "NodeOptions", "load_config", "load_parameters", "split_parameters"]

_OVERRIDABLE = ("margin", "max_velocity", "max_acceleration")


@dataclass(frozen=True)
class JointOverride:
    """Per-joint values that replace the defaults of :class:`SafetyConfig`; ``None`` keeps the default."""

    margin: float | None = None  # rad kept free inside each position limit of this joint
    max_velocity: float | None = None  # rad/s
    max_acceleration: float | None = None  # rad/s²


@dataclass(frozen=True)
class JointLimits:
    """The effective limits of one joint, as the filter enforces them."""

    name: str
    lower: float  # rad, the joint spec's lower limit + margin
    upper: float  # rad, the joint spec's upper limit − margin
    max_velocity: float  # rad/s
    max_acceleration: float  # rad/s²
    max_effort: float  # N·m, the joint spec's stall torque (the gripper load fraction's denominator)
    is_gripper: bool

    def clip(self, position: float) -> float:
        return min(max(position, self.lower), self.upper)


@dataclass(frozen=True)
class SafetyConfig:
    """Everything the safety filter enforces. Units: rad, s, Hz; load as a fraction of max effort."""

    margin: float = 0.05  # rad kept free inside each joint-spec position limit
    max_velocity: float = 3.0  # rad/s, per-step bound on |Δoutput| / dt
    max_acceleration: float = 20.0  # rad/s², per-step bound on |Δvelocity| / dt
    watchdog_timeout: float = 0.5  # s without an accepted command (or a measured state) → hold
    smoothing_cutoff_hz: float = 0.0  # first-order low-pass on the target before rate limiting; 0 = off
    gripper_load_limit: float = 0.6  # fraction of max effort above which the gripper stops closing; 0 = off
    gripper_load_hysteresis: float = 0.1  # the limit is released below gripper_load_limit − this
    gripper_load_timeout: float = 2.0  # s after which a load reading is too old to count
    reseed_tolerance: float = 0.1  # rad: after a reset or a hold, restart from the measured position if further
    rate_hz: float = 100.0  # output rate of the node
    joints: Mapping[str, JointOverride] = field(default_factory=dict)  # per-joint overrides by joint name

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name != "joints":
                value = getattr(self, f.name)
                if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                    raise SafetyConfigError(f"{f.name} must be a finite number, got {value!r}")
                object.__setattr__(self, f.name, float(value))
        _positive("max_velocity", self.max_velocity)
        _positive("max_acceleration", self.max_acceleration)
        _positive("watchdog_timeout", self.watchdog_timeout)
        _positive("rate_hz", self.rate_hz)
        _positive("gripper_load_timeout", self.gripper_load_timeout)
        if self.reseed_tolerance < 0:
            raise SafetyConfigError(f"reseed_tolerance must be >= 0 rad, got {self.reseed_tolerance}")
        if self.margin < 0:
            raise SafetyConfigError(f"margin must be >= 0 rad, got {self.margin}")
        if self.smoothing_cutoff_hz < 0:
            raise SafetyConfigError(f"smoothing_cutoff_hz must be >= 0 (0 = off), got {self.smoothing_cutoff_hz}")
        if self.gripper_load_limit < 0:
            raise SafetyConfigError(f"gripper_load_limit must be >= 0 (0 = off), got {self.gripper_load_limit}")
        if not 0 <= self.gripper_load_hysteresis <= self.gripper_load_limit:
            raise SafetyConfigError(
                f"gripper_load_hysteresis must be within [0, gripper_load_limit={self.gripper_load_limit}], "
                f"got {self.gripper_load_hysteresis}")
        if not isinstance(self.joints, Mapping):
            raise SafetyConfigError(f"joints must map joint names to overrides, got {type(self.joints).__name__}")
        joints: dict[str, JointOverride] = {}
        for name, override in self.joints.items():
            if name not in JOINT_NAMES:
                raise SafetyConfigError(f"joints.{name}: unknown joint; expected one of {list(JOINT_NAMES)}")
            if isinstance(override, Mapping):
                unknown = set(override) - set(_OVERRIDABLE)
                if unknown:
                    raise SafetyConfigError(f"joints.{name}: unknown keys {sorted(unknown)}; allowed {list(_OVERRIDABLE)}")
                override = JointOverride(**override)
            if not isinstance(override, JointOverride):
                raise SafetyConfigError(f"joints.{name}: expected a mapping or JointOverride, got {override!r}")
            joints[name] = override
        object.__setattr__(self, "joints", joints)
        object.__setattr__(self, "_limits", tuple(self._build_limits(name) for name in JOINT_NAMES))

    def _build_limits(self, name: str) -> JointLimits:
        spec = joint(name)
        override = self.joints.get(name, JointOverride())
        values = {}
        for key in _OVERRIDABLE:
            value = getattr(override, key)
            if value is None:
                value = getattr(self, key)
            elif isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise SafetyConfigError(f"joints.{name}.{key} must be a finite number, got {value!r}")
            values[key] = float(value)
        _positive(f"joints.{name}.max_velocity", values["max_velocity"])
        _positive(f"joints.{name}.max_acceleration", values["max_acceleration"])
        margin = values["margin"]
        if margin < 0 or 2 * margin >= spec.span:
            raise SafetyConfigError(
                f"joints.{name}.margin must be within [0, {spec.span / 2:.4f}) rad (half the joint's range), got {margin}")
        return JointLimits(name=name, lower=spec.lower + margin, upper=spec.upper - margin,
                           max_velocity=values["max_velocity"], max_acceleration=values["max_acceleration"],
                           max_effort=spec.max_effort, is_gripper=spec.is_gripper)

    @property
    def limits(self) -> tuple[JointLimits, ...]:
        """Effective limits of every joint, in :data:`JOINT_NAMES` order."""
        return self._limits  # type: ignore[attr-defined, no-any-return]

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> SafetyConfig:
        """Build from a plain mapping (parameter YAML or node parameters); unknown keys are an error.

        Per-joint overrides may come nested (``{"joints": {"gripper": {"max_velocity": 2.0}}}``) or
        flattened the way ROS names nested parameters (``{"joints.gripper.max_velocity": 2.0}``);
        ``None`` values are ignored (an unset parameter).
        """
        known = {f.name for f in fields(cls)}
        top: dict[str, Any] = {}
        joints: dict[str, dict[str, Any]] = {}
        for key, value in values.items():
            if value is None:
                continue
            if key == "joints":
                if not isinstance(value, Mapping):
                    raise SafetyConfigError(f"joints must be a mapping of joint name → overrides, got {value!r}")
                for name, override in value.items():
                    if not isinstance(override, Mapping):
                        raise SafetyConfigError(f"joints.{name} must be a mapping, got {override!r}")
                    joints.setdefault(name, {}).update({k: v for k, v in override.items() if v is not None})
            elif key.startswith("joints."):
                parts = key.split(".")
                if len(parts) != 3:
                    raise SafetyConfigError(f"{key}: expected joints.<joint>.<{'|'.join(_OVERRIDABLE)}>")
                joints.setdefault(parts[1], {})[parts[2]] = value
            elif key in known:
                top[key] = value
            else:
                raise SafetyConfigError(f"unknown safety parameter {key!r}; known: {sorted(known - {'joints'})}")
        return cls(**top, joints={name: override for name, override in joints.items() if override})

    def to_mapping(self) -> dict[str, Any]:
        """The flat parameter view (``joints.<name>.<key>`` for overrides), inverse of :meth:`from_mapping`."""
        values: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "joints"}
        for name, override in self.joints.items():
            for key in _OVERRIDABLE:
                if getattr(override, key) is not None:
                    values[f"joints.{name}.{key}"] = getattr(override, key)
        return values


@dataclass(frozen=True)
class NodeOptions:
    """Settings of the node shell that the filter itself does not need."""

    diagnostics_period: float = 1.0  # s between the node's own /diagnostics status messages
    gripper_status_match: str = "gripper"  # a /diagnostics status whose name or hardware_id contains this
    log_throttle: float = 2.0  # s between two log lines about rejected messages

    def __post_init__(self) -> None:
        for name in ("diagnostics_period", "log_throttle"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise SafetyConfigError(f"{name} must be a finite number > 0, got {value!r}")
            object.__setattr__(self, name, float(value))
        if not isinstance(self.gripper_status_match, str) or not self.gripper_status_match.strip():
            raise SafetyConfigError(f"gripper_status_match must be a non-empty string, got {self.gripper_status_match!r}")


def split_parameters(values: Mapping[str, Any]) -> tuple[SafetyConfig, NodeOptions]:
    """Split one flat parameter mapping into the filter's config and the node's options (both validated)."""
    node_keys = {f.name for f in fields(NodeOptions)}
    node = {k: v for k, v in values.items() if k in node_keys and v is not None}
    rest = {k: v for k, v in values.items() if k not in node_keys and k != "use_sim_time"}
    return SafetyConfig.from_mapping(rest), NodeOptions(**node)


def load_parameters(path: str | Path, node_name: str = "safety_filter") -> tuple[SafetyConfig, NodeOptions]:
    """Read a ROS parameter file (``/**:`` or ``<node_name>:`` → ``ros__parameters``)."""
    import yaml

    try:
        document = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as err:
        raise SafetyConfigError(f"cannot read safety parameters from {path}: {err}") from err
    if not isinstance(document, Mapping):
        raise SafetyConfigError(f"{path}: expected a mapping at the top level")
    for key in ("/**", node_name, f"/{node_name}"):
        section = document.get(key)
        if isinstance(section, Mapping) and isinstance(section.get("ros__parameters"), Mapping):
            return split_parameters(section["ros__parameters"])
    raise SafetyConfigError(f"{path}: no '/**: ros__parameters:' (or '{node_name}:') section")


def load_config(path: str | Path, node_name: str = "safety_filter") -> SafetyConfig:
    """The filter's part of a ROS parameter file (see :func:`load_parameters`)."""
    return load_parameters(path, node_name)[0]


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise SafetyConfigError(f"{name} must be > 0, got {value}")
