"""Judging what the deploy chain did while the preflight drove it (no rclpy): the calibration of every joint, the
cycle rate, the servos' load, the safety limits in force against the URDF's, and the e-stop and the watchdog
exercised end to end (the arm holds, torque stays on, nothing jumps on release)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from so101_apps.preflight.bus_checks import GripperProtection
from so101_apps.preflight.gravity import LOAD_SCALE_RANGE, REACH_RAD, SURE_SIGMA_RAD, JointEstimate, UrdfJoint
from so101_apps.preflight.motion_plan import GRAVITY_JOINTS, Plan, Recording
from so101_apps.preflight.report import CheckResult, Status, worst
from so101_common.joints import JOINT_NAMES
from so101_driver.driver_core import DriverConfig
from so101_safety.config import SafetyConfig

__all__ = ["ZERO_FAIL_RAD", "ZERO_WARN_RAD", "REACH_RAD", "HOLD_TOLERANCE_RAD", "judge_calibration",
           "judge_cycle_rate", "judge_load", "judge_safety_limits", "judge_gripper_grasp", "Trace", "Interruption", "judge_interruption",
           "joint_bounds", "max_velocities"]

ZERO_FAIL_RAD = 0.35  # a joint further than this (20°) from the URDF's zero fails (when 2σ still leave it beyond
# ZERO_WARN_RAD): a policy trained on the URDF sees another arm
ZERO_WARN_RAD = 0.2  # ... further than this warns (a calibration pose a little off the middle of the range)
HOLD_TOLERANCE_RAD = 0.02  # a held joint may drift this much (≈13 encoder steps: backlash and noise)
SPEED_TOLERANCE = 1.05  # an output step may exceed v_max·dt by this factor (clock rounding between stamps)
NO_JUMP_RAD = 0.03  # the first output after a release lies this close to the arm (beyond the reseed tolerance)


def _reach(recording: Recording, plan: Plan) -> dict[str, tuple[float, float, float, float]]:
    """joint → (commanded low, commanded high, measured low, measured high) after the move to the check pose."""
    time, position, _, _ = recording.arrays()
    start = plan.legs[0].duration
    commands = np.array([leg.end for leg in plan.legs[1:]])
    after = position[time >= start]
    out = {}
    for j, name in enumerate(JOINT_NAMES):
        column = after[:, j][np.isfinite(after[:, j])] if len(after) else np.array([])
        low, high = (float(column.min()), float(column.max())) if len(column) else (math.nan, math.nan)
        out[name] = (float(commands[:, j].min()), float(commands[:, j].max()), low, high)
    return out


def judge_calibration(estimates: Mapping[str, JointEstimate | None], recording: Recording, plan: Plan,
                      calibrated: tuple[np.ndarray, np.ndarray], allowed: tuple[np.ndarray, np.ndarray],
                      confirmed: Mapping[str, bool] | None = None) -> list[CheckResult]:
    """One line per joint: direction and zero (gravity-loaded joints, from their sweeps; the others by eye when
    ``confirmed`` says so), whether the joint reached what it was commanded to, and whether its calibrated range
    (``calibrated``: lower, upper rad from the calibration file) covers what the safety filter lets through
    (``allowed``)."""
    reach = _reach(recording, plan)
    results = []
    for j, name in enumerate(JOINT_NAMES):
        findings: list[tuple[Status, str]] = []
        values: dict[str, object] = {}
        want_low, want_high, got_low, got_high = reach[name]
        values.update({"commanded_rad": [round(want_low, 4), round(want_high, 4)],
                       "reached_rad": [round(got_low, 4), round(got_high, 4)]})
        short = [(w, g) for w, g in ((want_low, got_low), (want_high, got_high))
                 if not abs(w - g) <= REACH_RAD]
        if short:
            findings.append((Status.FAIL, "did not reach " + ", ".join(f"{w:+.2f} rad (got {g:+.2f})" for w, g in short)
                             + ": something blocks it, or its servo's position limits are narrower than the calibration"))
        cal_low, cal_high = float(calibrated[0][j]), float(calibrated[1][j])
        values["calibrated_range_rad"] = [round(cal_low, 4), round(cal_high, 4)]
        if cal_low > allowed[0][j] + 1e-3 or cal_high < allowed[1][j] - 1e-3:
            findings.append((Status.WARN, f"calibrated range [{cal_low:+.2f}, {cal_high:+.2f}] rad is narrower than the "
                             f"safety limits [{allowed[0][j]:+.2f}, {allowed[1][j]:+.2f}]: the driver clamps commands "
                             "there; recalibrate, moving the joint through its whole range"))
        if name in GRAVITY_JOINTS:
            measured, limit = _gravity_findings(name, estimates.get(name), findings, values)
        else:
            seen = None if confirmed is None else confirmed.get(name)
            limit = "moves as the URDF's convention"
            if seen is None:
                measured = "direction not observable from its load"
                findings.append((Status.WARN, "gravity does not load this joint: confirm its direction by eye "
                                 "(so101 preflight --confirm)"))
            elif seen:
                measured = "direction confirmed by eye"
            else:
                measured = "direction reported wrong by eye"
                findings.append((Status.FAIL, "moves the wrong way: check drive_mode in the calibration file and the "
                                 "servo's mounting, then recalibrate"))
        measured += f"; reached [{got_low:+.2f}, {got_high:+.2f}] of [{want_low:+.2f}, {want_high:+.2f}] rad"
        status = worst([s for s, _ in findings]) if findings else Status.PASS
        detail = "; ".join(text for s, text in findings if s is status)
        results.append(CheckResult(f"calibration.{name}", status, measured, limit, detail,
                                   (name,) if status in (Status.FAIL, Status.WARN) else (), values))
    return results


def _gravity_findings(name: str, estimate: JointEstimate | None, findings: list[tuple[Status, str]],
                      values: dict[str, object]) -> tuple[str, str]:
    limit = f"zero within ±{ZERO_WARN_RAD:g} rad (fail beyond ±{ZERO_FAIL_RAD:g}), gravity load of the URDF's sign"
    if estimate is None:
        findings.append((Status.WARN, "its sweep gave too few samples to judge (the arm did not move, or joint states "
                         "came too rarely)"))
        return "not measured", limit
    values.update(estimate.to_dict())
    measured = (f"zero {estimate.offset:+.2f} ± {estimate.offset_sigma:.2f} rad, gravity load {estimate.measured:+.2f} "
                f"N·m (URDF {estimate.gravity:+.2f})")
    if not estimate.direction_decided:
        findings.append((Status.WARN, "its direction could not be told from its load (too noisy)"))
        return measured, limit
    if estimate.direction < 0:
        findings.append((Status.FAIL, "moves the wrong way: its gravity load is the URDF's mirrored (the calibration's "
                         "direction is reversed): check drive_mode of this joint in the calibration file (LeRobot "
                         "writes 0 for every SO-101 joint) and that its servo is mounted as the assembly guide shows"))
        return measured, limit
    scale_low, scale_high = LOAD_SCALE_RANGE
    if not scale_low <= estimate.scale <= scale_high:
        findings.append((Status.WARN, f"its load is {estimate.scale:.2f} × the URDF's gravity torque: a payload, a "
                         "spring or a binding joint? (its zero is not judged)"))
    elif estimate.offset_sigma > SURE_SIGMA_RAD:
        findings.append((Status.WARN, f"zero uncertain (± {estimate.offset_sigma:.2f} rad): the load was too noisy "
                         "to judge it"))
    elif abs(estimate.offset) > ZERO_FAIL_RAD and abs(estimate.offset) - 2 * estimate.offset_sigma > ZERO_WARN_RAD:
        findings.append((Status.FAIL, f"sits {estimate.offset:+.2f} rad from the URDF's zero (the arm is at "
                         f"q {estimate.offset:+.2f} when it reports q): recalibrate (so101 calibrate), posing the arm "
                         "at the middle of every joint's range when asked"))
    elif abs(estimate.offset) > ZERO_WARN_RAD:
        findings.append((Status.WARN, f"{estimate.offset:+.2f} rad from the URDF's zero: a policy trained on the "
                         "URDF sees this joint off by that much"))
    return measured, limit


def judge_cycle_rate(achieved_hz: Sequence[float], states_hz: float, config: DriverConfig) -> CheckResult:
    """The driver's achieved cycle rate (its ``/diagnostics`` reports while the preflight ran) against its configured
    rate, at the driver's own levels: below ``rate_error_fraction`` fails, below ``rate_warn_fraction`` warns."""
    limit = (f">= {config.rate_warn_fraction:.0%} of {config.rate_hz:g} Hz (fail below "
             f"{config.rate_error_fraction:.0%})")
    if not achieved_hz:
        return CheckResult("cycle_rate", Status.FAIL, "no report", limit, "the driver published no rate on /diagnostics")
    median = statistics.median(achieved_hz)
    measured = f"{median:.1f} Hz (min {min(achieved_hz):.1f}); joint_states {states_hz:.1f} Hz"
    values = {"achieved_hz": [round(a, 2) for a in achieved_hz], "configured_hz": config.rate_hz,
              "joint_states_hz": round(states_hz, 2)}
    ratio = median / config.rate_hz
    if ratio < config.rate_error_fraction:
        return CheckResult("cycle_rate", Status.FAIL, measured, limit, "the driver cannot hold its rate: see the bus "
                           "round trip; a loaded computer (close other programs)", (), values)
    if ratio < config.rate_warn_fraction:
        return CheckResult("cycle_rate", Status.WARN, measured, limit, "the driver runs below its rate: a loaded "
                           "computer or a slow bus", (), values)
    return CheckResult("cycle_rate", Status.PASS, measured, limit, "", (), values)


