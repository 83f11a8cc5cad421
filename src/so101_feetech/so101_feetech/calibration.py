"""LeRobot calibration files and the servo-step ↔ radian mapping of the SO-101.

The files are LeRobot's own JSON (one object per motor name: ``id``, ``drive_mode``,
``homing_offset``, ``range_min``, ``range_max``), read and written as they are, so a user's
existing ``~/.cache/huggingface/lerobot/calibration/robots/so_follower/<id>.json`` works unchanged.

Mapping (docs/ARCHITECTURE.md): arm joints ``rad = s·(raw − (min+max)/2)·2π/4095`` with ``s = −1``
for ``drive_mode = 1`` (LeRobot's degrees mode, in radians); the gripper maps ``[range_min, range_max]``
linearly onto the joint spec's ``[lower, upper]`` (drive_mode 1 reverses it, as LeRobot's
``RANGE_0_100`` does). Both are affine, so each joint is ``rad = scale·raw + offset``:
:class:`JointMapping` holds the six ``scale``/``offset`` pairs as arrays for the control loop.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from so101_common.atomic_output import write_text_atomically
from so101_common.joints import JOINT_NAMES, LEROBOT_STEPS_PER_TURN, JointSpecError, joint

__all__ = [
    "CalibrationError",
    "MotorCalibration",
    "JointMapping",
    "MAX_RAW",
    "MID_RAW",
    "load_calibration",
    "save_calibration",
    "calibration_to_json",
    "calibration_root",
    "default_calibration_path",
    "resolve_calibration_path",
    "raw_to_rad",
    "rad_to_raw",
    "raw_velocity_to_rad",
    "rad_velocity_to_raw",
    "load_to_effort",
]

MAX_RAW = 4095  # highest 12-bit encoder reading
MID_RAW = 2047  # LeRobot's half-turn: homing offset = present − 2047
_HOMING_LIMIT = (1 << 11) - 1  # Homing_Offset is sign-magnitude with the sign at bit 11
_RAD_PER_STEP = 2 * math.pi / LEROBOT_STEPS_PER_TURN
LOAD_FULL_SCALE = 1000.0  # Present_Load is 0.1 % of the maximum torque

class CalibrationError(ValueError):
    """A calibration file is missing, malformed, or does not fit the SO-101."""


_ROLES = {
    # role → (LeRobot subfolder, current class name, older so101-specific name)
    "follower": ("robots", "so_follower", "so101_follower"),
    "leader": ("teleoperators", "so_leader", "so101_leader"),
}


@dataclass(frozen=True)
class MotorCalibration:
    """One motor's entry of a LeRobot calibration file (raw servo steps)."""

    id: int  # Feetech bus id
    drive_mode: int  # 0 normal, 1 inverted direction
    homing_offset: int  # written to Homing_Offset: Present_Position = actual − homing_offset
    range_min: int  # lowest Present_Position seen during calibration (Min_Position_Limit)
    range_max: int  # highest Present_Position seen during calibration (Max_Position_Limit)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise CalibrationError(f"{f.name} must be an integer, got {value!r}")
        if not 0 <= self.id <= 253:
            raise CalibrationError(f"id {self.id} outside 0..253")
        if self.drive_mode not in (0, 1):
            raise CalibrationError(f"drive_mode must be 0 or 1, got {self.drive_mode}")
        if abs(self.homing_offset) > _HOMING_LIMIT:
            raise CalibrationError(f"homing_offset {self.homing_offset} outside ±{_HOMING_LIMIT}")
        if not 0 <= self.range_min < self.range_max <= MAX_RAW:
            raise CalibrationError(
                f"range_min {self.range_min} / range_max {self.range_max}: need 0 <= min < max <= {MAX_RAW}"
            )

    @property
    def mid(self) -> float:
        return (self.range_min + self.range_max) / 2


# --- files ---------------------------------------------------------------------------------------


