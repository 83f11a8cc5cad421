"""SAGE (isaac-sim2real/sage) file layout: motion files and ``output/{real,sim}/<robot>/<source>/<motion>/`` runs.

Two levels, kept apart on purpose:

- :class:`SageRun` holds a run folder exactly as SAGE writes it (SAGE joint order, jaw as a 0..1
  fraction, timestamps in the file's unit: µs for real runs, s for sim runs), so reading and writing
  a folder is lossless and the CSV text keeps SAGE's conventions (quoted Python lists, ``repr`` floats).
- :func:`run_to_trajectories` / :func:`run_from_trajectories` convert to and from the workspace's
  :class:`JointTrajectory` (s, rad, rad/s, N·m, :data:`JOINT_NAMES` order, gripper in rad).

Jaw velocities are scaled with the same linear map as positions (fraction/s ↔ rad/s). Real SAGE
torques are unsigned current estimates; they are carried as they are.
"""

from __future__ import annotations

import csv
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from so101_common.atomic_output import staged_folder, write_text_atomically
from so101_common.joints import GRIPPER, JOINT_NAMES, JOINTS, SAGE_JOINT_NAMES
from so101_common.recording_checks import check_positions, check_recording
from so101_common.trajectory import JointTrajectory

__all__ = [
    "SageFormatError",
    "SageRun",
    "MOTION_RATE_HZ",
    "read_motion_file",
    "write_motion_file",
    "read_run",
    "write_run",
    "run_to_trajectories",
    "run_from_trajectories",
    "list_motion_runs",
    "run_kind_from_path",
]

_LOG = logging.getLogger(__name__)

MOTION_RATE_HZ = 50.0
"""Frame rate of SAGE's SO-101 motion files."""

_CONTROL_HEADER = ["type", "timestamp", "positions"]
_STATE_HEADER = ["type", "timestamp", "positions", "velocities", "torques"]
_EVENT_HEADER = ["type", "timestamp", "event"]
_REAL_TIME_SCALE = 1e-6  # real runs stamp in µs
_SIM_TIME_SCALE = 1.0  # sim runs stamp in s


class SageFormatError(ValueError):
    """A SAGE motion file or run folder is missing, malformed or inconsistent."""


@dataclass
class SageRun:
    """One SAGE run folder, values exactly as in the files."""

    kind: str  # "real" (timestamps µs) or "sim" (timestamps s)
    joint_names: tuple[str, ...]  # joint_list.txt, SAGE names (Rotation, …, Jaw)
    control_time: np.ndarray  # (N,) control.csv timestamps, file unit
    control_position: np.ndarray  # (N, J) commanded targets, rad / jaw fraction
    state_time: np.ndarray  # (M,) state_motor.csv timestamps, file unit
    state_position: np.ndarray  # (M, J) measured positions, rad / jaw fraction
    state_velocity: np.ndarray  # (M, J) rad/s / jaw fraction per s
    state_torque: np.ndarray  # (M, J) N·m (real: unsigned current estimates)
    events: list[tuple[str, float]] = field(default_factory=list)  # (event name, timestamp in file unit)

    def __post_init__(self) -> None:
        if self.kind not in ("real", "sim"):
            raise SageFormatError(f"run kind must be 'real' or 'sim', got {self.kind!r}")
        j = len(self.joint_names)
        for name in ("control_position", "state_position", "state_velocity", "state_torque"):
            value = np.asarray(getattr(self, name), dtype=np.float64)
            rows = len(self.control_time) if name == "control_position" else len(self.state_time)
            if value.shape != (rows, j):
                raise SageFormatError(f"{name} has shape {value.shape}, expected ({rows}, {j})")
            setattr(self, name, value)
        self.control_time = np.asarray(self.control_time, dtype=np.float64)
        self.state_time = np.asarray(self.state_time, dtype=np.float64)

    @property
    def time_scale(self) -> float:
        """Seconds per file time unit."""
        return _REAL_TIME_SCALE if self.kind == "real" else _SIM_TIME_SCALE

    def event_time(self, name: str) -> float | None:
        """The first ``name`` event in seconds, or None when the run has none."""
        for event, stamp in self.events:
            if event == name:
                return stamp * self.time_scale
        return None


