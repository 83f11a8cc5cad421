"""The SO-101 driver's logic without ROS: one cycle reads the arm and writes its goals.

A cycle is one SYNC_READ of the feedback block of all six servos, turned into a
:class:`JointSample` (rad, rad/s, N·m) plus :class:`ServoTelemetry`, then one SYNC_WRITE of the
goal positions. Commands arrive by joint name (a subset is fine: the other joints keep their goal),
are validated (:class:`~so101_driver.errors.CommandRejected` says why; counted per reason), clamped to
the calibrated range and written with the next cycle, or at once with ``write_on_command`` (at most one
such extra write per cycle: faster commands are coalesced, the latest wins, so no publisher rate can
starve the bus). Every goal write, whoever sent the goal, is cut to ``max_relative_target`` from the
servo's present position (LeRobot's convention): no command can jump the arm, and a servo whose present
position is not known this cycle gets no goal until it is.

Faults never stop the loop and never slow the healthy joints: a servo that does not answer is
marked faulted with the reason, its joint reads NaN, every goal is still written (the others keep
working, the faulted one gets the held goal when it answers again) and the fault clears by itself on
its next good reply. After ``missing_after_failures`` failed cycles in a row the servo leaves the
cycle's SYNC_READ (each cycle would otherwise wait for it) and is probed on its own, at most once a
cycle, with a backoff from ``probe_interval_s`` doubling up to ``probe_interval_max_s``; it rejoins
the cycle on its first reply. A port that is not there (yet) or fails (adapter unplugged) is reopened
with a backoff from ``reconnect_initial_s`` doubling up to ``reconnect_interval_s``: :meth:`start`
does not fail for a missing port, it waits, and the start actions (configuration, torque) run once
the port opens. Diagnostics come out as plain :class:`~so101_driver.health.DiagnosticEntry` values
(the node maps them to ``diagnostic_msgs``): fault rates per second beside the configured and
achieved cycle rates, see :mod:`so101_driver.health`.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from so101_common.joints import GRIPPER, JOINT_NAMES
from so101_common.rejections import RejectReason, diagnostic_key
from so101_driver.errors import BusError, CommandRejected, LostReply, PortError
from so101_driver.feedback import BusCounters, Feedback
from so101_driver.health import (
    CYCLE_CAPACITY_KEY,
    DiagnosticEntry,
    FaultWindow,
    bus_status,
    count_values,
    rate_values,
    servo_entry,
    servo_fault_kinds,
)
from so101_driver.readings import CommandResult, CycleResult, JointSample, ServoTelemetry
from so101_feetech.calibration import JointMapping, MotorCalibration

__all__ = [
    "BusLike",
    "DriverCore",
    "DriverConfig",
    "JointSample",
    "ServoTelemetry",
    "CycleResult",
    "CommandResult",
    "DiagnosticEntry",
]  # Level, DiagnosticEntry (health) and the readings (readings) are re-exported: one import for users

logger = logging.getLogger(__name__)


class BusLike(Protocol):
    """What the core needs of :class:`so101_driver.bus.FeetechBus` (a fake implements it in tests)."""

    port: str
    counters: BusCounters

    @property
    def is_connected(self) -> bool: ...

    def connect(self) -> object: ...
    def close(self) -> None: ...
    def sync_read_feedback_partial(self, ids: Sequence[int], goals: Mapping[int, int] | None = None,
                                   retries: int | None = None, budget_s: float | None = None,
                                   ) -> tuple[dict[int, Feedback], dict[int, BusError]]: ...
    def sync_write_goal_positions(self, goals: Mapping[int, int]) -> None: ...
    def set_torque(self, ids: Iterable[int], enabled: bool) -> None: ...
    def configure_lerobot(self, ids: Sequence[int], gripper_id: int | None = None) -> dict[int, list[str]]: ...
    def patient(self) -> AbstractContextManager[None]: ...


@dataclass(frozen=True)
class DriverConfig:
    rate_hz: float = 100.0  # configured cycle rate (the caller's clock); 0: the achieved rate is not judged
    temperature_warn_c: float = 60.0  # WARN at or above this servo temperature
    voltage_warn_min_v: float = 0.0  # WARN below this supply voltage (0: off; 12 V arms: e.g. 10.5)
    voltage_warn_max_v: float = 0.0  # WARN above this supply voltage (0: off)
    voltage_sag_warn_fraction: float = 0.85  # WARN below this fraction of the highest voltage the servo reported (0: off)
    current_warn_a: float = 2.0  # WARN at or above this |Present_Current| (0: off)
    fault_warn_per_s: float = 1.0  # retries + timeouts + corrupt packets per second: WARN at or above
    fault_error_per_s: float = 200.0  # ... ERROR at or above (a third of six servos' replies at 100 Hz)
    rate_warn_fraction: float = 0.9  # achieved / configured cycle rate: WARN below
    rate_error_fraction: float = 0.5  # ... ERROR below
    retry_budget_fraction: float = 0.8  # retries of a cycle's read must end within this share of the period
    missing_after_failures: int = 3  # failed cycles in a row before a servo leaves the cycle and is probed
    # s without a reply before a servo is *lost* (a servo fault, so101_common.servo_faults, that stops a motion);
    # shorter silences (a loaded host, a noisy cable) are bus statistics and retried
    lost_after_s: float = 0.5
    probe_interval_s: float = 0.25  # first probe of a missing servo; the interval doubles after each miss
    probe_interval_max_s: float = 2.0  # longest interval between probes of a missing servo
    reconnect_initial_s: float = 0.1  # first retry of a missing/failed port; doubles after each failure
    reconnect_interval_s: float = 1.0  # longest interval between tries to (re)open the port
    configure_servos: bool = False  # write LeRobot's servo settings at start (configure_lerobot)
    configure_attempts: int = 5  # tries of the whole configuration before the start fails
    write_goals: bool = True  # False for a read-only arm (the leader): cycles only read
    # a command's goals go out at once (one SYNC_WRITE, no reply) instead of waiting for the next cycle:
    # 0-10 ms less command-to-servo delay at 100 Hz, with a phase that would change from start to start
    write_on_command: bool = True
    # rad: the most a goal written to a servo may lie from its present position (LeRobot's max_relative_target),
    # so a node that bypasses the safety filter cannot jump the arm; above the lag of a servo following at speed
    max_relative_target: float = 0.5


@dataclass
class _ServoState:
    faulted: bool = False
    reason: str = "not read yet"
    consecutive: int = 0
    total: int = 0
    feedback: Feedback | None = None
    probe_interval: float = 0.0  # > 0: missing, out of the cycle's SYNC_READ, probed on its own
    next_probe: float = 0.0
    peak_voltage_v: float = 0.0  # highest supply voltage it reported (reference for sag warnings)
    silent_since: float | None = None  # clock time of the first failed cycle of the current silence


def _cycles(count: int) -> str:
    return f"{count} failed cycle{'' if count == 1 else 's'}"


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
        self._reconnect_wait = self.config.reconnect_initial_s
        self._reconnect_attempts = 0
        self._pending_start: tuple[bool, bool] | None = None  # (torque_on, torque_off) once the port opens
        self.cycles = 0
        self.missed_cycles = 0
        self._last_cycle_start: float | None = None
        self._window = FaultWindow(clock(), bus.counters)
        self._faults: frozenset[tuple[str, str]] = frozenset()  # (joint, kind) as of the last cycle
        self.commands_accepted = 0
        self.commands_rejected = 0
        self.rejections: Counter[str] = Counter()  # by RejectReason value
        self.last_rejection = ""
        self._rejected_reported = 0  # commands_rejected at the previous /diagnostics report
        self.commands_coalesced = 0  # commands replaced by a later one before their goals were written
        self.goals_limited = 0  # goal writes cut to max_relative_target from the present position
        self._unwritten = False  # the latest command's goals have not been written yet
        self._wrote_since_cycle = False  # a command's goals went out since the last cycle (the one extra write)
        self._max_step = np.abs(self.config.max_relative_target / self.mapping.scale)  # in steps, per joint
        self._cycle_times: list[float] = []

    # --- life cycle ---------------------------------------------------------------------------

    def start(self, torque_on: bool = False, torque_off: bool = False) -> None:
        """Open the port, optionally configure the servos, read the arm once, optionally set torque.

        A port that cannot be opened is not an error here: the core waits for it (``bus_error`` says
        why, :meth:`cycle` retries with backoff) and does the rest once it opens.
        """
        with self._lock:
            try:
                self.bus.connect()
            except PortError as err:
                self._pending_start = (torque_on, torque_off)
                self._port_failed(err)
                return
            self._start_actions(torque_on, torque_off)

    def _start_actions(self, torque_on: bool, torque_off: bool) -> None:
        # the start is not timed: the bus's patient deadline, as a slow adapter's replies may come after the cycle's;
        # its first read measures the bus's latency, which the cycle's reads and later torque toggles then allow for
        with self.bus.patient():
            if self.config.configure_servos:
                self._configure_servos()
            if torque_on:
                self.set_torque(True)
            else:
                if torque_off:
                    self.set_torque(False)
                self.cycle()

    def _configure_servos(self) -> None:
        """LeRobot's settings, written once at start: idempotent, so a transaction lost to a slow bus (a
        loaded host serving the virtual arm, a servo still booting) costs a retry of the whole set."""
        gripper = self.calibration[GRIPPER.name].id if GRIPPER.name in self.calibration else None
        for attempt in range(1, self.config.configure_attempts + 1):
            try:
                written = self.bus.configure_lerobot(self.ids, gripper)
            except BusError as err:
                if attempt == self.config.configure_attempts or isinstance(err, PortError):
                    raise
                self.log.warning("configuring the servos failed (%s); trying again (%d of %d)", err, attempt + 1,
                                 self.config.configure_attempts)
                continue
            names = {servo_id: name for name, servo_id in zip(self.names, self.ids, strict=True)}
            changed = "; ".join(f"{names.get(i, i)}: {', '.join(registers)}" for i, registers in written.items())
            self.log.info("servos configured as LeRobot configures them: %s",
                          f"wrote {changed}" if changed else "every setting already in place")
            return

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
        """Write every goal and read every present servo (one transfer); probe one missing servo if due."""
        with self._lock:
            started = self._clock()
            self._count_missed(started)
            if not self._ensure_port():
                return self._result(None)
            try:
                present = [i for i, n in zip(self.ids, self.names, strict=True) if not self._servos[n].probe_interval]
                budget = self.config.retry_budget_fraction / self.config.rate_hz if self.config.rate_hz > 0 else None
                goals = self._goals_to_write()
                # the servos sample their feedback as the request reaches them; the reply comes a bus round trip
                # later (a USB-serial adapter's latency timer: up to 16 ms), so the sample is stamped at the request
                asked = self._clock()
                feedback, failures = self.bus.sync_read_feedback_partial(present, goals, budget_s=budget)
                self._written(goals)
                self._wrote_since_cycle = False
                self._probe_missing(feedback, failures)
                sample = self._update(feedback, failures, asked)
            except PortError as err:
                self._port_failed(err)
                return self._result(None)
            self.cycles += 1
            self._cycle_times.append(self._clock() - started)
            del self._cycle_times[:-200]
            return self._result(sample)

    def _count_missed(self, started: float) -> None:
        """Cycles the configured rate wanted since the previous one but that did not happen."""
        last, self._last_cycle_start = self._last_cycle_start, started
        if last is not None and self.config.rate_hz > 0:
            self.missed_cycles += max(0, round((started - last) * self.config.rate_hz) - 1)

    def _probe_missing(self, feedback: dict[int, Feedback], failures: dict[int, BusError]) -> None:
        """Ask the missing servo whose probe is most overdue, alone and once (outside the cycle's read)."""
        now = self._clock()
        due = [(s.next_probe, i, n) for i, n in zip(self.ids, self.names, strict=True)
               for s in (self._servos[n],) if s.probe_interval and s.next_probe <= now]
        if not due:
            return
        _, servo_id, name = min(due)
        got, missed = self.bus.sync_read_feedback_partial([servo_id], retries=0)
        feedback.update(got)
        failures.update(missed)
        if servo_id not in got:  # still missing: back off
            state = self._servos[name]
            state.probe_interval = min(2 * state.probe_interval, self.config.probe_interval_max_s)
            state.next_probe = now + state.probe_interval

    def _ensure_port(self) -> bool:
        if self.bus.is_connected and not self.bus_error:
            return True
        now = self._clock()
        if now < self._next_reconnect:
            return False
        self._reconnect_attempts += 1
        try:
            self.bus.close()
            self.bus.connect()
        except BusError as err:
            self.bus_error = str(err)
            self._reconnect_wait = min(2 * self._reconnect_wait, self.config.reconnect_interval_s)
            self._next_reconnect = now + self._reconnect_wait
            self.log.debug("reconnect to %s failed: %s", self.bus.port, err)
            if self._reconnect_attempts % max(1, round(10.0 / self.config.reconnect_interval_s)) == 0:
                self.log.warning("still waiting for %s (%d tries): %s", self.bus.port, self._reconnect_attempts, err)
            return False
        self.log.info("port %s open after %d tries", self.bus.port, self._reconnect_attempts)
        self.bus_error = ""
        self._reconnect_wait = self.config.reconnect_initial_s
        self._reconnect_attempts = 0
        if self._pending_start is not None:
            pending, self._pending_start = self._pending_start, None
            try:
                self._start_actions(*pending)
            except BusError as err:
                self.log.error("start on %s failed after the port opened: %s", self.bus.port, err)
        return True

    def _port_failed(self, err: BusError) -> None:
        if not self.bus_error:
            self.log.error("bus on %s failed: %s; retrying with backoff up to every %g s", self.bus.port, err,
                           self.config.reconnect_interval_s)
        self.bus_error = str(err) or type(err).__name__
        self._reconnect_wait = self.config.reconnect_initial_s
        self._next_reconnect = self._clock() + self._reconnect_wait
        for state in self._servos.values():
            state.feedback = None

    def _update(self, feedback: Mapping[int, Feedback], failures: Mapping[int, BusError], stamp: float) -> JointSample | None:
        n = len(self.names)
        raw_pos, raw_vel, raw_load = np.zeros(n), np.zeros(n), np.zeros(n)
        valid = np.zeros(n, dtype=bool)
        faulted: list[tuple[str, int, BusError | None]] = []  # newly this cycle
        out_of_cycle: list[str] = []
        answered: list[tuple[str, int, int]] = []  # (name, servo id, failed cycles before) after a fault
        for k, (name, servo_id) in enumerate(zip(self.names, self.ids, strict=True)):
            state = self._servos[name]
            fb = feedback.get(servo_id)
            state.feedback = fb
            if fb is None:
                was_faulted, was_in_cycle = state.faulted, not state.probe_interval
                err = failures.get(servo_id)
                self._servo_failed(servo_id, state, err, stamp)
                if not was_faulted:
                    faulted.append((name, servo_id, err))
                if was_in_cycle and state.probe_interval:
                    out_of_cycle.append(f"{name} (servo {servo_id})")
                continue
            if state.faulted:
                answered.append((name, servo_id, state.consecutive))
            state.faulted, state.reason, state.consecutive, state.probe_interval = False, "", 0, 0.0
            state.silent_since = None
            state.peak_voltage_v = max(state.peak_voltage_v, fb.voltage_v)
            valid[k] = True
            raw_pos[k], raw_vel[k], raw_load[k] = fb.position, fb.velocity, fb.load
        self._log_fault_changes(faulted, out_of_cycle, answered)
        if not valid.any():
            return None
        new = valid & ~self._goal_known
        if new.any():  # first reading of a joint: hold it where it is
            self._goal_raw = np.where(new, self.mapping.clamp_raw(raw_pos), self._goal_raw)
            self._goal_known = self._goal_known | new
        return self._sample(stamp, raw_pos, raw_vel, raw_load, valid)

    def _servo_failed(self, servo_id: int, state: _ServoState, err: BusError | None, now: float) -> None:
        if state.probe_interval:  # missing: not in this cycle's read, or its probe failed again
            state.consecutive += 1
            return
        if state.silent_since is None:
            state.silent_since = now
        state.faulted, state.reason = True, str(err) if err is not None else f"no reply from servo {servo_id}"
        state.consecutive += 1
        state.total += 1
        if state.consecutive >= self.config.missing_after_failures:
            state.probe_interval = self.config.probe_interval_s
            state.next_probe = now + state.probe_interval

    def _log_fault_changes(self, faulted: list[tuple[str, int, BusError | None]], out_of_cycle: list[str],
                           answered: list[tuple[str, int, int]]) -> None:
        """One line per way servos were lost in this cycle's transaction, not one per servo: a whole sync read
        that timed out is one event (six WARN lines for it read as six broken cables)."""
        groups: dict[tuple[object, ...], list[tuple[str, int, BusError | None]]] = {}
        for name, servo_id, err in faulted:
            key = (type(err), err.tries, err.detail) if isinstance(err, LostReply) else (name,)
            groups.setdefault(key, []).append((name, servo_id, err))
        for members in groups.values():
            err = members[0][2]
            if len(members) > 1 and isinstance(err, LostReply):
                reason = err.for_servos([servo_id for _, servo_id, _ in members])
            else:
                reason = self._servos[members[0][0]].reason
            self.log.warning("%s faulted: %s", ", ".join(f"{name} (servo {servo_id})" for name, servo_id, _ in members),
                             reason)
        if out_of_cycle:
            self.log.warning("%s out of the control cycle after %d failed cycles; probed every %g s (backing off to "
                             "%g s)", ", ".join(out_of_cycle), self.config.missing_after_failures,
                             self.config.probe_interval_s, self.config.probe_interval_max_s)
        if answered:
            cycles = {failed for _, _, failed in answered}
            who = ", ".join(f"{name} (servo {servo_id}" + (")" if len(cycles) == 1 else f", after {_cycles(failed)})")
                            for name, servo_id, failed in answered)
            after = f" after {_cycles(cycles.pop())}" if len(cycles) == 1 else ""
            self.log.info("%s answer%s again%s", who, "s" if len(answered) == 1 else "", after)

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
        telemetry = self.telemetry()
        faults = frozenset((t.joint, kind.value) for t in telemetry for kind in servo_fault_kinds(self.config, t))
        changed, self._faults = faults != self._faults, faults
        return CycleResult(sample, telemetry, not self.bus_error, changed)

    def telemetry(self) -> tuple[ServoTelemetry, ...]:
        now = self._clock()
        return tuple(
            ServoTelemetry(name, servo_id, s.feedback, s.faulted or bool(self.bus_error),
                           self.bus_error or s.reason, s.consecutive, s.total, s.probe_interval,
                           now - s.silent_since if s.faulted and s.silent_since is not None else 0.0)
            for name, servo_id in zip(self.names, self.ids, strict=True)
            for s in (self._servos[name],)
        )

    # --- commands -----------------------------------------------------------------------------

    def command(self, names: Sequence[str], positions: Sequence[float]) -> CommandResult:
        """Set goals for the named joints (others keep theirs); raises :class:`CommandRejected`."""
        with self._lock:
            try:
                if not self.config.write_goals:
                    raise CommandRejected(RejectReason.READ_ONLY, "this arm is read-only (write_goals is off)")
                result = self._command(list(names), positions)
            except CommandRejected as err:
                self.commands_rejected += 1
                self.rejections[err.reason.value] += 1
                self.last_rejection = str(err)
                raise
            self.commands_accepted += 1
            if self._unwritten:
                self.commands_coalesced += 1  # the previous command's goals never went out: this one replaces them
            self._unwritten = True
            if self.config.write_on_command and not self._wrote_since_cycle:
                self._write_goals_now()
            return result

    def _write_goals_now(self) -> None:
        """Every known goal on the bus now (the cycle's one extra write); with the port down the cycle that
        reopens it writes them."""
        if not self.bus.is_connected or self.bus_error:
            return
        self._wrote_since_cycle = True
        try:
            self._write_goals()
        except PortError as err:
            self._port_failed(err)

    def _command(self, names: list[str], positions: Sequence[float]) -> CommandResult:
        if len(names) != len(positions):
            raise CommandRejected(RejectReason.LENGTH_MISMATCH, f"{len(names)} names but {len(positions)} positions")
        if not names:
            raise CommandRejected(RejectReason.EMPTY, "empty command: no joint names")
        unknown = [n for n in names if n not in self._index]
        if unknown:
            raise CommandRejected(RejectReason.UNKNOWN_JOINT,
                                  f"expected names from {list(self.names)}; unknown joints {unknown!r}")
        if len(set(names)) != len(names):
            raise CommandRejected(RejectReason.DUPLICATE_NAME, f"duplicate joint names in {names}")
        try:
            values = np.asarray(positions, dtype=float)
        except (TypeError, ValueError) as err:
            raise CommandRejected(RejectReason.MALFORMED, f"positions are not numbers: {err}") from err
        bad = [n for n, v in zip(names, values, strict=True) if not math.isfinite(v)]
        if bad:
            raise CommandRejected(RejectReason.NON_FINITE, f"non-finite positions for {bad}")
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
        """Servo id → goal step of every known goal, cut to ``max_relative_target`` from the servo's present
        position (None for a read-only arm or when none is known). A servo without a present position this
        cycle (not answering, probed, just rejoined) gets no goal: nothing is written blind."""
        if not self.config.write_goals:
            return None
        goals = {}
        for name, servo_id, goal, known, step in zip(self.names, self.ids, self._goal_raw.tolist(), self._goal_known,
                                                    self._max_step.tolist(), strict=True):
            feedback = self._servos[name].feedback
            if not known or feedback is None:
                continue
            low, high = math.ceil(feedback.position - step), math.floor(feedback.position + step)
            bounded_goal = min(max(int(goal), low), high)
            if bounded_goal != goal:
                self.goals_limited += 1
            goals[servo_id] = bounded_goal
        return goals or None

    def _write_goals(self) -> None:
        goals = self._goals_to_write()
        if goals:
            self.bus.sync_write_goal_positions(goals)
            self._written(goals)

    def _written(self, goals: Mapping[int, int] | None) -> None:
        if goals:
            self._unwritten = False

    # --- torque -------------------------------------------------------------------------------

    def set_torque(self, enabled: bool) -> None:
        """Torque on (goals first reset to the present positions, so the arm does not jump) or off.

        Turning torque off tries every servo even when one fails; any failure raises afterwards.
        """
        with self._lock:
            if enabled:
                asked = self._clock()
                feedback, failures = self.bus.sync_read_feedback_partial(self.ids)
                if failures:
                    raise next(iter(failures.values()))
                self._update(feedback, failures, asked)
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

    def sample_age(self, sample: JointSample) -> float:
        """Seconds since the servos sampled ``sample`` (a ROS node stamps it that long before its clock's now)."""
        return self._clock() - sample.stamp

    def cycle_rate_hz(self) -> float:
        """Mean rate the recent cycles could sustain (1 / mean cycle duration)."""
        times = self._cycle_times
        return len(times) / sum(times) if times and sum(times) > 0 else 0.0

    def diagnostics(self, prefix: str = "so101_driver") -> list[DiagnosticEntry]:
        """The bus entry (rates since the previous call) and one entry per servo."""
        with self._lock:
            telemetry = self.telemetry()
            entries = [self._bus_entry(prefix, telemetry)]
            goals = self.goals()
            entries += [servo_entry(prefix, self.config, t, goals.get(t.joint), self._servos[t.joint].peak_voltage_v)
                        for t in telemetry]
            return entries

    def servo_faults(self) -> frozenset[tuple[str, str]]:
        """(joint, fault kind) of every servo fault as of the last cycle (``CycleResult.faults_changed`` says when
        the set changes: the node then publishes ``/diagnostics`` at once, so a protection trip reaches the
        recorder and the motion's supervisor within a cycle)."""
        return self._faults

    def _bus_entry(self, prefix: str, telemetry: Sequence[ServoTelemetry]) -> DiagnosticEntry:
        faulted = [t.joint for t in telemetry if t.faulted]
        rates = self._window.rates(self._clock(), self.bus.counters, self.cycles, self.missed_cycles)
        port_error = f"{self.bus_error} (waiting for the port, retry every <= {self.config.reconnect_interval_s:g} s)" \
            if self.bus_error else ""
        rejected, self._rejected_reported = self.commands_rejected - self._rejected_reported, self.commands_rejected
        level, message = bus_status(self.config, rates, port_error, faulted, len(telemetry), rejected)
        values = {
            "port": self.bus.port,
            "torque_enabled": str(self.torque_enabled),
            "cycles": str(self.cycles),
            CYCLE_CAPACITY_KEY: f"{self.cycle_rate_hz():.1f}",
            **rate_values(self.config, rates),
            **count_values(self.bus.counters, self.missed_cycles),
            "commands_accepted": str(self.commands_accepted),
            "commands_rejected": str(self.commands_rejected),
            **{diagnostic_key(RejectReason(reason)): str(count) for reason, count in sorted(self.rejections.items())},
            "last_rejection": self.last_rejection,
            "commands_coalesced": str(self.commands_coalesced),
            "goals_limited": str(self.goals_limited),
            "faulted_joints": ",".join(faulted),
            "probed_joints": ",".join(t.joint for t in telemetry if t.probe_interval_s),
        }
        return DiagnosticEntry(f"{prefix}: bus", level, message, self.bus.port, values)
