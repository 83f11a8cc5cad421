"""Checks made on the bus itself, before (and after) the driver runs: which servos answer, their supply,
temperatures and error bits, the bus round-trip time, and the firmware settings (no rclpy).

Thresholds are the driver's (:class:`~so101_driver.driver_core.DriverConfig` as the deployment sets it,
:mod:`.thresholds`): a preflight fails where the driver's ``/diagnostics`` would flag a servo (the hardware
only gets worse once a policy runs), and judges the bus by the share of a control cycle its read may take.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from so101_apps.preflight.report import CheckResult, Status
from so101_apps.preflight.thresholds import DriverSettings
from so101_common.joints import GRIPPER, JOINT_NAMES
from so101_driver.bus import FeetechBus
from so101_driver.driver_core import DriverConfig
from so101_driver.errors import BusError
from so101_driver.feedback import BusCounters, Feedback
from so101_feetech.calibration import MotorCalibration
from so101_feetech.control_table import (
    LEROBOT_GRIPPER_SETTINGS,
    LEROBOT_SERVO_SETTINGS,
    Register,
    decode_error_bits,
)

__all__ = ["STS3215_MODEL", "BusSample", "check_servos", "sample_bus", "check_supply", "check_temperature",
           "check_servo_status", "check_round_trip", "check_settings", "expected_settings"]

STS3215_MODEL = 777  # Model_Number of the STS3215 (every SO-101 servo)
_PHASE_MULTI_TURN = 0x10  # Phase bit 4: multi-turn positions; LeRobot (and the driver) clear it
ROUND_TRIPS = 50  # feedback reads timed (0.1-0.5 s on a healthy 1 Mbaud bus)
DISCOVERY_WAIT_S = 5.0  # s the bus gets to answer a broadcast ping at all
DISCOVERY_ROUNDS = 2  # pings of a servo that does not answer (each with the bus's own retries)


def _joint_of(calibration: Mapping[str, MotorCalibration]) -> dict[int, str]:
    return {cal.id: name for name, cal in calibration.items()}


def check_servos(bus: FeetechBus, calibration: Mapping[str, MotorCalibration],
                 wait_s: float = DISCOVERY_WAIT_S) -> tuple[CheckResult, list[int]]:
    """Every servo of the calibration answers at its id with the STS3215's model number, and no other
    servo is on the bus; returns the result and the ids that answered.

    The bus gets ``wait_s`` to answer at all (an adapter still enumerating, servos booting), and a servo that does not
    answer its ping is asked once more after the others (a reply lost to a busy computer is not a missing servo)."""
    deadline = time.monotonic() + wait_s
    present: dict[int, int] = {}
    while True:
        try:
            present = bus.broadcast_ping()[0]
        except BusError:
            present = {}
        if present or time.monotonic() >= deadline:
            break
    found: dict[str, int] = {}
    for _ in range(DISCOVERY_ROUNDS):
        for name in JOINT_NAMES:
            if name not in found:
                try:
                    found[name] = bus.ping(calibration[name].id)
                except BusError:
                    continue
    missing = [name for name in JOINT_NAMES if name not in found]
    wrong = {name: model for name, model in found.items() if model != STS3215_MODEL}
    firmware = {}
    for name in found:
        try:
            firmware[name] = (f"{bus.read(Register.Firmware_Major_Version, calibration[name].id, strict=False)}."
                              f"{bus.read(Register.Firmware_Minor_Version, calibration[name].id, strict=False)}")
        except BusError:
            firmware[name] = "?"
    ids = sorted(calibration[name].id for name in found)
    expected = sorted(cal.id for cal in calibration.values())
    strangers = sorted(set(present) - set(expected))
    values = {"ids": ids, "expected_ids": expected, "models": found, "firmware": firmware, "other_ids": strangers}
    measured = f"ids {ids}" + (f", other ids {strangers}" if strangers else "")
    limit = f"ids {expected}, model {STS3215_MODEL} (STS3215)"
    problems = [f"{name} (id {calibration[name].id}) does not answer" for name in missing]
    problems += [f"{name} (id {calibration[name].id}) is model {model}, not an STS3215" for name, model in wrong.items()]
    if problems:
        return CheckResult("servos", Status.FAIL, measured, limit,
                           "; ".join(problems) + ": check its cable, its supply and its id (so101 scan)",
                           tuple(missing) + tuple(wrong), values), ids
    if strangers:
        return CheckResult("servos", Status.WARN, measured, limit,
                           f"servo id(s) {strangers} on the bus are not in the calibration", (), values), ids
    if len(set(firmware.values())) > 1:
        return CheckResult("servos", Status.WARN, measured, limit, f"firmware versions differ: {firmware} (LeRobot "
                           "refuses an arm whose servos differ)", (), values), ids
    return CheckResult("servos", Status.PASS, measured, limit, f"firmware {next(iter(firmware.values()), '?')}",
                       (), values), ids


@dataclass
class BusSample:
    """Feedback of every servo read ``ROUND_TRIPS`` times, each read timed (s), and the bus faults meanwhile."""

    feedback: dict[int, list[Feedback]] = field(default_factory=dict)
    round_trips: list[float] = field(default_factory=list)
    faults: int = 0  # retries + timeouts + corrupt packets while sampling
    duration_s: float = 0.0

    def median(self, servo_id: int, what: str) -> float:
        return statistics.median(float(getattr(fb, what)) for fb in self.feedback[servo_id])

    def peak(self, servo_id: int, what: str) -> float:
        return max(float(getattr(fb, what)) for fb in self.feedback[servo_id])


def sample_bus(bus: FeetechBus, ids: Sequence[int], count: int = ROUND_TRIPS) -> BusSample:
    """``count`` feedback reads of ``ids`` (one SYNC_READ each, as the driver's cycle does), each timed."""
    sample = BusSample({i: [] for i in ids})
    before = bus.counters.snapshot()
    start = time.monotonic()
    for _ in range(count):
        t0 = time.perf_counter()
        feedback, _failures = bus.sync_read_feedback_partial(ids)
        sample.round_trips.append(time.perf_counter() - t0)
        for servo_id, fb in feedback.items():
            sample.feedback[servo_id].append(fb)
    sample.duration_s = time.monotonic() - start
    sample.faults = _faults(before, bus.counters)
    return sample


def _faults(before: BusCounters, after: BusCounters) -> int:
    return (after.retries - before.retries) + (after.timeouts - before.timeouts) + (after.corrupt - before.corrupt)


def _answered(sample: BusSample, joints: Mapping[int, str]) -> dict[int, str]:
    return {i: joints[i] for i, fbs in sample.feedback.items() if fbs}


def check_supply(sample: BusSample, calibration: Mapping[str, MotorCalibration], config: DriverConfig) -> CheckResult:
    """Supply voltage at every servo within the driver's ``voltage_warn_min_v`` / ``voltage_warn_max_v`` and none
    below ``voltage_sag_warn_fraction`` of the highest (one servo's supply wire sagging)."""
    joints = _answered(sample, _joint_of(calibration))
    volts = {joints[i]: sample.median(i, "voltage_v") for i in joints}
    low, high, top = min(volts.values()), max(volts.values()), max(volts.values())
    measured = f"{low:.1f}-{high:.1f} V"
    limits = []
    if config.voltage_warn_min_v:
        limits.append(f">= {config.voltage_warn_min_v:g} V")
    if config.voltage_warn_max_v:
        limits.append(f"<= {config.voltage_warn_max_v:g} V")
    if config.voltage_sag_warn_fraction:
        limits.append(f">= {config.voltage_sag_warn_fraction:.0%} of the highest servo")
    limit = ", ".join(limits) or "none set"
    values = {"volts": volts, "voltage_warn_min_v": config.voltage_warn_min_v,
              "voltage_warn_max_v": config.voltage_warn_max_v}
    where = "driver parameters voltage_warn_min_v / voltage_warn_max_v (config/driver.yaml)"
    bad = {n: v for n, v in volts.items() if config.voltage_warn_min_v and v < config.voltage_warn_min_v}
    if bad:
        return CheckResult("supply_voltage", Status.FAIL, measured, limit,
                           f"supply low at {_joint_list(bad, 'V')}: check the power supply (a 12 V arm needs 12 V; "
                           f"for a 7.4 V arm set the {where})", tuple(bad), values)
    bad = {n: v for n, v in volts.items() if config.voltage_warn_max_v and v > config.voltage_warn_max_v}
    if bad:
        return CheckResult("supply_voltage", Status.FAIL, measured, limit,
                           f"supply high at {_joint_list(bad, 'V')}: is this the arm's own power supply?", tuple(bad),
                           values)
    bad = {n: v for n, v in volts.items() if config.voltage_sag_warn_fraction and v < config.voltage_sag_warn_fraction * top}
    if bad:
        return CheckResult("supply_voltage", Status.FAIL, measured, limit,
                           f"sagging at {_joint_list(bad, 'V')} against {top:.1f} V: check the bus cable to it",
                           tuple(bad), values)
    if not config.voltage_warn_min_v:
        return CheckResult("supply_voltage", Status.WARN, measured, limit,
                           f"no minimum supply voltage set: set the {where}", (), values)
    return CheckResult("supply_voltage", Status.PASS, measured, limit, "", (), values)


def check_temperature(sample: BusSample, calibration: Mapping[str, MotorCalibration], config: DriverConfig) -> CheckResult:
    """Every servo below the driver's ``temperature_warn_c``: a servo that starts hot trips its overheat protection
    (the arm drops that joint) within minutes of a policy's work."""
    joints = _answered(sample, _joint_of(calibration))
    temps = {joints[i]: sample.peak(i, "temperature") for i in joints}
    hottest = max(temps, key=lambda n: temps[n])
    measured = f"{temps[hottest]:.0f} °C ({hottest})"
    limit = f"< {config.temperature_warn_c:g} °C"
    hot = {n: t for n, t in temps.items() if t >= config.temperature_warn_c}
    values = {"celsius": temps, "temperature_warn_c": config.temperature_warn_c}
    if hot:
        return CheckResult("temperature", Status.FAIL, measured, limit,
                           f"hot: {_joint_list(hot, '°C')}: let it cool (torque off) before running a policy",
                           tuple(hot), values)
    return CheckResult("temperature", Status.PASS, measured, limit, "", (), values)


def check_servo_status(sample: BusSample, calibration: Mapping[str, MotorCalibration]) -> CheckResult:
    """No servo reports an error bit (voltage, angle sensor, overheat, overcurrent, overload): the driver reports
    each as an ERROR and a motion stops on it."""
    joints = _answered(sample, _joint_of(calibration))
    flags = {}
    for servo_id, name in joints.items():
        bits = 0
        for fb in sample.feedback[servo_id]:
            bits |= fb.status | fb.error
        if bits:
            flags[name] = [b.name for b in decode_error_bits(bits)]
    values = {"errors": flags}
    if flags:
        text = "; ".join(f"{name}: {', '.join(bits)}" for name, bits in flags.items())
        return CheckResult("servo_status", Status.FAIL, text, "no error bits",
                           "the servo is protecting itself: fix the cause (supply, load, heat), then power-cycle it",
                           tuple(flags), values)
    return CheckResult("servo_status", Status.PASS, "no error bits", "no error bits", "", (), values)


def check_round_trip(sample: BusSample, settings: DriverSettings) -> CheckResult:
    """A feedback read of every servo (what the driver's cycle waits for) within the share of a cycle its read may
    take (``retry_budget_fraction`` × 1/``rate_hz``): the median fails beyond it, the 99th percentile warns; bus
    faults per second against the driver's ``fault_warn_per_s`` / ``fault_error_per_s``."""
    trips = sorted(sample.round_trips)
    p50 = statistics.median(trips)
    p99 = trips[min(len(trips) - 1, round(0.99 * (len(trips) - 1)))]
    budget = settings.read_budget_s
    faults_per_s = sample.faults / max(sample.duration_s, 1.0)
    config = settings.config
    measured = f"p50 {1e3 * p50:.1f} ms, p99 {1e3 * p99:.1f} ms, {faults_per_s:.1f} faults/s"
    limit = (f"p50 <= {1e3 * budget:.1f} ms ({config.retry_budget_fraction:.0%} of the {config.rate_hz:g} Hz cycle), "
             f"< {config.fault_warn_per_s:g} faults/s")
    values = {"p50_ms": 1e3 * p50, "p99_ms": 1e3 * p99, "max_ms": 1e3 * trips[-1], "reads": len(trips),
              "faults": sample.faults, "read_budget_ms": 1e3 * budget}
    hint = ("a slow adapter or hub: use a direct USB port; an FTDI adapter: set its latency timer to 1 ms; check "
            "Return_Delay_Time (firmware settings)")
    if p50 > budget:
        return CheckResult("bus_round_trip", Status.FAIL, measured, limit,
                           f"the bus cannot hold {config.rate_hz:g} Hz: {hint}", (), values)
    if faults_per_s >= config.fault_error_per_s:
        return CheckResult("bus_round_trip", Status.FAIL, measured, limit,
                           "replies lost or garbled: check the cables and the adapter", (), values)
    if p99 > budget or faults_per_s >= config.fault_warn_per_s:
        return CheckResult("bus_round_trip", Status.WARN, measured, limit,
                           "some reads take longer than a cycle allows or fail: " + hint, (), values)
    return CheckResult("bus_round_trip", Status.PASS, measured, limit, "", (), values)


@dataclass(frozen=True)
class GripperProtection:
    """The gripper servo's overload protection as read from it: it trips when the load stays above
    ``overload`` (fraction of full torque; Overload_Torque) for ``after_s`` (Protection_Time)."""

    overload: float
    after_s: float


def read_gripper_protection(bus: FeetechBus, calibration: Mapping[str, MotorCalibration],
                            ids: Sequence[int]) -> GripperProtection | None:
    """The gripper servo's Overload_Torque and Protection_Time (None: the gripper does not answer)."""
    gripper = calibration.get(GRIPPER.name)
    if gripper is None or gripper.id not in ids:
        return None
    overload = bus.read(Register.Overload_Torque, gripper.id, strict=False)
    after = bus.read(Register.Protection_Time, gripper.id, strict=False)
    return GripperProtection(overload / 100.0, after * 0.01)


def expected_settings(name: str, calibration: MotorCalibration) -> list[tuple[Register, int]]:
    """What the driver configures on joint ``name``'s servo (LeRobot's settings) and what its calibration wrote
    there (Homing_Offset and the position limits, which ``lerobot-calibrate`` / ``so101 calibrate`` write)."""
    settings = list(LEROBOT_SERVO_SETTINGS)
    if name == GRIPPER.name:
        settings += LEROBOT_GRIPPER_SETTINGS
    settings += [(Register.Homing_Offset, calibration.homing_offset),
                 (Register.Min_Position_Limit, calibration.range_min),
                 (Register.Max_Position_Limit, calibration.range_max)]
    return settings


def check_settings(bus: FeetechBus, calibration: Mapping[str, MotorCalibration], ids: Sequence[int]) -> CheckResult:
    """Every servo's settings as the driver configures them (LeRobot's: P 16 / I 0 / D 32, accelerations, position
    mode, single-turn, return delay 0, the gripper's limits) and its calibration registers as the calibration file
    says (a file from another arm, or servos recalibrated since, would put every joint at the wrong place)."""
    joints = _joint_of(calibration)
    wrong: dict[str, list[str]] = {}
    for servo_id in ids:
        name = joints[servo_id]
        found = []
        for register, value in expected_settings(name, calibration[name]):
            present = bus.read(register, servo_id, strict=False)
            if present != value:
                found.append(f"{register.name} {present} (expected {value})")
        phase = bus.read(Register.Phase, servo_id, strict=False)
        if phase & _PHASE_MULTI_TURN:
            found.append(f"Phase 0x{phase:02X} (bit 4, multi-turn, set; expected clear)")
        if found:
            wrong[name] = found
    checked = sum(len(expected_settings(joints[i], calibration[joints[i]])) + 1 for i in ids)
    values = {"wrong": wrong, "registers_checked": checked}
    limit = "LeRobot's settings and the calibration file's"
    if wrong:
        text = "; ".join(f"{name}: {', '.join(items)}" for name, items in wrong.items())
        return CheckResult("firmware_settings", Status.FAIL, text, limit,
                           "LeRobot's settings: start the driver with configure_servos:=true; the calibration "
                           "registers: recalibrate (so101 calibrate) or use this arm's own calibration file",
                           tuple(wrong), values)
    return CheckResult("firmware_settings", Status.PASS, f"{checked} registers as expected", limit, "", (), values)


def _joint_list(figures: Mapping[str, float], unit: str) -> str:
    return ", ".join(f"{name} {value:.1f} {unit}" for name, value in figures.items())