def judge_load(currents: Mapping[str, Sequence[float]], loads: Mapping[str, Sequence[float]],
               volts: Mapping[str, Sequence[float]], config: DriverConfig) -> CheckResult:
    """The servos' load while the preflight moved and held the arm (the driver's ``/diagnostics`` reports): each
    servo's median current below the driver's ``current_warn_a`` (a joint that works that hard all along is blocked
    or overloaded; a moment's peak at a turn of a sweep is not) and its supply above ``voltage_warn_min_v`` in every
    report (a supply that sags under the arm's load browns the servos out). Present_Load (fraction of the stall
    torque) and the peak currents are reported beside them."""
    limit = (f"median current < {config.current_warn_a:g} A" if config.current_warn_a
             else "none set (current_warn_a: 0)")
    typical = {n: statistics.median(v) for n, v in currents.items() if v}
    if not typical:
        return CheckResult("load", Status.FAIL, "no report", limit, "the driver reported no servo on /diagnostics")
    worst_joint = max(typical, key=lambda n: typical[n])
    peak_load = {n: max(abs(x) for x in v) for n, v in loads.items() if v}
    lowest = {n: min(v) for n, v in volts.items() if v}
    measured = (f"{typical[worst_joint]:.2f} A ({worst_joint}); load up to {max(peak_load.values(), default=0.0):.0%} "
                "of stall")
    values = {"median_current_a": {n: round(v, 3) for n, v in typical.items()},
              "peak_current_a": {n: round(max(v), 3) for n, v in currents.items() if v},
              "peak_load_fraction": {n: round(v, 3) for n, v in peak_load.items()},
              "lowest_voltage_v": {n: round(v, 2) for n, v in lowest.items()}}
    if lowest:
        measured += f"; supply down to {min(lowest.values()):.1f} V"
    if config.voltage_warn_min_v:
        limit += f", supply >= {config.voltage_warn_min_v:g} V"
    high = {n: v for n, v in typical.items() if config.current_warn_a and v >= config.current_warn_a}
    if high:
        return CheckResult("load", Status.FAIL, measured, limit, "over current at " + ", ".join(
            f"{n} {v:.2f} A" for n, v in high.items()) + ": something loads the joint (a collision, a binding "
            "gear, a payload too heavy)", tuple(high), values)
    sagging = {n: v for n, v in lowest.items() if config.voltage_warn_min_v and v < config.voltage_warn_min_v}
    if sagging:
        return CheckResult("load", Status.FAIL, measured, limit, "the supply sags under load at " + ", ".join(
            f"{n} {v:.1f} V" for n, v in sagging.items()) + ": a power supply too weak for the arm, or a thin cable",
            tuple(sagging), values)
    return CheckResult("load", Status.PASS, measured, limit, "", (), values)