def load_calibration(path: str | os.PathLike[str], names: Sequence[str] = JOINT_NAMES) -> dict[str, MotorCalibration]:
    """Read a LeRobot calibration JSON; every name in ``names`` must be present with all five fields."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError as err:
        raise CalibrationError(f"calibration file {path} does not exist") from err
    except OSError as err:
        raise CalibrationError(f"cannot read calibration file {path}: {err}") from err
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise CalibrationError(f"{path} is not valid JSON: {err}") from err
    if not isinstance(data, dict):
        raise CalibrationError(f"{path}: expected an object keyed by motor name, got {type(data).__name__}")
    missing = [n for n in names if n not in data]
    if missing:
        raise CalibrationError(f"{path}: missing motors {missing} (file has {sorted(data)})")
    unknown = [n for n in data if n not in names]
    if unknown:
        raise CalibrationError(f"{path}: unknown motors {unknown}; expected {list(names)}")
    return {name: _motor_from_dict(data[name], f"{path}: motor {name!r}") for name in names}


def _motor_from_dict(entry: object, where: str) -> MotorCalibration:
    if not isinstance(entry, dict):
        raise CalibrationError(f"{where}: expected an object, got {type(entry).__name__}")
    expected = [f.name for f in fields(MotorCalibration)]
    missing = [k for k in expected if k not in entry]
    if missing:
        raise CalibrationError(f"{where}: missing fields {missing}")
    unknown = [k for k in entry if k not in expected]
    if unknown:
        raise CalibrationError(f"{where}: unknown fields {unknown}")
    try:
        return MotorCalibration(**{k: entry[k] for k in expected})
    except CalibrationError as err:
        raise CalibrationError(f"{where}: {err}") from err


def calibration_to_json(cals: Mapping[str, MotorCalibration]) -> str:
    """The text LeRobot writes (``draccus.dump(..., indent=4)``: 4-space indent, no trailing newline)."""
    return json.dumps({name: asdict(cal) for name, cal in cals.items()}, indent=4)


def save_calibration(path: str | os.PathLike[str], cals: Mapping[str, MotorCalibration]) -> Path:
    """Write ``cals`` in LeRobot's format, creating parent folders; returns the path. The file is complete or
    absent (an interrupted write leaves the previous calibration, not half of a new one)."""
    return write_text_atomically(path, calibration_to_json(cals))


def calibration_root() -> Path:
    """LeRobot's calibration folder: ``$HF_LEROBOT_CALIBRATION``, else ``$HF_LEROBOT_HOME/calibration``,
    else ``$HF_HOME/lerobot/calibration``, else ``~/.cache/huggingface/lerobot/calibration``."""
    if os.environ.get("HF_LEROBOT_CALIBRATION"):
        return Path(os.environ["HF_LEROBOT_CALIBRATION"]).expanduser()
    if os.environ.get("HF_LEROBOT_HOME"):
        return Path(os.environ["HF_LEROBOT_HOME"]).expanduser() / "calibration"
    if os.environ.get("HF_HOME"):
        hf_home = Path(os.environ["HF_HOME"]).expanduser()
    else:
        cache = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
        hf_home = Path(cache).expanduser() / "huggingface"
    return hf_home / "lerobot" / "calibration"


def default_calibration_path(robot_id: str, role: str = "follower") -> Path:
    """Where LeRobot keeps ``robot_id``'s calibration for ``role`` ("follower" or "leader").

    The current layout (``robots/so_follower/``, ``teleoperators/so_leader/``) wins; when only the
    older ``so101_follower``/``so101_leader`` file exists, that one is returned. When neither exists
    the current-layout path is returned (where ``so101 calibrate`` writes).
    """
    if role not in _ROLES:
        raise CalibrationError(f"role must be one of {sorted(_ROLES)}, got {role!r}")
    if not robot_id or "/" in robot_id or robot_id in (".", ".."):
        raise CalibrationError(f"invalid robot id {robot_id!r}")
    folder, current, older = _ROLES[role]
    root = calibration_root() / folder
    preferred = root / current / f"{robot_id}.json"
    legacy = root / older / f"{robot_id}.json"
    if not preferred.is_file() and legacy.is_file():
        return legacy
    return preferred


def resolve_calibration_path(calibration_file: str, robot_id: str, role: str = "follower", port: str = "PORT") -> Path:
    """``calibration_file`` when given, else LeRobot's file for ``robot_id``; a missing default file
    is an error that says where it looked and how to make one."""
    if calibration_file:
        return Path(calibration_file)
    path = default_calibration_path(robot_id, role)
    if not path.is_file():
        raise CalibrationError(
            f"no LeRobot calibration for robot_id {robot_id!r} at {path}: set robot_id (--robot-id) to your arm's "
            f"LeRobot id, calibration_file (--calibration-file) to its JSON, or run 'so101 calibrate --port {port} --robot-id {robot_id} --role {role}'")
    return path


# --- unit mapping ----------------------------------------------------------------------------------


def _affine(name: str, cal: MotorCalibration) -> tuple[float, float]:
    """``(scale, offset)`` with ``rad = scale·raw + offset`` for joint ``name``."""
    try:
        spec = joint(name)
    except JointSpecError as err:
        raise CalibrationError(str(err)) from err
    if spec.is_gripper:
        scale = spec.span / (cal.range_max - cal.range_min)
        if cal.drive_mode:
            return -scale, spec.upper + scale * cal.range_min
        return scale, spec.lower - scale * cal.range_min
    scale = -_RAD_PER_STEP if cal.drive_mode else _RAD_PER_STEP
    return scale, -scale * cal.mid


def raw_to_rad(name: str, raw: float, cal: MotorCalibration) -> float:
    """Present_Position (steps) → joint angle (rad). Not clamped: the truth, even out of range."""
    scale, offset = _affine(name, cal)
    return scale * raw + offset


def rad_to_raw(name: str, rad: float, cal: MotorCalibration) -> int:
    """Joint angle (rad) → the nearest Goal_Position step. Not clamped (see :meth:`JointMapping.clamp_raw`)."""
    scale, offset = _affine(name, cal)
    return round((rad - offset) / scale)


def raw_velocity_to_rad(name: str, raw: float, cal: MotorCalibration) -> float:
    """Present_Velocity (steps/s) → rad/s."""
    return _affine(name, cal)[0] * raw


def rad_velocity_to_raw(name: str, rad_s: float, cal: MotorCalibration) -> int:
    """rad/s → steps/s (for Goal_Velocity)."""
    return round(rad_s / _affine(name, cal)[0])


def load_to_effort(name: str, load: float, cal: MotorCalibration) -> float:
    """Present_Load (0.1 % of max torque, signed) → joint torque estimate in N·m (joint spec's max_effort)."""
    scale = _affine(name, cal)[0]
    return math.copysign(1.0, scale) * load / LOAD_FULL_SCALE * joint(name).max_effort


@dataclass(frozen=True)
class JointMapping:
    """Vectorised unit mapping for a fixed joint order (the driver's hot path)."""

    names: tuple[str, ...]
    ids: np.ndarray  # (J,) servo ids
    scale: np.ndarray  # (J,) rad per step
    offset: np.ndarray  # (J,) rad at raw 0
    raw_min: np.ndarray  # (J,) calibrated range_min
    raw_max: np.ndarray  # (J,) calibrated range_max
    effort_scale: np.ndarray  # (J,) N·m per Present_Load LSB (signed like scale)

    @classmethod
    def from_calibration(cls, cals: Mapping[str, MotorCalibration], names: Sequence[str] = JOINT_NAMES) -> JointMapping:
        missing = [n for n in names if n not in cals]
        if missing:
            raise CalibrationError(f"calibration has no entry for joints {missing}")
        ids = [cals[n].id for n in names]
        if len(set(ids)) != len(ids):
            raise CalibrationError(f"servo ids are not unique: {dict(zip(names, ids, strict=True))}")
        pairs = [_affine(n, cals[n]) for n in names]
        scale = np.array([p[0] for p in pairs])
        return cls(
            names=tuple(names),
            ids=np.array(ids, dtype=int),
            scale=scale,
            offset=np.array([p[1] for p in pairs]),
            raw_min=np.array([cals[n].range_min for n in names], dtype=float),
            raw_max=np.array([cals[n].range_max for n in names], dtype=float),
            effort_scale=np.sign(scale) * np.array([joint(n).max_effort for n in names]) / LOAD_FULL_SCALE,
        )

    def to_rad(self, raw: np.ndarray) -> np.ndarray:
        return self.scale * np.asarray(raw, dtype=float) + self.offset

    def to_raw(self, rad: np.ndarray) -> np.ndarray:
        """Angles → steps, rounded (not clamped)."""
        return np.rint((np.asarray(rad, dtype=float) - self.offset) / self.scale).astype(int)

    def velocity_to_rad(self, raw: np.ndarray) -> np.ndarray:
        return self.scale * np.asarray(raw, dtype=float)

    def load_to_effort(self, load: np.ndarray) -> np.ndarray:
        return self.effort_scale * np.asarray(load, dtype=float)

    def clamp_raw(self, raw: np.ndarray) -> np.ndarray:
        """Steps clamped into each joint's calibrated ``[range_min, range_max]``."""
        return np.clip(np.asarray(raw), self.raw_min, self.raw_max).astype(int)

    def limits_rad(self) -> tuple[np.ndarray, np.ndarray]:
        """The calibrated range in radians as ``(lower, upper)`` (ordered, whatever the drive mode)."""
        a, b = self.to_rad(self.raw_min), self.to_rad(self.raw_max)
        return np.minimum(a, b), np.maximum(a, b)