# ----------------------------------------------------------------------------------------------- motion files


def read_motion_file(path: str | Path, rate_hz: float = MOTION_RATE_HZ) -> JointTrajectory:
    """A SAGE motion file → command trajectory (rad, gripper rad, time from 0 at ``rate_hz``)."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as err:
        raise SageFormatError(f"cannot read motion file {path}: {err}") from err
    if not lines:
        raise SageFormatError(f"motion file {path} is empty")
    header = [h.strip() for h in lines[0].split(",")]
    sage_to_ros = _sage_column_map(header, path)
    numbered = [(number, line) for number, line in enumerate(lines[1:], start=2) if line.strip()]
    if not numbered:
        raise SageFormatError(f"motion file {path}: no motion rows")
    try:
        values = np.array([[float(v) for v in line.split(",")] for _, line in numbered], dtype=np.float64)
    except ValueError as err:
        raise SageFormatError(f"motion file {path}: non-numeric value: {err}") from err
    if values.ndim != 2 or values.shape[1] != len(header):
        raise SageFormatError(f"motion file {path}: rows must have {len(header)} values")
    not_finite = np.flatnonzero(~np.isfinite(values).all(axis=1))
    if len(not_finite):
        number, line = numbered[not_finite[0]]
        raise SageFormatError(f"motion file {path}:{number}: expected finite numbers, got {line}")
    position = _sage_to_ros_matrix(values, header, sage_to_ros)
    check_positions(position, path, first_line=2, error=SageFormatError)
    time = np.arange(len(values)) / rate_hz
    return JointTrajectory(time, position)


def write_motion_file(trajectory: JointTrajectory, path: str | Path) -> None:
    """A command trajectory (any joint order) → SAGE motion file, six decimals as SAGE's files have."""
    fractions = _ros_to_sage_matrix(trajectory.reordered(JOINT_NAMES).position)
    lines = [",".join(SAGE_JOINT_NAMES)] + [",".join(f"{v:.6f}" for v in row) for row in fractions]
    write_text_atomically(path, "\n".join(lines) + "\n")


# ----------------------------------------------------------------------------------------------- run folders


def run_kind_from_path(folder: str | Path) -> str | None:
    """``…/output/<kind>/<robot>/<source>/<motion>`` → kind, or None when the path does not say."""
    parts = Path(folder).resolve().parts
    return parts[-4] if len(parts) >= 4 and parts[-4] in ("real", "sim") else None


