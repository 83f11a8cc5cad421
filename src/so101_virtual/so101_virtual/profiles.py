"""Gap profiles: every physical parameter of the virtual SO-101 that makes it differ from an ideal sim.

A :class:`GapProfile` holds the arm-wide settings (physics step, gravity, payload, power supply,
firmware loop and its P/I/D scaling, bus timing) and one :class:`JointParams` per joint (gearbox
backlash and stiffness, friction, rotor inertia, motor constants, thermal figures, encoder noise).
Per-joint values are ``joint_defaults`` overlaid by the ``joints: {name: {...}}`` overrides.

Profiles are YAML files (schema and units: ``so101_virtual/README.md``); the shipped ones live in
``so101_virtual/gap_profiles/`` and are loaded by name, any other file by path::

    profile = load_profile("default")          # a shipped profile
    profile = load_profile("my_arm.yaml")      # a file (may say ``base: default`` to start from one)

Every key is checked: an unknown key, a wrong type or a value out of its range raises
:class:`ProfileError` naming the key and the file.

How P/I/D registers map to torque (``firmware`` section, derived in the README): the firmware output
is a PWM duty in 0.1 % (the unit of ``Torque_Limit`` and ``Present_Load``),
``PWM = p_gain·P·e + d_gain·D·ė + i_gain·I·∫e`` with ``e`` in steps; the H-bridge turns duty into
torque through the DC-motor model (``stall_torque``, ``no_load_speed``). With LeRobot's P=16, D=32 the
fitted figures give ~10.7 N·m/rad and ~1.2 N·m·s/rad with the back-EMF (gravity sag of a few
hundredths of a rad on shoulder_lift/elbow_flex, ~0.1 s lag), as the SAGE recordings of a real SO-101
show.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from so101_common.joints import JOINT_NAMES

__all__ = [
    "ProfileError",
    "JointParams",
    "PhysicsParams",
    "FirmwareParams",
    "BusParams",
    "GapProfile",
    "profiles_dir",
    "available_profiles",
    "load_profile",
    "profile_from_dict",
]


class ProfileError(ValueError):
    """A gap profile is missing, malformed or has a value out of range."""


# ----------------------------------------------------------------------------------------- sections
# Each field carries metadata: unit, bounds (inclusive unless noted) and a one-line meaning, used for
# validation messages and the schema table of the README (see ``schema_rows``).


def _f(default: Any, unit: str, lo: float | None, hi: float | None, doc: str, *, lo_open: bool = False) -> Any:
    return field(default=default, metadata={"unit": unit, "lo": lo, "hi": hi, "lo_open": lo_open, "doc": doc})


@dataclass(frozen=True)
class JointParams:
    """One joint's servo and mechanics (values at the joint's output shaft)."""

    backlash: float = _f(0.0, "rad", 0.0, 0.5, "total free play between motor side and output (dead band width)")
    gear_stiffness: float = _f(300.0, "N·m/rad", 1.0, 1e5, "stiffness of the gear train once the backlash is taken up")
    coulomb_friction: float = _f(0.0, "N·m", 0.0, 2.0, "dry (Coulomb) friction of motor and gearbox, with stiction")
    viscous_friction: float = _f(0.0, "N·m·s/rad", 0.0, 10.0, "mechanical viscous friction (always present)")
    output_friction: float = _f(0.0, "N·m", 0.0, 2.0, "dry friction of the output bearing (acts inside the backlash too)")
    armature: float = _f(0.028, "kg·m²", 1e-4, 1.0, "rotor and gear inertia reflected to the output")
    stall_torque: float = _f(2.94, "N·m", 0.0, 50.0, "torque at full duty and zero speed, at rated_voltage", lo_open=True)
    no_load_speed: float = _f(4.72, "rad/s", 0.0, 100.0, "speed at full duty and no load, at rated_voltage", lo_open=True)
    rated_voltage: float = _f(12.0, "V", 0.0, 48.0, "voltage stall_torque and no_load_speed are given at", lo_open=True)
    stall_current: float = _f(2.7, "A", 0.0, 50.0, "current at stall, rated_voltage (sets winding resistance)", lo_open=True)
    no_load_current: float = _f(0.18, "A", 0.0, 10.0, "current at no-load speed (sets the back-EMF constant)")
    thermal_resistance: float = _f(12.0, "°C/W", 0.0, 1000.0, "winding-to-ambient thermal resistance", lo_open=True)
    thermal_time_constant: float = _f(300.0, "s", 0.0, 1e5, "winding temperature time constant", lo_open=True)
    encoder_resolution: float = _f(1.0, "step", 0.0, 64.0,
                                   "what the firmware's loop resolves (1: whole encoder steps; 0: exact angle)")
    position_noise: float = _f(0.0, "step", 0.0, 100.0, "standard deviation of encoder noise before quantisation")
    current_noise: float = _f(0.0, "6.5 mA", 0.0, 1000.0, "standard deviation of Present_Current noise")

    def __post_init__(self) -> None:
        _check_fields(self)
        if self.no_load_current >= self.stall_current:
            raise ProfileError(
                f"no_load_current: {self.no_load_current:g} A must be below stall_current {self.stall_current:g} A"
            )

    # --- DC-motor constants at the output shaft --------------------------------------------------
    @property
    def winding_resistance(self) -> float:
        """Ω: rated voltage over stall current."""
        return self.rated_voltage / self.stall_current

    @property
    def torque_constant(self) -> float:
        """N·m/A at the output: stall torque over stall current."""
        return self.stall_torque / self.stall_current

    @property
    def back_emf_constant(self) -> float:
        """V·s/rad at the output, from the no-load point: (V − R·I₀)/ω₀."""
        return (self.rated_voltage - self.winding_resistance * self.no_load_current) / self.no_load_speed

    @property
    def emf_damping(self) -> float:
        """N·m·s/rad: the braking of the back-EMF through the driven (or shorted) bridge, Kt·Ke/R."""
        return self.torque_constant * self.back_emf_constant / self.winding_resistance


@dataclass(frozen=True)
class PhysicsParams:
    """The simulated world."""

    timestep: float = _f(0.001, "s", 1e-4, 0.005, "MuJoCo step")
    gravity_scale: float = _f(1.0, "", 0.0, 3.0, "multiplies standard gravity (9.81 m/s²)")
    payload_mass: float = _f(0.0, "kg", 0.0, 2.0, "point mass held at the gripper frame")
    payload_offset: tuple[float, float, float] = _f((0.0, 0.0, 0.0), "m", -0.3, 0.3,
                                                    "payload position relative to the gripper frame (x, y, z)")
    supply_voltage: float = _f(12.0, "V", 0.0, 30.0, "power supply voltage (no load)", lo_open=True)
    supply_resistance: float = _f(0.0, "Ω", 0.0, 10.0, "supply + wiring resistance: the bus voltage sags with current")
    ambient_temperature: float = _f(25.0, "°C", -20.0, 60.0, "starting and ambient temperature of the servos")
    contacts: bool = _f(False, "", None, None, "collide the arm's collision boxes with each other")

    def __post_init__(self) -> None:
        _check_fields(self)


@dataclass(frozen=True)
class FirmwareParams:
    """The STS3215 firmware's position loop and measurement (same for every servo)."""

    loop_rate: float = _f(1000.0, "Hz", 50.0, 10000.0, "firmware control loop rate")
    p_gain: float = _f(0.35, "0.1 %/step", 0.0, 100.0, "PWM per step of position error per unit of P_Coefficient")
    d_gain: float = _f(0.01, "0.1 %/(step/s)", 0.0, 10.0, "PWM per step/s of error rate per unit of D_Coefficient")
    i_gain: float = _f(0.05, "0.1 %/(step·s)", 0.0, 100.0, "PWM per step·s of integrated error per unit of I_Coefficient")
    velocity_window: float = _f(0.02, "s", 0.0, 0.2, "Present_Velocity = encoder change over this window", lo_open=True)
    derivative_window: float = _f(0.01, "s", 0.0, 0.2, "the D term's speed = encoder change over this window",
                                  lo_open=True)
    acceleration_unit: float = _f(400.0, "step/s²", 0.0, 1e6, "profile acceleration per unit of the Acceleration register",
                                  lo_open=True)
    dead_band: bool = _f(True, "", None, None,
                         "honour CW/CCW_Dead_Zone and Minimum_Startup_Force (false: a continuous PID)")
    speed_profile: bool = _f(True, "", None, None,
                             "ramp the set-point with Acceleration/Goal_Velocity (false: jump to the goal)")
    unlimited_speed: float = _f(0.0, "step/s", 0.0, 1e5,
                                "profile speed when Goal_Velocity is 0 (0: no speed limit, the motor's own)")
    unlimited_acceleration: float = _f(0.0, "step/s²", 0.0, 1e7,
                                       "profile acceleration when Acceleration is 0 (0: no profile, steps)")

    def __post_init__(self) -> None:
        _check_fields(self)


