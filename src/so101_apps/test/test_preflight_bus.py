"""``so101 preflight``'s bus checks on the virtual SO-101 (in this process, time stepped by hand): a clean arm passes,
and each fault, injected one at a time, fails its own check and no other; a failure that makes moving the arm unsafe
stops the preflight before the deploy chain starts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from so101_apps.preflight import bus_checks
from so101_apps.preflight.flow import GATES, PreflightOptions, run_preflight
from so101_apps.preflight.report import CheckResult, Status
from so101_apps.preflight.thresholds import DriverSettings, driver_settings
from so101_bringup.node_specs import GraphOptions, deploy_graph
from so101_bringup.share import config_dir
from so101_driver.bus import FeetechBus
from so101_driver.errors import PortError
from so101_feetech.calibration import MotorCalibration, save_calibration
from so101_feetech.control_table import Register
from so101_virtual.robot import VirtualSO101

ELBOW_ID, WRIST_ID = 3, 4


@pytest.fixture(scope="module")
def arm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[VirtualSO101, str, Path]]:
    folder = tmp_path_factory.mktemp("preflight_bus")
    robot = VirtualSO101("default")
    port = robot.open_pty(folder / "so101_follower")
    calibration = save_calibration(folder / "follower.json", robot.calibration())
    robot.step(0.05)
    try:
        yield robot, port, calibration
    finally:
        robot.close()


@pytest.fixture
def settings(arm: tuple[VirtualSO101, str, Path]) -> DriverSettings:
    """The driver's parameters as the deploy graph gives them (config/driver.yaml): the thresholds judged by."""
    _, port, calibration = arm
    specs = deploy_graph(GraphOptions(port=port, calibration_file=str(calibration), configure_servos=True,
                                      compensation=False, command_source="motion"))
    return driver_settings(next(s for s in specs if s.key == "so101_driver"), config_dir())


@pytest.fixture
def bus(arm: tuple[VirtualSO101, str, Path], settings: DriverSettings) -> Iterator[FeetechBus]:
    robot, port, _ = arm
    p = settings.parameters
    with FeetechBus(port, p.baudrate, timeout_ms=50.0, retries=3) as connected:
        yield connected
    robot.faults.clear()
    for memory in robot.memories:  # a heated servo would take minutes to cool: back at ambient for the next test
        robot.faults.heat(memory.servo_id, robot.profile.physics.ambient_temperature)
    robot.step(0.05)


def _bus_results(bus: FeetechBus, robot: VirtualSO101, settings: DriverSettings) -> dict[str, CheckResult]:
    calibration = robot.calibration()
    servos, ids = bus_checks.check_servos(bus, calibration)
    bus.timeout_ms, bus.retries = settings.parameters.timeout_ms, settings.parameters.retries  # as the driver reads
    sample = bus_checks.sample_bus(bus, ids)
    results = [servos, bus_checks.check_supply(sample, calibration, settings.config),
               bus_checks.check_temperature(sample, calibration, settings.config),
               bus_checks.check_servo_status(sample, calibration), bus_checks.check_round_trip(sample, settings)]
    return {r.check: r for r in results}


def _failed(results: dict[str, CheckResult]) -> dict[str, CheckResult]:
    return {name: r for name, r in results.items() if r.status is Status.FAIL}


def test_a_clean_arm_passes_every_bus_check(arm, bus, settings) -> None:
    robot, _, _ = arm
    results = _bus_results(bus, robot, settings)
    assert _failed(results) == {}, results
    # timing on a loaded machine may warn (p99 over the budget); everything else is the arm's and passes
    untimed = {name: r.status for name, r in results.items() if name != "bus_round_trip"}
    assert untimed == dict.fromkeys(untimed, Status.PASS), results
    assert results["servos"].values["ids"] == [1, 2, 3, 4, 5, 6]
    assert results["supply_voltage"].values["voltage_warn_min_v"] == 10.5  # config/driver.yaml's, not a copy


def test_a_missing_servo_fails_servos_naming_the_joint(arm, bus, settings) -> None:
    robot, _, _ = arm
    robot.faults.unplug(ELBOW_ID)
    failed = _failed(_bus_results(bus, robot, settings))
    assert list(failed) == ["servos"]
    assert failed["servos"].joints == ("elbow_flex",) and "elbow_flex (id 3) does not answer" in failed["servos"].detail


