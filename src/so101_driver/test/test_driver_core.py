"""DriverCore against an in-memory fake bus (conftest.py): units, commands, validation, faults and recovery."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest

from so101_common.diagnostics import Level
from so101_common.joints import JOINT_NAMES
from so101_driver.driver_core import DriverConfig, DriverCore
from so101_driver.errors import BusError, BusTimeout, CommandRejected
from so101_feetech.calibration import raw_to_rad


@pytest.fixture
def core(bus, cals, tick_clock):
    core = DriverCore(bus, cals, clock=tick_clock)
    core.start()
    return core


def test_start_reads_and_holds_the_arm(core, bus, cals):
    assert bus.is_connected
    assert core.goals().keys() == set(JOINT_NAMES)
    result = core.cycle()
    sample = result.sample
    assert sample.names == JOINT_NAMES and sample.valid.all()
    for k, name in enumerate(JOINT_NAMES):
        assert sample.position[k] == pytest.approx(raw_to_rad(name, bus.positions[cals[name].id], cals[name]))
    assert sample.velocity[0] == pytest.approx(10 * 2 * math.pi / 4095)
    assert sample.effort[0] == pytest.approx(-0.2 * 2.94)
    # the goals written are the present positions: nothing moves
    assert bus.writes[-1] == {c.id: (c.range_min + c.range_max) // 2 for c in cals.values()}
    fb = result.telemetry[0].feedback
    assert fb.voltage_v == pytest.approx(12.1) and fb.temperature == 30


def test_configure_on_start(bus, cals, caplog):
    with caplog.at_level(logging.INFO):
        DriverCore(bus, cals, config=DriverConfig(configure_servos=True)).start(torque_on=True)
    assert bus.configured == ([1, 2, 3, 4, 5, 6], 6)
    assert "wrote shoulder_pan: Acceleration" in caplog.text  # what changed is said where the user looks


def test_configuration_lost_to_a_slow_bus_is_tried_again_and_fails_only_after_every_attempt(bus, cals):
    from so101_driver.errors import BusTimeout

    calls = []

    def slow_then_answering(ids, gripper_id=None):
        calls.append(list(ids))
        if len(calls) < 3:
            raise BusTimeout(4, 2, "read Torque_Enable")
        bus.configured = (list(ids), gripper_id)
        return {}

    bus.configure_lerobot = slow_then_answering
    DriverCore(bus, cals, config=DriverConfig(configure_servos=True, configure_attempts=3)).start(torque_on=True)
    assert len(calls) == 3 and bus.configured == ([1, 2, 3, 4, 5, 6], 6)
    calls.clear()
    with pytest.raises(BusTimeout, match="Torque_Enable"):
        DriverCore(bus, cals, config=DriverConfig(configure_servos=True, configure_attempts=2)).start(torque_on=True)
    assert len(calls) == 2
    assert all(bus.torque.values())


def test_partial_command_moves_only_named_joints(core, bus, cals):
    before = dict(bus.positions)
    result = core.command(["elbow_flex", "gripper"], [0.3, 1.0])
    assert result.clamped == ()
    assert result.goals["elbow_flex"] == pytest.approx(0.3, abs=2e-3)
    sample = core.cycle().sample  # read (old) then write
    sample = core.cycle().sample
    k = JOINT_NAMES.index("elbow_flex")
    assert sample.position[k] == pytest.approx(0.3, abs=2e-3)
    assert sample.position[JOINT_NAMES.index("gripper")] == pytest.approx(1.0, abs=2e-3)
    for name in ("shoulder_pan", "shoulder_lift", "wrist_flex", "wrist_roll"):
        assert bus.positions[cals[name].id] == before[cals[name].id]


def test_command_is_clamped_to_calibrated_range(core, bus, cals):
    result = core.command(["shoulder_pan", "wrist_flex"], [10.0, -10.0])
    assert set(result.clamped) == {"shoulder_pan", "wrist_flex"}
    for _ in range(10):  # max_relative_target per cycle: the arm gets there in a few cycles
        core.cycle()
    assert bus.positions[1] == cals["shoulder_pan"].range_max
    assert bus.positions[4] == cals["wrist_flex"].range_min


@pytest.mark.parametrize(
    ("names", "positions", "reason"),
    [
        (["elbow_flex"], [0.1, 0.2], "1 names but 2 positions"),
        ([], [], "empty"),
        (["elbow"], [0.1], "unknown joints"),
        (["elbow_flex", "elbow_flex"], [0.1, 0.2], "duplicate"),
        (["elbow_flex"], [float("nan")], "non-finite"),
        (["elbow_flex", "gripper"], [0.1, float("inf")], r"non-finite positions for \['gripper'\]"),
        (["elbow_flex"], ["x"], "not numbers"),
    ],
)
def test_malformed_commands_are_rejected_with_a_reason(core, bus, names, positions, reason):
    goals = core.goals()
    with pytest.raises(CommandRejected, match=reason):
        core.command(names, positions)
    assert core.goals() == goals  # nothing applied, not even partly
    assert core.commands_rejected == 1 and core.last_rejection
    core.cycle()  # still cycling


def test_unplugged_servo_faults_holds_and_recovers(core, bus, cals):
    core.command(["elbow_flex"], [0.2])
    core.cycle()
    bus.unplugged.add(3)
    result = core.cycle()
    k = JOINT_NAMES.index("elbow_flex")
    assert not result.sample.valid[k] and math.isnan(result.sample.position[k])
    assert result.sample.valid.sum() == 5
    tele = result.telemetry[k]
    assert tele.faulted and "servo 3" in tele.fault_reason and "3 tries" in tele.fault_reason
    diags = {d.name: d for d in core.diagnostics()}
    assert diags["so101_driver: elbow_flex"].level == Level.ERROR
    assert diags["so101_driver: bus"].level == Level.WARN
    assert "elbow_flex" in diags["so101_driver: bus"].message
    # other joints still take commands; the faulted one keeps its goal but gets no write while its present
    # position is unknown (it may have moved: a goal written blind could jump it)
    held = core.goals()["elbow_flex"]
    core.command(["shoulder_pan"], [0.1])
    core.cycle()
    assert 3 not in bus.writes[-1] and 1 in bus.writes[-1]
    bus.unplugged.clear()
    result = core.cycle()
    assert result.sample.valid.all() and not result.telemetry[k].faulted
    core.cycle()  # answering again: its held goal is written, bounded from where it now is
    assert raw_to_rad("elbow_flex", bus.writes[-1][3], cals["elbow_flex"]) == pytest.approx(held)
    assert result.telemetry[k].total_failures == 2
    recovered = {d.name: d for d in core.diagnostics()}
    assert recovered["so101_driver: elbow_flex"].level == Level.OK
    # the timeout of the cycle after the previous report is still reported once, as a rate
    assert recovered["so101_driver: bus"].level == Level.WARN and "timeouts 1.0/s" in recovered["so101_driver: bus"].message
    assert {d.level for d in core.diagnostics()} == {Level.OK}


def test_servo_missing_at_start_gets_no_made_up_goal(bus, cals, tick_clock):
    bus.unplugged.add(5)
    core = DriverCore(bus, cals, clock=tick_clock)
    core.start()
    core.cycle()
    assert "wrist_roll" not in core.goals()
    assert 5 not in bus.writes[-1]
    bus.unplugged.clear()
    core.cycle()
    assert "wrist_roll" in core.goals()


def test_port_failure_and_reconnect(bus, cals, tick_clock):
    clock = tick_clock
    core = DriverCore(bus, cals, clock=clock, config=DriverConfig(reconnect_interval_s=0.5))
    core.start()
    bus.port_broken = True
    result = core.cycle()
    assert not result.bus_ok and result.sample is None
    assert all(t.faulted for t in result.telemetry)
    assert core.diagnostics()[0].level == Level.ERROR
    assert "disconnected" in core.diagnostics()[0].message
    core.cycle()  # within the interval: no reconnect attempt
    connects = bus.connects
    bus.port_broken = False
    clock.t += 1.0
    result = core.cycle()
    assert result.bus_ok and result.sample.valid.all()
    assert bus.connects == connects + 1


def test_a_port_that_fails_at_a_commands_write_is_reported_and_reopened(bus, cals, tick_clock):
    core = DriverCore(bus, cals, clock=tick_clock, config=DriverConfig(reconnect_interval_s=0.5))
    core.start()
    bus.port_broken = True
    result = core.command(["elbow_flex"], [0.3])  # the command is taken; its write fails with the port
    assert core.goals()["elbow_flex"] == pytest.approx(result.goals["elbow_flex"])
    assert "device disconnected" in core.bus_error
    assert core.diagnostics()[0].level == Level.ERROR
    bus.port_broken = False
    tick_clock.t += 1.0
    writes = len(bus.writes)
    assert core.cycle().bus_ok and len(bus.writes) == writes  # the reopened port's first cycle reads the arm...
    core.cycle()
    written = bus.writes[-1][cals["elbow_flex"].id]  # ...and the next one writes the goal, bounded from there
    assert raw_to_rad("elbow_flex", written, cals["elbow_flex"]) == pytest.approx(0.3, abs=2e-3)


def test_status_bits_show_in_diagnostics(core, bus):
    bus.status[2] = 1 << 5  # overload
    core.cycle()
    entry = {d.name: d for d in core.diagnostics()}["so101_driver: shoulder_lift"]
    assert entry.level == Level.ERROR and "OVERLOAD" in entry.message
    assert entry.values["errors"] == "OVERLOAD"


def test_torque_enable_resets_goals_to_present(core, bus, cals):
    core.command(["shoulder_pan"], [0.5])
    # torque is off: the user moves the arm by hand; enabling must hold it there, not jump to 0.5 rad
    bus.positions[1] = 1000
    core.set_torque(True)
    assert all(bus.torque.values()) and core.torque_enabled
    assert core.goals()["shoulder_pan"] == pytest.approx(raw_to_rad("shoulder_pan", 1000, cals["shoulder_pan"]))
    assert bus.writes[-1][1] == 1000
    core.set_torque(False)
    assert not any(bus.torque.values()) and not core.torque_enabled


def test_torque_off_tries_every_servo(core, bus):
    core.set_torque(True)
    bus.unplugged.add(2)
    with pytest.raises(BusError, match="servo 2"):
        core.set_torque(False)
    assert bus.torque[2] == 1 and all(bus.torque[i] == 0 for i in (1, 3, 4, 5, 6))


def test_torque_on_refuses_when_a_servo_is_missing(core, bus):
    bus.unplugged.add(4)
    with pytest.raises(BusTimeout, match="servo 4"):
        core.set_torque(True)
    assert not any(bus.torque.values())


def test_stop_releases_port(core, bus):
    core.set_torque(True)
    core.stop(torque_off=True)
    assert not bus.is_connected and not any(bus.torque.values())


def test_a_sample_is_stamped_when_the_servos_were_asked_not_when_their_reply_came(core, bus, tick_clock):
    bus.clock, bus.read_s = tick_clock, 0.015  # a USB-serial adapter's latency timer holds the replies back
    sample = core.cycle().sample
    assert sample.stamp == bus.asked_at[-1]
    assert core.sample_age(sample) >= 0.015


def test_cycle_rate_is_reported(core):
    for _ in range(5):
        core.cycle()
    assert core.cycle_rate_hz() > 0
    assert np.isfinite(float(core.diagnostics()[0].values["cycle_capacity_hz"]))


# --- bounds and floods (issue 19) -------------------------------------------------------------------

def _steps(cals, name: str, rad: float) -> float:
    return rad / abs(raw_to_rad(name, 1, cals[name]) - raw_to_rad(name, 0, cals[name]))


@pytest.mark.parametrize("write_on_command", [True, False])
def test_no_goal_write_lies_further_than_max_relative_target_from_the_present_position(bus, cals, tick_clock,
                                                                                      write_on_command):
    """A node that bypasses the safety filter cannot jump the arm: every write, the command's own and the
    cycle's, is cut to max_relative_target from where the servo is (the fake servo then goes there)."""
    config = DriverConfig(max_relative_target=0.2, write_on_command=write_on_command)
    core = DriverCore(bus, cals, clock=tick_clock, config=config)
    core.start()
    core.cycle()
    servo = cals["elbow_flex"].id
    bound = _steps(cals, "elbow_flex", 0.2)
    present = bus.positions[servo]
    writes = len(bus.writes)
    core.command(["elbow_flex"], [1.2])  # ~1.2 rad from where the arm is
    for _ in range(12):
        core.cycle()
    moves = [w[servo] for w in bus.writes[writes:]]
    assert moves and all(abs(b - a) <= bound + 1 for a, b in zip([present, *moves], moves, strict=False))
    assert raw_to_rad("elbow_flex", bus.positions[servo], cals["elbow_flex"]) == pytest.approx(1.2, abs=2e-3)
    assert int(core.diagnostics()[0].values["goals_limited"]) >= 5