@dataclass(frozen=True)
class BusParams:
    """Serial bus timing, handed to the bus server."""

    latency: float = _f(0.0, "s", 0.0, 0.1, "extra delay before every reply (USB adapter, OS)")
    jitter: float = _f(0.0, "s", 0.0, 0.1, "uniformly distributed extra delay 0..jitter per reply")
    byte_time: bool = _f(True, "", None, None, "emulate the wire time of bytes at the servo's baud rate")
    return_delay: bool = _f(True, "", None, None, "honour each servo's Return_Delay_Time (×2 µs) before replying")

    def __post_init__(self) -> None:
        _check_fields(self)


_SECTIONS: dict[str, type] = {"physics": PhysicsParams, "firmware": FirmwareParams, "bus": BusParams}
_TOP_KEYS = ("name", "description", "base", "seed", *_SECTIONS, "joint_defaults", "joints")


@dataclass(frozen=True)
class GapProfile:
    """A complete, validated profile. ``joint(name)`` gives the merged per-joint parameters."""

    name: str = "unnamed"
    description: str = ""
    seed: int = 0  # seeds sensor noise (and any other randomness) of a robot built from this profile
    physics: PhysicsParams = field(default_factory=PhysicsParams)
    firmware: FirmwareParams = field(default_factory=FirmwareParams)
    bus: BusParams = field(default_factory=BusParams)
    joint_defaults: JointParams = field(default_factory=JointParams)
    joint_overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    source: str = ""  # the file it came from, for messages

    def __post_init__(self) -> None:
        unknown = [n for n in self.joint_overrides if n not in JOINT_NAMES]
        if unknown:
            raise ProfileError(f"{self._where()}joints: unknown joint {unknown[0]!r}{_suggest(unknown[0], JOINT_NAMES)}")
        merged = {}
        for name in JOINT_NAMES:
            overrides = dict(self.joint_overrides.get(name, {}))
            _check_keys(overrides, JointParams, f"{self._where()}joints.{name}")
            try:
                merged[name] = replace(self.joint_defaults, **overrides)
            except ProfileError as err:
                raise ProfileError(f"{self._where()}joints.{name}.{err}") from err
        object.__setattr__(self, "_joints", merged)
        ratio = 1.0 / (self.firmware.loop_rate * self.physics.timestep)
        if ratio < 1.0 - 1e-9 or abs(ratio - round(ratio)) > 1e-6 * ratio:
            raise ProfileError(
                f"{self._where()}firmware.loop_rate {self.firmware.loop_rate:g} Hz: its period must be a whole number "
                f"of physics.timestep {self.physics.timestep:g} s"
            )

    def _where(self) -> str:
        return f"{self.source}: " if self.source else ""

    def joint(self, name: str) -> JointParams:
        try:
            return self._joints[name]  # type: ignore[attr-defined]
        except KeyError as err:
            raise ProfileError(f"unknown joint {name!r}{_suggest(name, JOINT_NAMES)}") from err

    @property
    def joints(self) -> tuple[JointParams, ...]:
        """Per-joint parameters in :data:`JOINT_NAMES` order."""
        return tuple(self._joints[n] for n in JOINT_NAMES)  # type: ignore[attr-defined]

    @property
    def steps_per_tick(self) -> int:
        """Physics steps per firmware loop period."""
        return max(1, round(1.0 / (self.firmware.loop_rate * self.physics.timestep)))


