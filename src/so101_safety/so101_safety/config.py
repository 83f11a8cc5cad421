"""Safety filter configuration: validated limits per joint, built from defaults plus per-joint overrides.

Position limits come from the joint specification (:mod:`so101_common.joints`) shrunk by a
margin; velocity and acceleration limits are configured (a default for every joint, optionally
overridden per joint). The configuration is an immutable pydantic model (:mod:`so101_common.schema`):
parameter files and node parameters go through :meth:`SafetyConfig.from_mapping`, and a bad value
raises :class:`~so101_safety.errors.SafetyConfigError`, one line naming the file (or ``parameters``)
and the key, the way every file format of the workspace rejects bad input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator

from so101_common.joints import GRIPPER, JOINT_NAMES, JOINTS, OVERLOAD_PROTECTION_S, joint
from so101_common.parameters import ParameterSpec, parameter_specs
from so101_common.schema import Number, SchemaError, StrictModel, read_yaml, validate
from so101_safety.errors import SafetyConfigError

__all__ = ["JointOverride", "JointLimits", "SafetyConfig", "NodeOptions", "load_config", "load_parameters", "split_parameters",
           "node_parameter_specs"]

_OVERRIDABLE = ("margin", "max_velocity", "max_acceleration")
# How far under the gripper servo's overload protection a grasp is taken (0.2 of max effort for LeRobot's 25 %).
GRASP_LOAD_MARGIN = 0.05
if TYPE_CHECKING:
    JointName = str
else:
    JointName = Literal[JOINT_NAMES]  # the joint spec's names: pydantic refuses any other key under joints


class JointOverride(StrictModel):
    """Per-joint values that replace the defaults of :class:`SafetyConfig`; ``None`` keeps the default."""

    margin: Number | None = Field(None, ge=0, description="rad kept free inside each position limit of this joint")
    max_velocity: Number | None = Field(None, gt=0, description="rad/s, this joint's bound on |Δoutput| / dt")
    max_acceleration: Number | None = Field(None, gt=0, description="rad/s², this joint's bound on |Δvelocity| / dt")


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


class SafetyConfig(StrictModel):
    """Everything the safety filter enforces. Units: rad, s, Hz; load as a fraction of max effort."""

    margin: Number = Field(0.05, ge=0, description="rad kept free inside each joint-spec position limit")
    max_velocity: Number = Field(3.0, gt=0, description="rad/s, per-step bound on |Δoutput| / dt")
    max_acceleration: Number = Field(20.0, gt=0, description="rad/s², per-step bound on |Δvelocity| / dt")
    watchdog_timeout: Number = Field(0.5, gt=0, description="s without an accepted command (or a measured state) → hold")
    smoothing_cutoff_hz: Number = Field(0.0, ge=0, description="first-order low-pass on the target before rate limiting; 0 = off")
    gripper_load_limit: Number = Field(
        GRIPPER.overload - GRASP_LOAD_MARGIN, ge=0, description="fraction of max effort pushing the gripper closed above "
        "which, held for gripper_load_hold, the gripper is grasping (stops closing, eases to gripper_grasp_squeeze); below its servo's "
        f"overload protection (LeRobot's gripper: Overload_Torque {GRIPPER.overload * 100:g} %, torque capped at 50 %); 0 = off")
    gripper_load_hysteresis: Number = Field(
        0.15, ge=0, description="a grasp is released below gripper_load_limit − this (an object held at "
        "gripper_grasp_squeeze loads the gripper by about 0.13)")
    gripper_load_hold: Number = Field(
        0.5, ge=0, description="s the gripper load must stay above gripper_load_limit to count as a grasp: a free "
        f"gripper's load passes it for up to 0.31 s (measured), the servo's overload protection trips after "
        f"{OVERLOAD_PROTECTION_S:g} s")
    gripper_grasp_squeeze: Number = Field(
        0.03, ge=0, description="rad: while grasping, the gripper output lies at most this far closed of the measured "
        "gripper (the squeeze that holds the object: about 13 % of max effort at P 16)")
    gripper_load_timeout: Number = Field(2.0, gt=0, description="s after which a load reading is too old to count")
    reseed_tolerance: Number = Field(
        0.35, ge=0, description="rad: how far the output may lie from a joint's measured position, beyond the lag of an "
        "arm that follows (the arm was pushed, fell or is blocked: the output stops at that leash); keep it above the "
        "error at which the servos give their full torque (P 16: 0.25 rad), so the leash never weakens a servo")
    tracking_lag: Number = Field(0.15, ge=0, le=2.0, description="s the arm may lag behind the output: the leash "
                                 "grows by this times the faster of the output's and the arm's speed")
    limp_load: Number = Field(0.02, ge=0, le=1, description="fraction of max effort below which a joint's servo counts "
                              "as limp (torque off: it reports no load): its leash is then limp_tolerance, no lag; 0 = off")
    limp_hold: Number = Field(
        0.2, ge=0, description="s a servo must go on reporting no load (below limp_load) to count as limp: with torque "
        "on it reports none at rest in its dead band and while a new goal is on its way to it (a bus round trip; on a "
        "14 ms adapter the outputs left the arm by more than limp_tolerance for up to 85 ms before the load showed), "
        "so a shorter run of no load is a servo that has not heard yet, not a limp one; 0 = at the first reading")
    limp_tolerance: Number = Field(0.05, ge=0, description="rad: the leash of a limp joint, what torque coming back on "
                                   "may move it by")
    rate_hz: Number = Field(100.0, gt=0, description="timer rate (Hz): the hold, the e-stop and an output still "
                            "travelling to its target are published at this rate")
    max_rate_hz: Number = Field(100.0, gt=0, description="most outputs per second, commands and timer together (the "
                                "driver's rate_hz): faster commands are coalesced, the latest wins")
    joints: dict[JointName, JointOverride] = Field(default_factory=dict, description="per-joint overrides by joint name")

    _limits: tuple[JointLimits, ...] = PrivateAttr()

    @field_validator("margin")
    @classmethod
    def _margin_fits_every_joint(cls, margin: float) -> float:
        _check_margin(margin, [spec.name for spec in JOINTS])
        return margin

    @field_validator("gripper_load_hysteresis")
    @classmethod
    def _hysteresis_within_limit(cls, hysteresis: float, info: ValidationInfo) -> float:
        limit = info.data.get("gripper_load_limit")
        if limit is not None and hysteresis > limit:
            raise ValueError(f"must be within [0, gripper_load_limit={limit}]")
        return hysteresis

    @field_validator("joints")
    @classmethod
    def _override_margins_fit(cls, joints: dict[str, JointOverride]) -> dict[str, JointOverride]:
        for name, override in joints.items():
            if override.margin is not None:
                _check_margin(override.margin, [name], f"{name}.margin ")
        return joints

    def model_post_init(self, context: Any, /) -> None:
        self._limits = tuple(self._build_limits(name) for name in JOINT_NAMES)

    def _build_limits(self, name: str) -> JointLimits:
        spec = joint(name)
        override = self.joints.get(name, JointOverride())
        margin, velocity, acceleration = (getattr(self, key) if getattr(override, key) is None else getattr(override, key)
                                          for key in _OVERRIDABLE)
        return JointLimits(name=name, lower=spec.lower + margin, upper=spec.upper - margin, max_velocity=velocity,
                           max_acceleration=acceleration, max_effort=spec.max_effort, is_gripper=spec.is_gripper)

    @property
    def limits(self) -> tuple[JointLimits, ...]:
        """Effective limits of every joint, in :data:`JOINT_NAMES` order."""
        return self._limits

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], source: str = "parameters") -> SafetyConfig:
        """Build from a plain mapping (parameter YAML or node parameters); unknown keys are an error.

        Per-joint overrides may come nested (``{"joints": {"gripper": {"max_velocity": 2.0}}}``) or
        flattened the way ROS names nested parameters (``{"joints.gripper.max_velocity": 2.0}``);
        ``None`` values are ignored (an unset parameter). ``source`` names the file in errors.
        """
        top: dict[str, Any] = {}
        joints: dict[str, Any] = {}
        for key, value in values.items():
            if value is None:
                continue
            if key == "joints" and isinstance(value, Mapping):
                for name, override in value.items():
                    if isinstance(override, Mapping):
                        joints.setdefault(name, {}).update({k: v for k, v in override.items() if v is not None})
                    else:
                        joints[name] = override  # validation names it
            elif key.startswith("joints."):
                name, _, field = key.removeprefix("joints.").partition(".")
                if not field:
                    joints[name] = value  # validation names it: joints.<joint> must be a mapping
                elif isinstance(joints.setdefault(name, {}), dict):
                    joints[name][field] = value
            else:
                top[key] = value
        if joints:
            top["joints"] = {name: override for name, override in joints.items() if override != {}}
        try:
            return validate(cls, top, source)
        except SchemaError as err:
            raise SafetyConfigError(str(err)) from None

    def to_mapping(self) -> dict[str, Any]:
        """The flat parameter view (``joints.<name>.<key>`` for overrides), inverse of :meth:`from_mapping`."""
        values: dict[str, Any] = {name: getattr(self, name) for name in type(self).model_fields if name != "joints"}
        for name, override in self.joints.items():
            for key in _OVERRIDABLE:
                if getattr(override, key) is not None:
                    values[f"joints.{name}.{key}"] = getattr(override, key)
        return values


class NodeOptions(StrictModel):
    """Settings of the node shell that the filter itself does not need."""

    diagnostics_period: Number = Field(1.0, gt=0, description="s between the node's own /diagnostics status messages")
    log_throttle: Number = Field(2.0, gt=0, description="s between two log lines about rejected messages")


def node_parameter_specs() -> list[ParameterSpec]:
    """Every parameter of the safety node: the filter's settings, the node's options, and each joint's overrides
    (``joints.<joint>.<key>``)."""
    specs = [*parameter_specs(SafetyConfig, exclude=("joints",)), *parameter_specs(NodeOptions)]
    for name in JOINT_NAMES:
        specs += parameter_specs(JointOverride, prefix=f"joints.{name}.")
    return specs


def split_parameters(values: Mapping[str, Any], source: str = "parameters") -> tuple[SafetyConfig, NodeOptions]:
    """Split one flat parameter mapping into the filter's config and the node's options (both validated)."""
    node_keys = set(NodeOptions.model_fields)
    node = {k: v for k, v in values.items() if k in node_keys and v is not None}
    rest = {k: v for k, v in values.items() if k not in node_keys and k != "use_sim_time"}
    config = SafetyConfig.from_mapping(rest, source)
    try:
        return config, validate(NodeOptions, node, source)
    except SchemaError as err:
        raise SafetyConfigError(str(err)) from None


def load_parameters(path: str | Path, node_name: str = "safety_filter") -> tuple[SafetyConfig, NodeOptions]:
    """Read a ROS parameter file (``/**:`` or ``<node_name>:`` → ``ros__parameters``)."""
    try:
        document = read_yaml(path)
    except SchemaError as err:
        raise SafetyConfigError(str(err)) from None
    if not isinstance(document, Mapping):
        raise SafetyConfigError(f"{path}: expected a mapping at the top level")
    for key in ("/**", node_name, f"/{node_name}"):
        section = document.get(key)
        if isinstance(section, Mapping) and isinstance(section.get("ros__parameters"), Mapping):
            return split_parameters(section["ros__parameters"], f"{path} [{key}.ros__parameters]")
    raise SafetyConfigError(f"{path}: no '/**: ros__parameters:' (or '{node_name}:') section")


def load_config(path: str | Path, node_name: str = "safety_filter") -> SafetyConfig:
    """The filter's part of a ROS parameter file (see :func:`load_parameters`)."""
    return load_parameters(path, node_name)[0]


def _check_margin(margin: float, names: list[str], what: str = "") -> None:
    """A margin must leave some of every joint's range: below half the span of each named joint."""
    tightest = min((joint(name) for name in names), key=lambda spec: spec.span)
    if 2 * margin >= tightest.span:
        raise ValueError(f"{what}must be below {tightest.span / 2:.4f} rad (half the range of {tightest.name})")