def judge_safety_limits(config: SafetyConfig, urdf: Mapping[str, UrdfJoint]) -> CheckResult:
    """The safety filter's limits in force (its parameters as the running node has them) are the URDF's joint
    limits shrunk by its margins, with a margin on every joint, and its velocity bound within the URDF's."""
    problems: list[tuple[Status, str, str]] = []
    values: dict[str, object] = {}
    for limits in config.limits:
        name = limits.name
        ref = urdf.get(name)
        if ref is None:
            problems.append((Status.FAIL, name, "the URDF has no such joint"))
            continue
        margin_low, margin_high = limits.lower - ref.lower, ref.upper - limits.upper
        values[name] = {"filter_rad": [round(limits.lower, 5), round(limits.upper, 5)],
                        "urdf_rad": [ref.lower, ref.upper], "max_velocity": limits.max_velocity,
                        "urdf_velocity": ref.velocity}
        override = config.joints.get(name)
        margin = config.margin if override is None or override.margin is None else override.margin
        if margin_low < 0 or margin_high < 0:
            problems.append((Status.FAIL, name, f"lets through [{limits.lower:+.3f}, {limits.upper:+.3f}] rad, beyond the "
                             f"URDF's [{ref.lower:+.3f}, {ref.upper:+.3f}]"))
        elif abs(margin_low - margin) > 1e-4 or abs(margin_high - margin) > 1e-4:
            problems.append((Status.FAIL, name, f"limits [{limits.lower:+.3f}, {limits.upper:+.3f}] rad are not the "
                             f"URDF's [{ref.lower:+.3f}, {ref.upper:+.3f}] less the margin {margin:g}: the joint spec "
                             "(so101_common.joints) and the URDF disagree"))
        elif margin <= 0:
            problems.append((Status.WARN, name, "no margin inside the URDF's limits (margin 0)"))
        if limits.max_velocity > ref.velocity:
            problems.append((Status.FAIL, name, f"max_velocity {limits.max_velocity:g} rad/s exceeds the URDF's "
                             f"{ref.velocity:g}"))
    limit = "URDF limits less the margins; max_velocity <= the URDF's velocity"
    measured = (f"margin {config.margin:g} rad, max_velocity {config.max_velocity:g} rad/s, watchdog "
                f"{config.watchdog_timeout:g} s")
    if problems:
        status = worst([p[0] for p in problems])
        return CheckResult("safety_limits", status, measured, limit,
                           "; ".join(f"{joint_name}: {text}" for s, joint_name, text in problems if s is status),
                           tuple(dict.fromkeys(p[1] for p in problems if p[0] is status)), values)
    return CheckResult("safety_limits", Status.PASS, measured, limit, "", (), values)