def read_run(folder: str | Path, kind: str | None = None) -> SageRun:
    """Read a SAGE run folder as it is. ``kind`` defaults to the ``real``/``sim`` path component. Times that jump
    and values that cannot be radians are refused (:mod:`so101_common.recording_checks`)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SageFormatError(f"SAGE run folder {folder} does not exist")
    kind = kind or run_kind_from_path(folder)
    if kind is None:
        raise SageFormatError(f"cannot tell whether {folder} is a real or a sim run; pass kind='real' or 'sim'")
    joint_list = folder / "joint_list.txt"
    if joint_list.is_file():
        names = tuple(line.strip().split("/")[-1] for line in joint_list.read_text().splitlines() if line.strip())
    else:
        names = SAGE_JOINT_NAMES  # SAGE's analysis falls back on the robot's joint config the same way
    control = _read_csv(folder / "control.csv", _CONTROL_HEADER)
    state = _read_csv(folder / "state_motor.csv", _STATE_HEADER)
    events: list[tuple[str, float]] = []
    if (folder / "event.csv").is_file():
        for row in _read_csv(folder / "event.csv", _EVENT_HEADER):
            events.append((row[2], _parse_float(row[1], folder / "event.csv")))
    j = len(names)
    run = SageRun(
        kind=kind,
        joint_names=names,
        control_time=np.array([_parse_float(r[1], folder / "control.csv") for r in control]),
        control_position=_parse_lists([r[2] for r in control], j, folder / "control.csv"),
        state_time=np.array([_parse_float(r[1], folder / "state_motor.csv") for r in state]),
        state_position=_parse_lists([r[2] for r in state], j, folder / "state_motor.csv"),
        state_velocity=_parse_lists([r[3] for r in state], j, folder / "state_motor.csv"),
        state_torque=_parse_lists([r[4] for r in state], j, folder / "state_motor.csv"),
        events=events,
    )
    command_si, state_si = run_to_trajectories(run)
    check_recording(command_si.time, command_si.position, folder / "control.csv", first_line=2, error=SageFormatError)
    check_recording(state_si.time, state_si.position, folder / "state_motor.csv", first_line=2, allow_nan=True,
                    error=SageFormatError)
    return run


def write_run(run: SageRun, folder: str | Path) -> None:
    """Write a run folder the way SAGE does (csv module quoting, Python list text, ``repr`` floats).

    Complete or absent: the files are written under a temporary name and published when all are written
    (:func:`so101_common.atomic_output.staged_folder`; ``state_motor.csv``, which marks a run folder, last)."""
    with staged_folder(folder, marker="state_motor.csv") as staging:
        _write_run_files(run, staging)


def _write_run_files(run: SageRun, folder: Path) -> None:
    (folder / "joint_list.txt").write_text("".join(f"{name}\n" for name in run.joint_names))
    with open(folder / "control.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(_CONTROL_HEADER)
        for t, p in zip(run.control_time, run.control_position, strict=True):
            writer.writerow(["CONTROL", repr(float(t)), _list_text(p)])
    with open(folder / "state_motor.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(_STATE_HEADER)
        for t, p, v, e in zip(run.state_time, run.state_position, run.state_velocity, run.state_torque, strict=True):
            writer.writerow(["STATE_MOTOR", repr(float(t)), _list_text(p), _list_text(v), _list_text(e)])
    if run.events:
        with open(folder / "event.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(_EVENT_HEADER)
            for name, stamp in run.events:
                # SAGE writes the enable event as integer 0; keep integral stamps integral.
                text = str(int(stamp)) if float(stamp).is_integer() else repr(float(stamp))
                writer.writerow(["EVENT", text, name])


def list_motion_runs(root: str | Path) -> list[Path]:
    """Run folders under ``root``: ``root`` itself if it is one, else every sub-folder holding a state_motor.csv."""
    root = Path(root)
    if (root / "state_motor.csv").is_file():
        return [root]
    # direct children first (they may be symlinks, which rglob does not follow), else any depth
    runs = sorted(p for p in root.iterdir() if (p / "state_motor.csv").is_file()) if root.is_dir() else []
    runs = runs or sorted(p.parent for p in root.rglob("state_motor.csv"))
    if not runs:
        raise SageFormatError(f"no SAGE run folders (with state_motor.csv) under {root}")
    return runs


# ----------------------------------------------------------------------------------------------- conversions


def run_to_trajectories(run: SageRun) -> tuple[JointTrajectory, JointTrajectory]:
    """``(command, state)`` in seconds on the run's own clock, SI units, :data:`JOINT_NAMES` order."""
    sage_to_ros = _sage_column_map(list(run.joint_names), f"{run.kind} run joint list")
    names = list(run.joint_names)
    command = JointTrajectory(
        run.control_time * run.time_scale, _sage_to_ros_matrix(run.control_position, names, sage_to_ros)
    )
    velocity = _sage_to_ros_matrix(run.state_velocity, names, sage_to_ros, offset=False)
    state = JointTrajectory(
        run.state_time * run.time_scale,
        _sage_to_ros_matrix(run.state_position, names, sage_to_ros),
        velocity,
        _sage_to_ros_matrix(run.state_torque, names, sage_to_ros, scale=False),
    )
    return command, state


def run_from_trajectories(
    command: JointTrajectory,
    state: JointTrajectory,
    kind: str,
    events: Sequence[tuple[str, float]] = (),
) -> SageRun:
    """SI trajectories (times in s) → a SAGE run; ``events`` as (name, seconds)."""
    scale = _REAL_TIME_SCALE if kind == "real" else _SIM_TIME_SCALE
    command = command.reordered(JOINT_NAMES)
    state = state.reordered(JOINT_NAMES)
    return SageRun(
        kind=kind,
        joint_names=SAGE_JOINT_NAMES,
        control_time=command.time / scale,
        control_position=_ros_to_sage_matrix(command.position),
        state_time=state.time / scale,
        state_position=_ros_to_sage_matrix(state.position),
        state_velocity=_ros_to_sage_matrix(state.velocity, offset=False),
        state_torque=np.array(state.effort, dtype=np.float64),
        events=[(name, stamp / scale) for name, stamp in events],
    )


