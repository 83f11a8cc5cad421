"""The SO-101 driver's logic without ROS: one cycle reads the arm and writes its goals.

A cycle is one SYNC_READ of the feedback block of all six servos, turned into a
:class:`JointSample` (rad, rad/s, N·m) plus :class:`ServoTelemetry`, then one SYNC_WRITE of the
goal positions. Commands arrive by joint name (a subset is fine: the other joints keep their goal),
are validated (:class:`~so101_driver.errors.CommandRejected` says why), clamped to the calibrated
range and written on the next cycle.

Faults never stop the loop: a servo that does not answer is marked faulted with the reason, its
joint reads NaN, every goal is still written (the others keep working, the faulted one gets the
held goal when it answers again) and the fault clears by itself on its next good reply. A port
that fails (adapter unplugged) is closed and reopened every ``reconnect_interval_s``.
Diagnostics come out as plain :class:`DiagnosticEntry` values that the node maps to
``diagnostic_msgs``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from so101_common.diagnostics import Level
from so101_common.joints import GRIPPER, JOINT_NAMES
from so101_driver.bus import Feedback
from so101_driver.calibration import JointMapping, MotorCalibration
from so101_driver.control_table import decode_error_bits
from so101_driver.errors import BusError, CommandRejected, PortError

__all__ = [
    "BusLike",
    "DriverCore",
    "DriverConfig",
    "JointSample",
    "ServoTelemetry",
    "CycleResult",
    "CommandResult",
    "DiagnosticEntry",
]

logger = logging.getLogger(__name__)


class BusLike(Protocol):
    """What the core needs of :class:`so101_driver.bus.FeetechBus` (a fake implements it in tests)."""

    port: str

    @property
    def is_connected(self) -> bool: ...

    def connect(self) -> object: ...
    def close(self) -> None: ...
    def sync_read_feedback_partial(self, ids: Sequence[int], goals: Mapping[int, int] | None = None,
                                   ) -> tuple[dict[int, Feedback], dict[int, BusError]]: ...
    def sync_write_goal_positions(self, goals: Mapping[int, int]) -> None: ...
    def set_torque(self, ids: Iterable[int], enabled: bool) -> None: ...
    def configure_lerobot(self, ids: Sequence[int], gripper_id: int | None = None) -> None: ...


@dataclass(frozen=True)
class DiagnosticEntry:
    name: str
    level: Level
    message: str
    hardware_id: str
    values: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DriverConfig:
    temperature_warn_c: float = 60.0  # WARN at or above this servo temperature
    reconnect_interval_s: float = 1.0  # how often a failed port is reopened
    configure_servos: bool = False  # write LeRobot's servo settings at start (configure_lerobot)
    write_goals: bool = True  # False for a read-only arm (the leader): cycles only read


@dataclass(frozen=True)
class JointSample:
    """Joint state in :attr:`DriverCore.names` order; NaN for joints whose servo did not answer."""

    stamp: float  # clock() when the feedback arrived, s
    names: tuple[str, ...]
    position: np.ndarray  # rad
    velocity: np.ndarray  # rad/s
    effort: np.ndarray  # N·m, estimated from Present_Load
    valid: np.ndarray  # bool: servo answered this cycle


@dataclass(frozen=True)
class ServoTelemetry:
    joint: str
    servo_id: int
    feedback: Feedback | None  # None when the servo did not answer this cycle
    faulted: bool
    fault_reason: str
    consecutive_failures: int
    total_failures: int

    @property
    def flags(self) -> list[str]:
        return [b.name for b in self.feedback.flags] if self.feedback else []


@dataclass(frozen=True)
class CycleResult:
    sample: JointSample | None  # None when no servo answered
    telemetry: tuple[ServoTelemetry, ...]
    bus_ok: bool


@dataclass(frozen=True)
class CommandResult:
    goals: dict[str, float]  # joint → goal actually applied (rad, after clamping)
    clamped: tuple[str, ...]  # joints whose requested goal was outside the calibrated range


@dataclass
class _ServoState:
    faulted: bool = False
    reason: str = "not read yet"
    consecutive: int = 0
    total: int = 0
    feedback: Feedback | None = None


class DriverCore:
    """The driver loop's state and steps; call :meth:`cycle` at the control rate."""

    def __init__(self, bus: BusLike, calibration: Mapping[str, MotorCalibration],
                 names: Sequence[str] = JOINT_NAMES, config: DriverConfig | None = None,
                 clock: Callable[[], float] = time.monotonic, log: logging.Logger | None = None) -> None:
        self.bus = bus
        self.log = log or logger
        self.config = config or DriverConfig()
        self.names = tuple(names)
        self.mapping = JointMapping.from_calibration(calibration, self.names)
        self.ids = [int(i) for i in self.mapping.ids]
        self.calibration = {n: calibration[n] for n in self.names}
        self._clock = clock
        self._index = {n: k for k, n in enumerate(self.names)}
        self._servos = {n: _ServoState() for n in self.names}
        # goal of each joint in steps; a joint's goal is known once it was read or commanded, and
        # only known goals are written (never a made-up goal for a servo never seen)
        self._goal_raw: np.ndarray = np.zeros(len(self.names), dtype=int)
        self._goal_known = np.zeros(len(self.names), dtype=bool)
        self._lock = threading.RLock()
        self.torque_enabled = False
        self.bus_error = ""  # non-empty while the port itself is failing
        self._next_reconnect = 0.0
        self.cycles = 0
        self.commands_accepted = 0
        self.commands_rejected = 0
        self.last_rejection = ""
        self._cycle_times: list[float] = []

    # --- life cycle ---------------------------------------------------------------------------

    def start(self, torque_on: bool = False) -> None:
        """Open the port, optionally configure the servos, read the arm once, optionally enable torque."""
        with self._lock:
            self.bus.connect()
            if self.config.configure_servos:
                gripper = self.calibration[GRIPPER.name].id if GRIPPER.name in self.calibration else None
                self.bus.configure_lerobot(self.ids, gripper)
            if torque_on:
                self.set_torque(True)
            else:
                self.cycle()

    def stop(self, torque_off: bool = False) -> None:
        """Release the port (torque is left as it is unless ``torque_off``)."""
        with self._lock:
            if torque_off and self.bus.is_connected:
                try:
                    self.set_torque(False)
                except BusError as err:
                    self.log.warning("could not turn torque off while stopping: %s", err)
            self.bus.close()

    # --- the cycle ----------------------------------------------------------------------------

    def cycle(self) -> CycleResult:
        """Read every servo, then write every goal (one transaction each)."""
        with self._lock:
            started = self._clock()
            if not self._ensure_port():
                return self._result(None)
            try:
                feedback, failures = self.bus.sync_read_feedback_partial(self.ids, self._goals_to_write())
                stamp = self._clock()
                sample = self._update(feedback, failures, stamp)
            except PortError as err:
                self._port_failed(err)
                return self._result(None)
            self.cycles += 1
            self._cycle_times.append(self._clock() - started)
            del self._cycle_times[:-200]
            return self._result(sample)

    def _ensure_port(self) -> bool:
        if self.bus.is_connected and not self.bus_error:
            return True
        now = self._clock()
        if now < self._next_reconnect:
            return False
        self._next_reconnect = now + self.config.reconnect_interval_s
        try:
            self.bus.close()
            self.bus.connect()
        except BusError as err:
            self.bus_error = str(err)
            self.log.debug("reconnect to %s failed: %s", self.bus.port, err)
            return False
        self.log.info("port %s reopened", self.bus.port)
        self.bus_error = ""
        return True

    def _port_failed(self, err: BusError) -> None:
        if not self.bus_error:
            self.log.error("bus on %s failed: %s", self.bus.port, err)
        self.bus_error = str(err) or type(err).__name__
        self._next_reconnect = self._clock() + self.config.reconnect_interval_s
        for state in self._servos.values():
            state.feedback = None

    def _update(self, feedback: Mapping[int, Feedback], failures: Mapping[int, BusError], stamp: float) -> JointSample | None:
        n = len(self.names)
        raw_pos, raw_vel, raw_load = np.zeros(n), np.zeros(n), np.zeros(n)
        valid = np.zeros(n, dtype=bool)
        for k, (name, servo_id) in enumerate(zip(self.names, self.ids, strict=True)):
            state = self._servos[name]
            fb = feedback.get(servo_id)
            state.feedback = fb
            if fb is None:
                err = failures.get(servo_id)
                reason = str(err) if err is not None else f"no reply from servo {servo_id}"
                if not state.faulted:
                    self.log.warning("%s (servo %d) faulted: %s", name, servo_id, reason)
                state.faulted, state.reason = True, reason
                state.consecutive += 1
                state.total += 1
                continue
            if state.faulted:
                self.log.info("%s (servo %d) answers again after %d failed cycles", name, servo_id, state.consecutive)
            state.faulted, state.reason, state.consecutive = False, "", 0
            valid[k] = True
            raw_pos[k], raw_vel[k], raw_load[k] = fb.position, fb.velocity, fb.load
        if not valid.any():
            return None
        new = valid & ~self._goal_known
        if new.any():  # first reading of a joint: hold it where it is
            self._goal_raw = np.where(new, self.mapping.clamp_raw(raw_pos), self._goal_raw)
            self._goal_known = self._goal_known | new
        return self._sample(stamp, raw_pos, raw_vel, raw_load, valid)

    def _sample(self, stamp: float, raw_pos: np.ndarray, raw_vel: np.ndarray, raw_load: np.ndarray,
                valid: np.ndarray) -> JointSample:
        nan = np.where(valid, 0.0, np.nan)
        return JointSample(
            stamp=stamp,
            names=self.names,
            position=self.mapping.to_rad(raw_pos) + nan,
            velocity=self.mapping.velocity_to_rad(raw_vel) + nan,
            effort=self.mapping.load_to_effort(raw_load) + nan,
            valid=valid,
        )

    def _result(self, sample: JointSample | None) -> CycleResult:
        return CycleResult(sample, self.telemetry(), not self.bus_error)

    def telemetry(self) -> tuple[ServoTelemetry, ...]:
        return tuple(
            ServoTelemetry(name, servo_id, s.feedback, s.faulted or bool(self.bus_error),
                           self.bus_error or s.reason, s.consecutive, s.total)
            for name, servo_id in zip(self.names, self.ids, strict=True)
            for s in (self._servos[name],)
        )

    # --- commands -----------------------------------------------------------------------------

    def command(self, names: Sequence[str], positions: Sequence[float]) -> CommandResult:
        """Set goals for the named joints (others keep theirs); raises :class:`CommandRejected`."""
        with self._lock:
            try:
                if not self.config.write_goals:
                    raise CommandRejected("this arm is read-only (write_goals is off)")
                result = self._command(list(names), positions)
            except CommandRejected as err:
                self.commands_rejected += 1
                self.last_rejection = str(err)
                raise
            self.commands_accepted += 1
            return result

    def _command(self, names: list[str], positions: Sequence[float]) -> CommandResult:
        if len(names) != len(positions):
            raise CommandRejected(f"{len(names)} names but {len(positions)} positions")
        if not names:
            raise CommandRejected("empty command: no joint names")
        unknown = [n for n in names if n not in self._index]
        if unknown:
            raise CommandRejected(f"unknown joints {unknown}; expected names from {list(self.names)}")
        if len(set(names)) != len(names):
            raise CommandRejected(f"duplicate joint names in {names}")
        try:
            values = np.asarray(positions, dtype=float)
        except (TypeError, ValueError) as err:
            raise CommandRejected(f"positions are not numbers: {err}") from err
        bad = [n for n, v in zip(names, values, strict=True) if not math.isfinite(v)]
        if bad:
            raise CommandRejected(f"non-finite positions for {bad}")
        idx = np.array([self._index[n] for n in names])
        raw = (values - self.mapping.offset[idx]) / self.mapping.scale[idx]
        clamped_raw = np.clip(np.rint(raw), self.mapping.raw_min[idx], self.mapping.raw_max[idx]).astype(int)
        clamped = tuple(n for n, r, c in zip(names, np.rint(raw), clamped_raw, strict=True) if r != c)
        self._goal_raw = self._goal_raw.copy()
        self._goal_raw[idx] = clamped_raw
        self._goal_known = self._goal_known.copy()
        self._goal_known[idx] = True
        applied = self.mapping.scale[idx] * clamped_raw + self.mapping.offset[idx]
        return CommandResult(dict(zip(names, applied.tolist(), strict=True)), clamped)

    def goals(self) -> dict[str, float]:
        """Current goal of every joint whose goal is known (rad)."""
        with self._lock:
            rad = self.mapping.to_rad(self._goal_raw)
            return {n: float(r) for n, r, k in zip(self.names, rad, self._goal_known, strict=True) if k}

    def _goals_to_write(self) -> dict[int, int] | None:
        """Servo id → goal step of every known goal (None for a read-only arm or when none is known)."""
        if not self.config.write_goals:
            return None
        goals = {i: int(g) for i, g, k in zip(self.ids, self._goal_raw.tolist(), self._goal_known, strict=True) if k}
        return goals or None

    def _write_goals(self) -> None:
        goals = self._goals_to_write()
        if goals:
            self.bus.sync_write_goal_positions(goals)

    # --- torque -------------------------------------------------------------------------------

    def set_torque(self, enabled: bool) -> None:
        """Torque on (goals first reset to the present positions, so the arm does not jump) or off.

        Turning torque off tries every servo even when one fails; any failure raises afterwards.
        """
        with self._lock:
            if enabled:
                feedback, failures = self.bus.sync_read_feedback_partial(self.ids)
                if failures:
                    raise next(iter(failures.values()))
                self._update(feedback, failures, self._clock())
                self._goal_raw = self.mapping.clamp_raw(np.array([feedback[i].position for i in self.ids]))
                self._goal_known = np.ones(len(self.names), dtype=bool)
                self._write_goals()
                self.bus.set_torque(self.ids, True)
                self.torque_enabled = True
                return
            errors: list[BusError] = []
            for servo_id in self.ids:
                try:
                    self.bus.set_torque([servo_id], False)
                except BusError as err:
                    errors.append(err)
            self.torque_enabled = False
            if errors:
                raise errors[0]

    # --- diagnostics --------------------------------------------------------------------------

    def cycle_rate_hz(self) -> float:
        """Mean rate the recent cycles could sustain (1 / mean cycle duration)."""
        times = self._cycle_times
        return len(times) / sum(times) if times and sum(times) > 0 else 0.0

    def diagnostics(self, prefix: str = "so101_driver") -> list[DiagnosticEntry]:
        with self._lock:
            telemetry = self.telemetry()
            entries = [self._bus_entry(prefix, telemetry)]
            goals = self.goals()
            entries += [self._servo_entry(prefix, t, goals.get(t.joint)) for t in telemetry]
            return entries

    def _bus_entry(self, prefix: str, telemetry: Sequence[ServoTelemetry]) -> DiagnosticEntry:
        faulted = [t.joint for t in telemetry if t.faulted]
        if self.bus_error:
            level, message = Level.ERROR, f"port failing: {self.bus_error}"
        elif len(faulted) == len(telemetry):
            level, message = Level.ERROR, "no servo answers"
        elif faulted:
            level, message = Level.WARN, f"servos not answering: {', '.join(faulted)}"
        else:
            level, message = Level.OK, "all servos answering"
        values = {
            "port": self.bus.port,
            "torque_enabled": str(self.torque_enabled),
            "cycles": str(self.cycles),
            "cycle_capacity_hz": f"{self.cycle_rate_hz():.1f}",
            "commands_accepted": str(self.commands_accepted),
            "commands_rejected": str(self.commands_rejected),
            "last_rejection": self.last_rejection,
            "faulted_joints": ",".join(faulted),
        }
        return DiagnosticEntry(f"{prefix}: bus", level, message, self.bus.port, values)

    def _servo_entry(self, prefix: str, t: ServoTelemetry, goal: float | None) -> DiagnosticEntry:
        values = {"servo_id": str(t.servo_id), "consecutive_failures": str(t.consecutive_failures),
                  "total_failures": str(t.total_failures)}
        if goal is not None:
            values["goal_rad"] = f"{goal:.4f}"
        fb = t.feedback
        if t.faulted or fb is None:
            values["fault"] = t.fault_reason
            return DiagnosticEntry(f"{prefix}: {t.joint}", Level.ERROR, t.fault_reason or "no data",
                                   f"servo {t.servo_id}", values)
        values.update({
            "position_raw": str(fb.position),
            "velocity_raw": str(fb.velocity),
            "load_permille": str(fb.load),
            "voltage_v": f"{fb.voltage_v:.1f}",
            "temperature_c": str(fb.temperature),
            "current_a": f"{fb.current_a:.3f}",
            "moving": str(fb.moving),
            "status_bits": f"0x{fb.status:02X}",
            "error_byte": f"0x{fb.error:02X}",
            "errors": ",".join(b.name for b in decode_error_bits(fb.status | fb.error)),
        })
        flags = decode_error_bits(fb.status | fb.error)
        if flags:
            return DiagnosticEntry(f"{prefix}: {t.joint}", Level.ERROR,
                                   "servo reports " + ", ".join(b.name for b in flags), f"servo {t.servo_id}", values)
        if fb.temperature >= self.config.temperature_warn_c:
            return DiagnosticEntry(f"{prefix}: {t.joint}", Level.WARN, f"hot: {fb.temperature} °C",
                                   f"servo {t.servo_id}", values)
        return DiagnosticEntry(f"{prefix}: {t.joint}", Level.OK, "ok", f"servo {t.servo_id}", values)