@dataclass
class Trace:
    """What the preflight heard from the chain, on its own monotonic clock: joint states (receipt time, rad), the
    safety filter's outputs (receipt time, the output's stamp s, rad) and the driver's torque reports."""

    states: list[tuple[float, np.ndarray]] = field(default_factory=list)
    outputs: list[tuple[float, float, np.ndarray]] = field(default_factory=list)
    torque: list[tuple[float, bool]] = field(default_factory=list)

    def states_between(self, start: float, end: float) -> np.ndarray:
        rows = [q for t, q in self.states if start <= t <= end]
        return np.asarray(rows).reshape(-1, len(JOINT_NAMES))

    def state_at(self, t: float) -> np.ndarray | None:
        before = [q for s, q in self.states if s <= t]
        return before[-1] if before else None


def judge_gripper_grasp(config: SafetyConfig, protection: GripperProtection | None) -> CheckResult:
    """The safety filter takes a grasp (the gripper's load held above ``gripper_load_limit`` for
    ``gripper_load_hold``) before the gripper servo's own overload protection trips and switches its torque off
    (the object drops): its limit below the servo's Overload_Torque, its hold well inside Protection_Time."""
    limit = "gripper_load_limit < the servo's Overload_Torque; gripper_load_hold < half its Protection_Time"
    measured = f"grasp at load {config.gripper_load_limit:g} held {config.gripper_load_hold:g} s"
    if protection is None:
        return CheckResult.skipped("gripper_grasp", "not judged: the gripper servo's protection settings were not read")
    values = {"gripper_load_limit": config.gripper_load_limit, "gripper_load_hold": config.gripper_load_hold,
              "overload": protection.overload, "protection_s": protection.after_s}
    measured += f"; the servo trips above {protection.overload:.0%} after {protection.after_s:g} s"
    problems = []
    if config.gripper_load_limit <= 0:
        problems.append("the filter's grasp detection is off (gripper_load_limit 0)")
    elif config.gripper_load_limit >= protection.overload:
        problems.append(f"gripper_load_limit {config.gripper_load_limit:g} is not below the servo's overload "
                        f"protection ({protection.overload:.0%}): a grasp trips it and its torque goes off")
    if config.gripper_load_hold >= 0.5 * protection.after_s:
        problems.append(f"gripper_load_hold {config.gripper_load_hold:g} s leaves the squeeze under "
                        f"{0.5 * protection.after_s:g} s to ease before the protection trips")
    if problems:
        return CheckResult("gripper_grasp", Status.FAIL, measured, limit, "; ".join(problems), ("gripper",), values)
    return CheckResult("gripper_grasp", Status.PASS, measured, limit, "", (), values)