# ----------------------------------------------------------------------------------------------- helpers

_GRIPPER_INDEX = JOINT_NAMES.index(GRIPPER.name)


def _sage_column_map(header: Sequence[str], where: object) -> dict[str, str]:
    """SAGE (or ROS) column names → ROS names; every SO-101 joint must be present."""
    known = {j.sage_name: j.name for j in JOINTS} | {j.name: j.name for j in JOINTS}
    unknown = [h for h in header if h not in known]
    mapped = {known[h] for h in header if h in known}
    missing = [n for n in JOINT_NAMES if n not in mapped]
    if unknown or missing:
        raise SageFormatError(f"{where}: joint columns {list(header)} do not name the SO-101 joints "
                              f"(unknown {unknown}, missing {missing}); expected {list(SAGE_JOINT_NAMES)}")
    return {h: known[h] for h in header}


def _sage_to_ros_matrix(values: np.ndarray, header: Sequence[str], sage_to_ros: dict[str, str],
                        offset: bool = True, scale: bool = True) -> np.ndarray:
    """Columns in file order → :data:`JOINT_NAMES` order; jaw fraction → rad (rate: scale only)."""
    column_of = {sage_to_ros[h]: i for i, h in enumerate(header)}
    index = [column_of[name] for name in JOINT_NAMES]
    out = np.array(values[:, index], dtype=np.float64)
    if scale:
        with np.errstate(over="ignore"):  # an absurd value becomes inf, which the plausibility checks refuse
            out[:, _GRIPPER_INDEX] *= GRIPPER.span
        if offset:
            out[:, _GRIPPER_INDEX] += GRIPPER.lower
    return out


def _ros_to_sage_matrix(values: np.ndarray, offset: bool = True) -> np.ndarray:
    out = np.array(values, dtype=np.float64)
    if offset:
        out[:, _GRIPPER_INDEX] -= GRIPPER.lower
    out[:, _GRIPPER_INDEX] /= GRIPPER.span
    return out


def _read_csv(path: Path, header: list[str]) -> list[list[str]]:
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError as err:
        raise SageFormatError(f"cannot read {path}: {err}") from err
    if not rows or [h.strip() for h in rows[0]] != header:
        raise SageFormatError(f"{path}: header must be {','.join(header)}, got {rows[0] if rows else 'nothing'}")
    body = [r for r in rows[1:] if r]
    bad = next((i for i, r in enumerate(body) if len(r) != len(header)), None)
    if bad is not None:
        raise SageFormatError(f"{path}: row {bad + 2} has {len(body[bad])} fields, expected {len(header)}")
    return body


def _parse_float(text: str, where: Path) -> float:
    try:
        return float(text)
    except ValueError as err:
        raise SageFormatError(f"{where}: bad number {text!r}") from err


def _parse_lists(texts: list[str], width: int, where: Path) -> np.ndarray:
    """Quoted Python lists → (N, width), vectorised (one split over all rows)."""
    if not texts:
        return np.zeros((0, width))
    stripped = [t.strip() for t in texts]
    if any(not (t.startswith("[") and t.endswith("]")) for t in stripped):
        raise SageFormatError(f"{where}: list fields must look like [v1, v2, ...]")
    tokens = ",".join(t[1:-1] for t in stripped).split(",")
    try:
        flat = np.array([float(v) for v in tokens], dtype=np.float64)
    except ValueError as err:
        raise SageFormatError(f"{where}: non-numeric list entry: {err}") from err
    if flat.size != len(texts) * width:
        raise SageFormatError(f"{where}: every list must hold {width} values (the joint list's length)")
    return flat.reshape(len(texts), width)


def _list_text(row: np.ndarray) -> str:
    """``str(list)`` of Python floats, as SAGE's writers produce (``nan`` stays ``nan``)."""
    return "[" + ", ".join(repr(float(v)) if math.isfinite(v) else str(float(v)) for v in row) + "]"