# ------------------------------------------------------------------------------------- validation


def _check_fields(obj: Any) -> None:
    """Type and range checks of a section's fields; messages start with the field name."""
    for f in fields(obj):
        value = getattr(obj, f.name)
        meta = f.metadata
        if isinstance(f.default, bool):
            if not isinstance(value, bool):
                raise ProfileError(f"{f.name}: expected true/false, got {value!r}")
            continue
        if isinstance(f.default, tuple):
            if not isinstance(value, (tuple, list)) or len(value) != len(f.default):
                raise ProfileError(f"{f.name}: expected a list of {len(f.default)} numbers, got {value!r}")
            items = [_number(v, f"{f.name}") for v in value]
            for v in items:
                _bounds(v, meta, f"{f.name}")
            object.__setattr__(obj, f.name, tuple(items))
            continue
        v = _number(value, f"{f.name}")
        _bounds(v, meta, f"{f.name}")
        object.__setattr__(obj, f.name, v)


def _number(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProfileError(f"{key}: expected a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ProfileError(f"{key}: must be finite, got {value!r}")
    return v


def _bounds(v: float, meta: Mapping[str, Any], key: str) -> None:
    lo, hi, unit = meta["lo"], meta["hi"], meta["unit"]
    unit = f" {unit}" if unit else ""
    if lo is not None and (v < lo or (meta["lo_open"] and v == lo)):
        rel = ">" if meta["lo_open"] else ">="
        raise ProfileError(f"{key}: {v:g}{unit} out of range (must be {rel} {lo:g}{unit})")
    if hi is not None and v > hi:
        raise ProfileError(f"{key}: {v:g}{unit} out of range (must be <= {hi:g}{unit})")


def _check_keys(data: Mapping[str, Any], cls: type, where: str) -> None:
    if not isinstance(data, Mapping):
        raise ProfileError(f"{where}: expected a mapping of keys to values, got {type(data).__name__}")
    allowed = [f.name for f in fields(cls)]
    for key in data:
        if key not in allowed:
            raise ProfileError(f"{where}: unknown key {key!r}{_suggest(str(key), allowed)}")


def _suggest(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# -------------------------------------------------------------------------------------- loading


def profiles_dir() -> Path:
    """The folder of the shipped YAML profiles (package data)."""
    return Path(str(files("so101_virtual"))) / "gap_profiles"


def available_profiles() -> list[str]:
    """Names of the shipped profiles."""
    return sorted(p.stem for p in profiles_dir().glob("*.yaml"))


def _resolve(name_or_path: str | os.PathLike[str]) -> Path:
    text = os.fspath(name_or_path)
    path = Path(text)
    if path.suffix in (".yaml", ".yml") or os.sep in text or path.exists():
        if not path.is_file():
            raise ProfileError(f"gap profile file {path} does not exist")
        return path
    shipped = profiles_dir() / f"{text}.yaml"
    if not shipped.is_file():
        raise ProfileError(
            f"unknown gap profile {text!r}{_suggest(text, available_profiles())}; shipped profiles: "
            f"{', '.join(available_profiles())} (or give a path to a .yaml file)"
        )
    return shipped


def load_profile(name_or_path: str | os.PathLike[str] | GapProfile = "default") -> GapProfile:
    """A shipped profile by name (``"default"``, ``"worn"``, ...) or a YAML file by path."""
    if isinstance(name_or_path, GapProfile):
        return name_or_path
    return _load(_resolve(name_or_path), ())


def _load(path: Path, chain: tuple[Path, ...]) -> GapProfile:
    resolved = path.resolve()
    if resolved in chain:
        raise ProfileError(f"{path}: 'base' chain loops back to itself ({' -> '.join(p.name for p in chain)})")
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as err:
        raise ProfileError(f"cannot read gap profile {path}: {err}") from err
    except yaml.YAMLError as err:
        raise ProfileError(f"{path} is not valid YAML: {err}") from err
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    base = None
    if "base" in data:
        if not isinstance(data["base"], str):
            raise ProfileError(f"{path}: base: expected a profile name or path, got {data['base']!r}")
        base_ref = data["base"]
        try:
            base_path = path.parent / base_ref if base_ref.endswith((".yaml", ".yml")) else _resolve(base_ref)
            base = _load(base_path, (*chain, resolved))
        except ProfileError as err:
            raise ProfileError(f"{path}: base: {err}") from err
    data.setdefault("name", path.stem)
    return profile_from_dict(data, source=str(path), base=base)


def profile_from_dict(data: Mapping[str, Any], source: str = "", base: GapProfile | None = None) -> GapProfile:
    """Build a profile from a parsed mapping (the YAML layout), optionally overlaying ``base``."""
    where = f"{source}: " if source else ""
    if not isinstance(data, Mapping):
        raise ProfileError(f"{where}expected a mapping, got {type(data).__name__}")
    for key in data:
        if key not in _TOP_KEYS:
            raise ProfileError(f"{where}unknown key {key!r}{_suggest(str(key), _TOP_KEYS)}")
    base = base or GapProfile()
    kwargs: dict[str, Any] = {"source": source}
    for key in ("name", "description"):
        if key in data:
            if not isinstance(data[key], str):
                raise ProfileError(f"{where}{key}: expected text, got {data[key]!r}")
            kwargs[key] = data[key]
    if "seed" in data:
        if isinstance(data["seed"], bool) or not isinstance(data["seed"], int):
            raise ProfileError(f"{where}seed: expected an integer, got {data['seed']!r}")
        kwargs["seed"] = data["seed"]
    for key, cls in (*_SECTIONS.items(), ("joint_defaults", JointParams)):
        if key in data and data[key] is not None:
            section = data[key]
            _check_keys(section, cls, f"{where}{key}")
            try:
                kwargs[key] = replace(getattr(base, key), **section)
            except ProfileError as err:
                raise ProfileError(f"{where}{key}.{err}") from err
    overrides = {n: dict(v) for n, v in base.joint_overrides.items()}
    if "joints" in data and data["joints"] is not None:
        joints = data["joints"]
        if not isinstance(joints, Mapping):
            raise ProfileError(f"{where}joints: expected a mapping of joint name to overrides")
        for name, values in joints.items():
            if name not in JOINT_NAMES:
                raise ProfileError(f"{where}joints: unknown joint {name!r}{_suggest(str(name), JOINT_NAMES)}")
            if values is None:
                continue
            _check_keys(values, JointParams, f"{where}joints.{name}")
            overrides.setdefault(name, {}).update(values)
    kwargs["joint_overrides"] = overrides
    return replace(base, **kwargs)


def schema_rows() -> list[tuple[str, str, str, str, str]]:
    """(key, default, unit, range, meaning) for every profile key: the README's schema table."""
    rows = []
    for section, cls in (*_SECTIONS.items(), ("joint_defaults / joints.<name>", JointParams)):
        for f in fields(cls):
            m = f.metadata
            lo, hi = m["lo"], m["hi"]
            rng = "" if lo is None else f"{'>' if m['lo_open'] else '≥'} {lo:g}, ≤ {hi:g}"
            default = f.default if not isinstance(f.default, float) else f"{f.default:g}"
            rows.append((f"{section}.{f.name}", str(default).lower() if isinstance(f.default, bool) else str(default),
                         m["unit"], rng, m["doc"]))
    return rows
