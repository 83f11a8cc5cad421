"""The driver's ``/diagnostics`` as plain data: fault rates over a window, thresholds, levels (no rclpy).

The bus entry says how the bus is doing *now*: the achieved cycle rate beside the configured one, and
retries, timeouts, corrupt packets and missed cycles per second since the previous report, each
compared with the thresholds of :class:`~so101_driver.driver_core.DriverConfig`. A servo entry says
how one servo is doing: its fault, its error bits, its temperature, supply voltage and current.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from so101_common.diagnostics import Level
from so101_common.servo_faults import FAULTS_KEY, JOINT_KEY, SERVO_TELEMETRY, ServoFaultKind
from so101_driver.feedback import BusCounters
from so101_feetech.control_table import decode_error_bits

if TYPE_CHECKING:
    from so101_driver.driver_core import DriverConfig
    from so101_driver.readings import ServoTelemetry

__all__ = ["BUS_FAULT_COUNT_KEYS", "CYCLE_CAPACITY_KEY", "MISSED_CYCLES_KEY", "DiagnosticEntry", "FaultRates", "FaultWindow", "bus_status", "count_values", "rate_values", "servo_entry",
           "servo_fault_kinds"]


@dataclass(frozen=True)
class DiagnosticEntry:
    name: str
    level: Level
    message: str
    hardware_id: str
    values: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FaultRates:
    """What happened per second over ``window_s`` (0: no window yet)."""

    window_s: float = 0.0
    achieved_hz: float = 0.0
    retries_per_s: float = 0.0
    timeouts_per_s: float = 0.0
    corrupt_per_s: float = 0.0
    missed_cycles_per_s: float = 0.0

    @property
    def bus_faults_per_s(self) -> float:
        return self.retries_per_s + self.timeouts_per_s + self.corrupt_per_s


class FaultWindow:
    """Counts since the previous :meth:`rates` call, turned into per-second figures."""

    def __init__(self, now: float, counters: BusCounters, cycles: int = 0, missed: int = 0) -> None:
        self._restart(now, counters, cycles, missed)

    def _restart(self, now: float, counters: BusCounters, cycles: int, missed: int) -> None:
        self._start, self._counters, self._cycles, self._missed = now, counters.snapshot(), cycles, missed

    def rates(self, now: float, counters: BusCounters, cycles: int, missed: int) -> FaultRates:
        dt = now - self._start
        if dt <= 0:
            self._restart(now, counters, cycles, missed)
            return FaultRates()
        before = self._counters
        per_s = max(dt, 1.0)  # counts over less than a second are counts, not rates (no spikes from short windows)
        out = FaultRates(dt, (cycles - self._cycles) / dt, (counters.retries - before.retries) / per_s,
                         (counters.timeouts - before.timeouts) / per_s, (counters.corrupt - before.corrupt) / per_s,
                         (missed - self._missed) / per_s)
        self._restart(now, counters, cycles, missed)
        return out


# the bus entry's key for 1 / the mean cycle duration: the most the bus round-trip allows (readers tell what
# limits the rate by it: so101_bringup's recording line)
CYCLE_CAPACITY_KEY = "cycle_capacity_hz"
# the bus entry's counts since the driver started (readers take their difference over a recording): cycles the
# driver did not run on time, and the bus's failed transactions
MISSED_CYCLES_KEY = "missed_cycles"
BUS_FAULT_COUNT_KEYS = ("retries", "timeouts", "corrupt_packets")

# a rate over a shorter window says little (a handful of cycles): not judged
_MIN_RATE_WINDOW_S = 0.5


def bus_status(config: DriverConfig, rates: FaultRates, port_error: str, faulted: Sequence[str],
               n_servos: int, rejected: int = 0) -> tuple[Level, str]:
    """Level and message of the bus entry; the worst finding wins, all findings are in the message.
    ``rejected``: commands rejected since the previous report (a WARN: someone sends bad commands)."""
    findings: list[tuple[Level, str]] = []
    if rejected:
        findings.append((Level.WARN, f"{rejected} command(s) rejected (see rejected_<reason>, last_rejection)"))
    if port_error:
        findings.append((Level.ERROR, f"port failing: {port_error}"))
    elif n_servos and len(faulted) == n_servos:
        findings.append((Level.ERROR, "no servo answers"))
    elif faulted:
        findings.append((Level.WARN, f"servos not answering: {', '.join(faulted)}"))
    if not port_error:
        faults = rates.bus_faults_per_s
        if faults:
            level = Level.ERROR if faults >= config.fault_error_per_s else \
                Level.WARN if faults >= config.fault_warn_per_s else Level.OK
            if level:
                findings.append((level, f"bus faults {faults:.1f}/s (retries {rates.retries_per_s:.1f}/s, timeouts "
                                        f"{rates.timeouts_per_s:.1f}/s, corrupt {rates.corrupt_per_s:.1f}/s)"))
        if config.rate_hz > 0 and rates.window_s >= _MIN_RATE_WINDOW_S:
            ratio = rates.achieved_hz / config.rate_hz
            level = Level.ERROR if ratio < config.rate_error_fraction else \
                Level.WARN if ratio < config.rate_warn_fraction else Level.OK
            if level:
                findings.append((level, f"cycle rate {rates.achieved_hz:.1f} Hz of {config.rate_hz:g} Hz configured "
                                        f"({rates.missed_cycles_per_s:.1f} missed cycles/s)"))
    if not findings:
        return Level.OK, "all servos answering"
    return max(level for level, _ in findings), "; ".join(message for _, message in findings)


def rate_values(config: DriverConfig, rates: FaultRates) -> dict[str, str]:
    return {
        "configured_rate_hz": f"{config.rate_hz:g}",
        "achieved_rate_hz": f"{rates.achieved_hz:.1f}",
        "retries_per_s": f"{rates.retries_per_s:.2f}",
        "timeouts_per_s": f"{rates.timeouts_per_s:.2f}",
        "corrupt_packets_per_s": f"{rates.corrupt_per_s:.2f}",
        "missed_cycles_per_s": f"{rates.missed_cycles_per_s:.2f}",
        "window_s": f"{rates.window_s:.2f}",
    }


def count_values(counters: BusCounters, missed_cycles: int) -> dict[str, str]:
    retries, timeouts, corrupt = BUS_FAULT_COUNT_KEYS
    return {retries: str(counters.retries), timeouts: str(counters.timeouts), corrupt: str(counters.corrupt),
            MISSED_CYCLES_KEY: str(missed_cycles)}


def servo_fault_kinds(config: DriverConfig, t: ServoTelemetry) -> tuple[ServoFaultKind, ...]:
    """The servo's faults (``so101_common.servo_faults``): its error-byte protections, or ``lost`` once it has
    been silent for ``lost_after_s`` (a shorter silence is a bus statistic, not a fault)."""
    if t.faulted or t.feedback is None:
        return (ServoFaultKind.LOST,) if t.silent_s >= config.lost_after_s else ()
    return tuple(ServoFaultKind[bit.name] for bit in decode_error_bits(t.feedback.status | t.feedback.error))


def servo_entry(prefix: str, config: DriverConfig, t: ServoTelemetry, goal: float | None,
                peak_voltage_v: float) -> DiagnosticEntry:
    """One servo's entry: ERROR when faulted or flagging errors, WARN when hot, sagging or over current."""
    name, hw = f"{prefix}: {t.joint}", f"servo {t.servo_id}"
    values = {JOINT_KEY: t.joint, "servo_id": str(t.servo_id), "consecutive_failures": str(t.consecutive_failures),
              "total_failures": str(t.total_failures)}
    if goal is not None:
        values["goal_rad"] = f"{goal:.4f}"
    fb = t.feedback
    if t.faulted or fb is None:
        values["fault"] = t.fault_reason
        if t.probe_interval_s:
            values["probe_interval_s"] = f"{t.probe_interval_s:g}"
        if kinds := servo_fault_kinds(config, t):
            values[FAULTS_KEY] = ",".join(kinds)
        return DiagnosticEntry(name, Level.ERROR, t.fault_reason or "no data", hw, values)
    flags = decode_error_bits(fb.status | fb.error)
    values.update({
        "position_raw": str(fb.position),
        "velocity_raw": str(fb.velocity),
        SERVO_TELEMETRY["load"][0]: str(fb.load),
        SERVO_TELEMETRY["voltage"][0]: f"{fb.voltage_v:.1f}",
        SERVO_TELEMETRY["temperature"][0]: str(fb.temperature),
        SERVO_TELEMETRY["current"][0]: f"{fb.current_a:.3f}",
        "moving": str(fb.moving),
        "status_bits": f"0x{fb.status:02X}",
        "error_byte": f"0x{fb.error:02X}",
        "errors": ",".join(b.name for b in flags),
    })
    if flags:
        values[FAULTS_KEY] = ",".join(servo_fault_kinds(config, t))
        return DiagnosticEntry(name, Level.ERROR, "servo reports " + ", ".join(b.name for b in flags), hw, values)
    warnings = []
    if fb.temperature >= config.temperature_warn_c:
        warnings.append(f"hot: {fb.temperature} °C")
    volts = fb.voltage_v
    if config.voltage_warn_min_v and volts < config.voltage_warn_min_v:
        warnings.append(f"supply low: {volts:.1f} V < {config.voltage_warn_min_v:g} V")
    elif config.voltage_sag_warn_fraction and volts < config.voltage_sag_warn_fraction * peak_voltage_v:
        warnings.append(f"supply sagging: {volts:.1f} V, {volts / peak_voltage_v:.0%} of the {peak_voltage_v:.1f} V "
                        "seen before")
    if config.voltage_warn_max_v and volts > config.voltage_warn_max_v:
        warnings.append(f"supply high: {volts:.1f} V > {config.voltage_warn_max_v:g} V")
    if config.current_warn_a and abs(fb.current_a) >= config.current_warn_a:
        warnings.append(f"current {abs(fb.current_a):.2f} A >= {config.current_warn_a:g} A")
    if warnings:
        return DiagnosticEntry(name, Level.WARN, "; ".join(warnings), hw, values)
    return DiagnosticEntry(name, Level.OK, "ok", hw, values)
