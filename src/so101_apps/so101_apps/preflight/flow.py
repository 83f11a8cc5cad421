"""``so101 preflight``'s run: the checks in order, on the virtual SO-101 or the arm on a port.

1. **The bus** (the preflight opens the port itself, nothing else runs): the servos answer with the expected ids
   and model, their supply, temperatures and error bits, and the bus round-trip time. A missing servo, a supply
   out of its limits, a hot servo or an error bit stops the preflight here: the arm is not moved.
2. **The deploy chain**: the deploy graph's driver (in its own process, as a launch runs it) and safety filter,
   with the preflight in the policy's seat (:class:`~so101_apps.preflight.node.PreflightNode`). The safety
   filter's limits in force are read from the running node; the arm moves slowly to the check pose, sweeps each
   gravity-loaded joint and wiggles the others (:mod:`.motion_plan`), which gives every joint's calibration
   against the URDF (:mod:`.gravity`); the e-stop latches during a move and is released, the commands stop
   during a move (the watchdog) and resume; the arm goes back where it started. The driver's cycle rate and its
   servos' current come from its ``/diagnostics`` meanwhile.
3. **The firmware settings** after the driver configured the servos (the port is free again).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from so101_apps.motion_runs import start_virtual_arm, stop_virtual_arm
from so101_apps.preflight import bus_checks, chain_checks
from so101_apps.preflight.chain_checks import Interruption, judge_calibration, judge_interruption
from so101_apps.preflight.gravity import GravityModel, estimate_calibration, urdf_joints
from so101_apps.preflight.motion_plan import Leg, Plan, move_plan, probe_plan
from so101_apps.preflight.node import DRIVER, SAFETY_FILTER, PreflightNode
from so101_apps.preflight.report import CheckResult, PreflightReport, Status
from so101_apps.preflight.thresholds import DriverSettings, driver_settings
from so101_bringup.composition import ComposedGraph
from so101_bringup.node_specs import GraphOptions, NodeSpec, deploy_graph
from so101_bringup.share import config_dir
from so101_common.joints import JOINT_NAMES
from so101_common.parameters import parameter_specs
from so101_common.waiting import wait_for
from so101_driver.bus import FeetechBus
from so101_feetech.calibration import JointMapping, MotorCalibration, load_calibration, resolve_calibration_path
from so101_safety.config import JointOverride, NodeOptions, SafetyConfig, split_parameters

__all__ = ["PreflightOptions", "run_preflight", "GATES", "EYE_QUESTIONS", "leg_speed"]

PATIENT_RETRIES = 3  # extra tries of the untimed reads (finding the servos, their settings): a slow adapter, a busy host

GATES = ("servos", "supply_voltage", "temperature", "servo_status")  # a failure here: the arm is not moved
# what a joint gravity does not load does, in the URDF's convention, when it turns by +0.3 rad at the check pose
EYE_QUESTIONS = {
    "shoulder_pan": "did the arm turn to its right (clockwise seen from above)?",
    "wrist_roll": "seen from in front of the jaws, did the gripper turn clockwise?",
    "gripper": "did the gripper open?",
}
EYE_MOVE_RAD = 0.3
STAGE_SPEED = 0.2  # rad/s of the moves the e-stop and the watchdog interrupt
HOLD_OBSERVED_S = 1.5  # s the arm is watched holding after the e-stop / past the watchdog's timeout
LIMIT_CLEARANCE_RAD = 0.02  # commands stay this far inside the safety limits and the calibrated range


@dataclass(frozen=True)
class PreflightOptions:
    robot: str  # "virtual" or "real"
    port: str  # the real arm's serial port
    calibration_file: str  # the real arm's calibration ('' = the driver's robot_id file)
    profile: str  # gap profile of the virtual arm
    out: Path  # report folder (and the virtual arm's files)
    robot_id: str | None = None  # the real arm's LeRobot id (None: the driver's robot_id)
    confirm: Callable[[str], bool] | None = None  # asks the user a yes/no question (--confirm)
    before_moving: Callable[[str], None] | None = None  # tells the user the arm is about to move; returns when clear


def run_preflight(options: PreflightOptions, emit: Callable[[CheckResult], None] = lambda _: None) -> PreflightReport:
    """Every check, in order; ``emit`` sees each result as it comes. The report is written to ``options.out``."""
    started = time.monotonic()
    arm = None
    port, calibration_file = options.port, options.calibration_file
    if options.robot == "virtual":
        arm, link, calibration_path = start_virtual_arm(options.profile, options.out / "virtual_arm")
        port, calibration_file = str(link), str(calibration_path)
    try:
        robot_id = options.robot_id if options.robot == "real" else None
        specs = deploy_graph(GraphOptions(port=port, robot_id=robot_id, calibration_file=calibration_file,
                                          configure_servos=True, compensation=False, command_source="motion",
                                          record=False))
        driver = next(s for s in specs if s.key == DRIVER)
        settings = driver_settings(driver, config_dir())
        path = resolve_calibration_path(settings.parameters.calibration_file, settings.parameters.robot_id,
                                        "follower", port)
        calibration = load_calibration(path)
        report = PreflightReport(options.robot, port, str(path))

        def add(results: CheckResult | list[CheckResult]) -> None:
            for result in report.add(results):
                emit(result)

        try:
            ids = _bus_phase(port, calibration, settings, add)
            gate = [r.check for r in report.failed() if r.check in GATES]
            if gate:
                because = f"not run: {', '.join(gate)} failed (the arm is not moved)"
                for check in ("safety_limits", *(f"calibration.{n}" for n in JOINT_NAMES), "load", "cycle_rate",
                              "estop", "watchdog", "firmware_settings", "gripper_grasp"):
                    add(CheckResult.skipped(check, because))
            else:
                safety = _chain_phase([s for s in specs if s.key in (DRIVER, SAFETY_FILTER)], calibration, settings,
                                      options, add)
                with _bus(port, settings) as bus, bus.patient(PATIENT_RETRIES):  # as the driver configured the servos
                    add(bus_checks.check_settings(bus, calibration, ids))
                    gripper = bus_checks.read_gripper_protection(bus, calibration, ids)
                add(chain_checks.judge_gripper_grasp(safety, gripper))
        except BaseException as err:  # what ran so far is kept: the report says where the preflight stopped and why
            add(CheckResult("preflight", Status.FAIL, "stopped", "-", " ".join(str(err).split()) or type(err).__name__))
            report.duration_s = time.monotonic() - started
            report.write(options.out)
            raise
    finally:
        if arm is not None:
            stop_virtual_arm(arm)
    report.duration_s = time.monotonic() - started
    report.write(options.out)
    return report


def _bus(port: str, settings: DriverSettings) -> FeetechBus:
    """The bus with the driver's rate and deadlines, for the timed reads; finding the servos and reading their
    settings is not timed and runs under ``bus.patient(PATIENT_RETRIES)`` (LeRobot's 50 ms deadline)."""
    p = settings.parameters
    return FeetechBus(port, p.baudrate, timeout_ms=p.timeout_ms, retries=p.retries, reply_gap_ms=p.reply_gap_ms)


def _bus_phase(port: str, calibration: dict[str, MotorCalibration], settings: DriverSettings,
               add: Callable[[CheckResult], None]) -> list[int]:
    with _bus(port, settings) as bus:
        with bus.patient(PATIENT_RETRIES):
            servos, ids = bus_checks.check_servos(bus, calibration)
        add(servos)
        if not ids:
            for check in ("supply_voltage", "temperature", "servo_status", "bus_round_trip"):
                add(CheckResult.skipped(check, "not measured: no servo answers"))
            return ids
        sample = bus_checks.sample_bus(bus, ids)
    add(bus_checks.check_supply(sample, calibration, settings.config))
    add(bus_checks.check_temperature(sample, calibration, settings.config))
    add(bus_checks.check_servo_status(sample, calibration))
    add(bus_checks.check_round_trip(sample, settings))
    return ids


def _safety_config(node: PreflightNode) -> SafetyConfig:
    specs = [*parameter_specs(SafetyConfig, exclude=("joints",)), *parameter_specs(NodeOptions)]
    for name in JOINT_NAMES:
        specs += parameter_specs(JointOverride, prefix=f"joints.{name}.")
    values = node.safety_parameters([s.name for s in specs])
    return split_parameters(values, f"the running {SAFETY_FILTER}'s parameters")[0]


def _chain_phase(specs: list[NodeSpec], calibration: dict[str, MotorCalibration], settings: DriverSettings,
                 options: PreflightOptions, add: Callable[[CheckResult | list[CheckResult]], None]) -> SafetyConfig:
    specs = [*specs, NodeSpec("so101_apps.preflight.node:PreflightNode", name="preflight")]
    model = GravityModel()
    with ComposedGraph(specs, own_process={DRIVER}) as graph:
        node = graph.node("preflight", PreflightNode)

        def check() -> None:
            graph.raise_for_stopped_nodes()  # the driver's own error line, at once

        def ready() -> bool:
            check()
            return node.known() and bool(node.driver_rates or node.trace.torque)

        if not wait_for(ready, timeout=60.0):
            raise RuntimeError(f"the deploy chain did not start: joint states {node.states_received}, driver "
                               f"diagnostics {len(node.trace.torque)}")
        safety = _safety_config(node)
        add(chain_checks.judge_safety_limits(safety, urdf_joints()))
        calibrated = JointMapping.from_calibration(calibration).limits_rad()
        filter_low, filter_high = chain_checks.joint_bounds(safety)
        low = np.maximum(filter_low, calibrated[0]) + LIMIT_CLEARANCE_RAD
        high = np.minimum(filter_high, calibrated[1]) - LIMIT_CLEARANCE_RAD
        start = node.arm()
        plan = probe_plan(start, low, high)
        if options.before_moving is not None:
            options.before_moving(f"the arm moves from where it is to the check pose (upper arm upright, forearm "
                                  f"forward, hand tilted up) at up to {max(leg_speed(leg) for leg in plan.legs):.1f} rad/s, "
                                  "sweeps each joint, and comes back: keep its reach clear")
        node.driver_rates.clear()
        recording = node.play(plan, check)
        pose = plan.end
        confirmed = _confirm_by_eye(node, pose, low, high, options.confirm, check)
        estop, aside = _exercise_estop(node, pose, high, check)
        watchdog = _exercise_watchdog(node, aside, pose, safety.watchdog_timeout, check)
        node.play(move_plan(pose, start), check)
        states_hz = len(recording.time) / plan.duration
        add(judge_calibration(estimate_calibration(recording, plan, model), recording, plan, calibrated,
                              (filter_low, filter_high), confirmed))
        add(chain_checks.judge_load(node.currents, node.loads, node.volts, settings.config))
        add(chain_checks.judge_cycle_rate(node.driver_rates, states_hz, settings.config))
        velocities = chain_checks.max_velocities(safety)
        add(judge_interruption(node.trace, estop, velocities, safety.reseed_tolerance))
        add(judge_interruption(node.trace, watchdog, velocities, safety.reseed_tolerance))
    return safety


def leg_speed(leg: Leg) -> float:
    return float(np.max(np.abs(leg.end - leg.start))) / leg.duration if leg.duration > 0 else 0.0


def _confirm_by_eye(node: PreflightNode, pose: np.ndarray, low: np.ndarray, high: np.ndarray,
                    ask: Callable[[str], bool] | None, check: Callable[[], None]) -> dict[str, bool] | None:
    """With ``ask``: each joint gravity does not load turns by +0.3 rad and back; the user says what they saw."""
    if ask is None:
        return None
    answers = {}
    for name, question in EYE_QUESTIONS.items():
        j = JOINT_NAMES.index(name)
        turned = pose.copy()
        turned[j] = min(pose[j] + EYE_MOVE_RAD, high[j])
        node.play(move_plan(pose, turned, STAGE_SPEED), check)
        answers[name] = ask(f"{name} turned by +{turned[j] - pose[j]:.2f} rad: {question}")
        node.play(move_plan(turned, pose, STAGE_SPEED), check)
    return answers


def _exercise_estop(node: PreflightNode, pose: np.ndarray, high: np.ndarray, check: Callable[[], None],
                    ) -> tuple[Interruption, np.ndarray]:
    """shoulder_pan moves slowly; half a second in, ``~/estop``; the commands go on to the end of the move (the filter
    must refuse them); then ``~/reset`` and the move's end commanded for a second. Returns the event and that end."""
    target = pose.copy()
    target[0] = min(pose[0] + 0.3, high[0])
    move = move_plan(pose, target, STAGE_SPEED)
    stopped: list[float] = []

    def on_tick(t: float) -> bool:
        if not stopped and t >= 0.5:
            stopped.append(node.estop())
        return True

    node.play(Plan((*move.legs, Leg(target, target, 3.0))), check, until=0.5 + HOLD_OBSERVED_S, on_tick=on_tick)
    released = node.reset()
    node.play(Plan((Leg(target, target, 1.0),)), check)
    return Interruption("estop", stopped[0], stopped[0] + 0.3, released, time.monotonic()), target


def _exercise_watchdog(node: PreflightNode, aside: np.ndarray, pose: np.ndarray, timeout: float,
                       check: Callable[[], None]) -> Interruption:
    """shoulder_pan moves back slowly from ``aside`` to ``pose``; half a second in, the commands stop for the
    watchdog's timeout and :data:`HOLD_OBSERVED_S` more, then the move's end is commanded for a second."""
    move = move_plan(aside, pose, STAGE_SPEED)
    silent: list[float] = []

    def on_tick(t: float) -> bool:
        if t < 0.5:
            return True
        if not silent:
            silent.append(time.monotonic())
        return False

    node.play(Plan((*move.legs, Leg(pose, pose, 3.0))), check, until=0.5 + timeout + HOLD_OBSERVED_S, on_tick=on_tick)
    resumed = time.monotonic()
    node.play(Plan((Leg(pose, pose, 1.0),)), check)
    return Interruption("watchdog", silent[0], silent[0] + timeout + 0.3, resumed, time.monotonic())