def test_low_supply_voltage_fails_supply(arm, bus, settings) -> None:
    robot, _, _ = arm
    robot.faults.set_voltage_sag(3.0)  # 12 V → 9 V
    robot.step(0.05)
    failed = _failed(_bus_results(bus, robot, settings))
    assert list(failed) == ["supply_voltage"]
    assert "supply low" in failed["supply_voltage"].detail and failed["supply_voltage"].measured == "9.0-9.0 V"


def test_a_hot_servo_fails_temperature_naming_the_joint(arm, bus, settings) -> None:
    robot, _, _ = arm
    robot.faults.heat(WRIST_ID, 65.0)  # above the driver's temperature_warn_c (60 °C), below the servo's own cut-off
    robot.step(0.05)
    failed = _failed(_bus_results(bus, robot, settings))
    assert list(failed) == ["temperature"]
    assert failed["temperature"].joints == ("wrist_flex",) and failed["temperature"].measured == "65 °C (wrist_flex)"


def test_a_slow_bus_fails_the_round_trip(arm, bus, settings) -> None:
    robot, _, _ = arm
    robot.faults.set_extra_latency(0.012)  # every reply 12 ms late: a read no longer fits the 10 ms cycle
    failed = _failed(_bus_results(bus, robot, settings))
    assert list(failed) == ["bus_round_trip"]
    assert failed["bus_round_trip"].values["p50_ms"] > 12.0


def test_firmware_settings_are_the_drivers_and_a_wrong_one_fails_naming_it(arm, bus) -> None:
    robot, _, _ = arm
    calibration: dict[str, MotorCalibration] = robot.calibration()
    ids = [cal.id for cal in calibration.values()]
    factory = bus_checks.check_settings(bus, calibration, ids)  # the virtual servos start with factory settings
    assert factory.status is Status.FAIL and "P_Coefficient 32 (expected 16)" in factory.measured
    bus.configure_lerobot(ids, gripper_id=calibration["gripper"].id)  # what the driver does at start
    assert bus_checks.check_settings(bus, calibration, ids).status is Status.PASS
    with bus.eeprom_unlocked([ELBOW_ID]):
        bus.write(Register.Max_Position_Limit, ELBOW_ID, calibration["elbow_flex"].range_max - 200)
    wrong = bus_checks.check_settings(bus, calibration, ids)
    assert wrong.status is Status.FAIL and wrong.joints == ("elbow_flex",)
    assert wrong.measured == (f"elbow_flex: Max_Position_Limit {calibration['elbow_flex'].range_max - 200} "
                              f"(expected {calibration['elbow_flex'].range_max})")
    with bus.eeprom_unlocked([ELBOW_ID]):
        bus.write(Register.Max_Position_Limit, ELBOW_ID, calibration["elbow_flex"].range_max)


def test_a_failed_gate_stops_the_preflight_before_the_arm_moves(arm, tmp_path) -> None:
    robot, port, calibration = arm
    robot.faults.unplug(ELBOW_ID)
    try:
        seen: list[CheckResult] = []
        report = run_preflight(PreflightOptions("real", port, str(calibration), "default", tmp_path), seen.append)
    finally:
        robot.faults.clear()
    assert not report.passed and report.with_status(Status.FAIL) == ["servos"]
    skipped = report.with_status(Status.SKIP)
    assert {"safety_limits", "calibration.elbow_flex", "estop", "watchdog", "firmware_settings", "gripper_grasp"} <= set(skipped)
    assert all("servos failed (the arm is not moved)" in report.result(name).detail for name in skipped)
    assert "servos" in GATES and [r.check for r in seen] == [r.check for r in report.results]
    written = json.loads((tmp_path / "preflight.json").read_text())
    assert written["result"] == "fail" and [c["check"] for c in written["checks"]] == [r.check for r in report.results]
    assert written["checks"][0]["joints"] == ["elbow_flex"]


def test_a_preflight_that_cannot_go_on_keeps_its_report_and_says_why(arm, tmp_path) -> None:
    _, _, calibration = arm
    gone = tmp_path / "no_such_port"
    with pytest.raises(PortError, match="no_such_port"):
        run_preflight(PreflightOptions("real", str(gone), str(calibration), "default", tmp_path))
    written = json.loads((tmp_path / "preflight.json").read_text())
    assert written["result"] == "fail" and [c["check"] for c in written["checks"]] == ["preflight"]
    assert "cannot open" in written["checks"][0]["detail"]