def test_torque_on_after_the_arm_fell_holds_it_where_it_lies(core, bus, cals):
    core.command(["shoulder_lift"], [0.0])
    core.cycle()
    core.set_torque(False)
    servo = cals["shoulder_lift"].id
    bus.positions[servo] += 1000  # torque off: the arm falls ~1.5 rad
    core.command(["shoulder_lift"], [0.0])  # a stale command still arrives
    core.set_torque(True)
    assert bus.writes[-1][servo] == bus.positions[servo]  # goals = present before torque comes on
    core.command(["shoulder_lift"], [0.0])  # the stale target again: no jump, a bounded step
    core.cycle()
    bound = _steps(cals, "shoulder_lift", core.config.max_relative_target)
    assert abs(bus.writes[-1][servo] - bus.writes[-3][servo]) <= bound + 1


def test_a_command_flood_costs_at_most_one_extra_write_per_cycle_and_the_latest_wins(core, bus, cals):
    core.cycle()
    writes = len(bus.writes)
    for _ in range(5):
        for k in range(200):  # 200 commands between two cycles (a 20 kHz publisher at 100 Hz)
            core.command(["wrist_flex"], [0.001 * k])
        core.cycle()
    assert len(bus.writes) - writes <= 2 * 5  # the cycles' writes and one extra each
    assert raw_to_rad("wrist_flex", bus.writes[-1][cals["wrist_flex"].id], cals["wrist_flex"]) == \
        pytest.approx(0.199, abs=2e-3)
    assert core.commands_accepted == 1000 and core.commands_coalesced >= 1000 - 10
    assert core.diagnostics()[0].values["commands_coalesced"] == str(core.commands_coalesced)


def test_rejections_are_counted_per_reason_and_their_text_is_bounded(core):
    core.diagnostics()
    for names, positions in [(["elbow_flex"], [math.nan])] * 3 + [(["x" * 100_000], [0.0]), (["elbow_flex"], [])]:
        with pytest.raises(CommandRejected):
            core.command(names, positions)
    bus_entry = core.diagnostics()[0]
    assert bus_entry.values["rejected_non_finite"] == "3"
    assert bus_entry.values["rejected_unknown_joint"] == "1"
    assert bus_entry.values["rejected_length_mismatch"] == "1"
    assert bus_entry.level == Level.WARN and "5 command(s) rejected" in bus_entry.message
    assert len(core.last_rejection) < 400  # the 100 kB name is not echoed
    with pytest.raises(CommandRejected) as err:
        core.command(["x" * 100_000], [0.0])
    assert len(str(err.value)) < 400 and err.value.reason.value == "unknown_joint"
    core.diagnostics()
    assert core.diagnostics()[0].level == Level.OK  # nothing rejected since the previous report