@dataclass(frozen=True)
class Interruption:
    """One interruption of the command stream the preflight staged: the chain stops the arm at ``stopped`` (the
    e-stop latched; the commands stopped), and lets it go again at ``released`` (``~/reset``; commands resume);
    ``hold_from`` is when the arm must be holding still (the e-stop at once, the watchdog after its timeout)."""

    check: str  # "estop" or "watchdog"
    stopped: float
    hold_from: float
    released: float
    until: float  # end of the observation after the release


def judge_interruption(trace: Trace, event: Interruption, max_velocity: Sequence[float],
                       reseed_tolerance: float) -> CheckResult:
    """The arm holds from ``hold_from`` to the release (no joint drifts more than :data:`HOLD_TOLERANCE_RAD`), the
    driver reports torque on throughout, an e-stop freezes the filter's output, and after the release the first
    output lies at the arm (within the filter's reseed tolerance) and every later one within the velocity bound."""
    findings: list[str] = []
    values: dict[str, object] = {}
    held = trace.states_between(event.hold_from, event.released)
    if len(held) < 5:
        findings.append(f"only {len(held)} joint states while it should hold")
        drift = math.nan
    else:
        spans = np.nanmax(held, axis=0) - np.nanmin(held, axis=0)
        drift = float(np.max(spans))
        values["drift_rad"] = {n: round(float(s), 4) for n, s in zip(JOINT_NAMES, spans, strict=True)}
        if not drift <= HOLD_TOLERANCE_RAD:
            moved = JOINT_NAMES[int(np.argmax(spans))]
            findings.append(f"the arm did not hold: {moved} moved {drift:.3f} rad")
    reports = [on for t, on in trace.torque if event.stopped <= t <= event.until]
    values["torque_reports"] = len(reports)
    if not all(reports):
        findings.append("the driver reported torque off")
    if event.check == "estop":
        frozen = [q for t, _, q in trace.outputs if event.stopped + 0.05 < t < event.released]
        if frozen and max(float(np.max(np.abs(q - frozen[0]))) for q in frozen) > 1e-9:
            findings.append("the filter's output changed while e-stopped")
    after = [(stamp, q) for t, stamp, q in trace.outputs if t > event.released]
    jump, speed = math.nan, 0.0
    at_release = trace.state_at(event.released)
    if not after or at_release is None:
        findings.append("no output after the release")
    else:
        jump = float(np.max(np.abs(after[0][1] - at_release)))
        if jump > reseed_tolerance + NO_JUMP_RAD:
            findings.append(f"the first output after the release is {jump:.3f} rad from the arm")
        bound = np.asarray(max_velocity)
        for (t0, q0), (t1, q1) in zip(after[:-1], after[1:], strict=True):
            dt = t1 - t0
            if dt > 0:
                ratio = float(np.max(np.abs(q1 - q0) / (bound * dt)))
                speed = max(speed, ratio)
        if speed > SPEED_TOLERANCE:
            findings.append(f"after the release an output moved at {speed:.2f} × the velocity bound")
    values.update({"hold_drift_rad": drift, "release_offset_rad": jump, "release_speed_of_bound": round(speed, 3)})
    measured = (f"held within {drift:.3f} rad, torque on in {len(reports)} report(s), release {jump:.3f} rad from the "
                f"arm, then ≤ {speed:.2f} × the velocity bound")
    limit = (f"drift <= {HOLD_TOLERANCE_RAD:g} rad, torque on, release <= {reseed_tolerance + NO_JUMP_RAD:g} rad, "
             f"speed <= bound")
    if findings:
        return CheckResult(event.check, Status.FAIL, measured, limit, "; ".join(findings), (), values)
    return CheckResult(event.check, Status.PASS, measured, limit, "", (), values)


def joint_bounds(config: SafetyConfig) -> tuple[np.ndarray, np.ndarray]:
    """The safety filter's position limits (lower, upper) in :data:`JOINT_NAMES` order."""
    return (np.array([lim.lower for lim in config.limits]), np.array([lim.upper for lim in config.limits]))


def max_velocities(config: SafetyConfig) -> list[float]:
    return [lim.max_velocity for lim in config.limits]
