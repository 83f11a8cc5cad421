"""DriverCore under faults, against the fake bus of conftest.py: a missing servo leaves the cycle
and is probed with backoff, the port is waited for, supply and current warnings."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from so101_common.diagnostics import Level
from so101_common.joints import JOINT_NAMES
from so101_driver.driver_core import DiagnosticEntry, DriverConfig, DriverCore


class ManualClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock():
    return ManualClock()


def _entries(core: DriverCore) -> dict[str, DiagnosticEntry]:
    return {d.name.split(": ")[1]: d for d in core.diagnostics()}


def test_missing_servo_leaves_the_cycle_and_is_probed_with_backoff(bus, cals, clock):
    core = DriverCore(bus, cals, clock=clock, config=DriverConfig(missing_after_failures=3, probe_interval_s=0.25,
                                                                   probe_interval_max_s=2.0))
    core.start()
    bus.unplugged.add(3)
    k = JOINT_NAMES.index("elbow_flex")
    probes = []
    for _ in range(600):  # 6 s at 100 Hz
        clock.t += 0.01
        bus.reads.clear()
        result = core.cycle()
        assert result.sample.valid.sum() == 5 and not result.sample.valid[k]
        if [3] in bus.reads:
            probes.append(clock.t)
    # after three failed cycles the fast read is the five healthy servos only; servo 3 is asked alone
    assert bus.reads[0] == [1, 2, 4, 5, 6]
    assert np.allclose(np.diff(probes)[:4], [0.5, 1.0, 2.0, 2.0], atol=0.011)
    assert probes[0] == pytest.approx(0.03 + 0.25, abs=0.011)
    entries = _entries(core)
    assert entries["elbow_flex"].level == Level.ERROR and entries["elbow_flex"].values["probe_interval_s"] == "2"
    assert entries["bus"].values["probed_joints"] == "elbow_flex"
    bus.unplugged.clear()  # plugged back: the next probe finds it and it rejoins the cycle
    for _ in range(300):
        clock.t += 0.01
        bus.reads.clear()
        if core.cycle().sample.valid.all():
            break
    clock.t += 0.01
    bus.reads.clear()
    assert core.cycle().sample.valid.all() and bus.reads == [[1, 2, 3, 4, 5, 6]]
    assert _entries(core)["elbow_flex"].level == Level.OK


def test_a_lost_transaction_is_one_log_line_and_one_servo_is_named_alone(bus, cals, clock, caplog):
    core = DriverCore(bus, cals, clock=clock)
    core.start()

    def cycle_logged(unplugged: set[int]) -> list[tuple[str, str]]:
        bus.unplugged = unplugged
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="so101_driver"):
            clock.t += 0.01
            core.cycle()
        return [(r.levelname, r.getMessage()) for r in caplog.records]

    everyone = ", ".join(f"{name} (servo {servo_id})" for servo_id, name in enumerate(JOINT_NAMES, start=1))
    # the whole sync read lost (as on a USB hiccup): one line naming every servo and the transaction
    assert cycle_logged({1, 2, 3, 4, 5, 6}) == [
        ("WARNING", f"{everyone} faulted: no reply from servos 1, 2, 3, 4, 5, 6 after 3 tries: sync read of the "
                    "feedback block")]
    assert cycle_logged(set()) == [("INFO", f"{everyone} answer again after 1 failed cycle")]
    assert cycle_logged({3}) == [
        ("WARNING", "elbow_flex (servo 3) faulted: no reply from servo 3 after 3 tries: sync read of the feedback block")]
    assert cycle_logged({3, 5}) == [  # one more servo lost the next cycle: only the new one is said
        ("WARNING", "wrist_roll (servo 5) faulted: no reply from servo 5 after 3 tries: sync read of the feedback block")]
    assert cycle_logged(set()) == [
        ("INFO", "elbow_flex (servo 3, after 2 failed cycles), wrist_roll (servo 5, after 1 failed cycle) answer again")]


def test_missed_cycles_and_achieved_rate_are_judged_against_the_configured_rate(bus, cals, clock):
    core = DriverCore(bus, cals, clock=clock, config=DriverConfig(rate_hz=100.0))
    core.start()
    core.diagnostics()
    for _ in range(20):  # one second in which one of every five cycles of the configured 100 Hz is missed
        for dt in (0.01, 0.01, 0.01, 0.02):
            clock.t += dt
            core.cycle()
    bus_entry = _entries(core)["bus"]
    assert bus_entry.level == Level.WARN
    assert bus_entry.message == "cycle rate 80.0 Hz of 100 Hz configured (20.0 missed cycles/s)"
    assert bus_entry.values["achieved_rate_hz"] == "80.0" and bus_entry.values["configured_rate_hz"] == "100"
    for _ in range(25):
        clock.t += 0.04
        core.cycle()
    assert _entries(core)["bus"].level == Level.ERROR
    for _ in range(100):
        clock.t += 0.01
        core.cycle()
    assert _entries(core)["bus"].level == Level.OK


def test_supply_sag_absolute_voltage_and_current_warn(bus, cals, clock):
    core = DriverCore(bus, cals, clock=clock, config=DriverConfig(voltage_warn_max_v=13.0, current_warn_a=1.0))
    core.start()
    assert _entries(core)["shoulder_pan"].level == Level.OK
    bus.voltage[1] = 80  # 8 V on an arm that ran at 12.1 V
    bus.voltage[2] = 140
    bus.current[3] = 200  # 1.3 A
    clock.t += 0.01
    core.cycle()
    entries = _entries(core)
    assert entries["shoulder_pan"].level == Level.WARN
    assert entries["shoulder_pan"].message == "supply sagging: 8.0 V, 66% of the 12.1 V seen before"
    assert entries["shoulder_lift"].message == "supply high: 14.0 V > 13 V"
    assert entries["elbow_flex"].message == "current 1.30 A >= 1 A"
    absolute = DriverCore(bus, cals, clock=clock, config=DriverConfig(voltage_warn_min_v=10.5))
    absolute.start()  # the arm starts already sagging: only an absolute threshold can tell
    assert _entries(absolute)["shoulder_pan"].message == "supply low: 8.0 V < 10.5 V"


def test_missing_port_is_waited_for_with_backoff_then_started(bus, cals, clock):
    bus.clock = clock
    bus.port_broken = True
    core = DriverCore(bus, cals, clock=clock, config=DriverConfig(reconnect_initial_s=0.1, reconnect_interval_s=1.0))
    core.start(torque_on=True)  # no port yet: not an error, the core waits for it
    bus_entry = _entries(core)["bus"]
    assert bus_entry.level == Level.ERROR and "waiting for the port" in bus_entry.message
    assert "cannot open /dev/fake" in bus_entry.message
    for _ in range(400):  # 4 s
        clock.t += 0.01
        assert core.cycle().sample is None
    assert np.allclose(np.diff(bus.connect_attempts)[:6], [0.1, 0.2, 0.4, 0.8, 1.0, 1.0], atol=0.011)
    assert not core.torque_enabled
    bus.port_broken = False
    for _ in range(150):
        clock.t += 0.01
        if core.cycle().sample is not None:
            break
    assert core.torque_enabled and all(bus.torque.values())  # the start's torque-on ran once the port opened
    assert "cycle rate" in _entries(core)["bus"].message  # the seconds without a port count against the rate
    for _ in range(100):
        clock.t += 0.01
        core.cycle()
    assert _entries(core)["bus"].level == Level.OK


def test_servo_faults_are_named_for_the_contract_and_a_single_miss_is_not_one(bus, cals, clock):
    """The fault kinds a servo's status carries (so101_common.servo_faults), read back as consumers read them."""
    from so101_common.servo_faults import ServoFaultKind, read_servo_fault

    core = DriverCore(bus, cals, clock=clock, config=DriverConfig(missing_after_failures=3, lost_after_s=0.5))
    core.start()
    assert core.servo_faults() == frozenset()
    bus.status[2] = 1 << 5  # shoulder_lift: the overload bit of the error byte
    clock.t += 0.01
    core.cycle()
    assert core.servo_faults() == {("shoulder_lift", "overload")}
    fault = read_servo_fault(_entries(core)["shoulder_lift"].values, _entries(core)["shoulder_lift"].message)
    assert fault is not None and fault.joint == "shoulder_lift" and fault.kinds == (ServoFaultKind.OVERLOAD,)
    healthy = read_servo_fault(_entries(core)["elbow_flex"].values)
    assert healthy is not None and healthy.kinds == ()
    bus.status.clear()
    bus.unplugged.add(3)
    silent = []
    for _ in range(60):  # 0.6 s at 100 Hz: out of the cycle after 3 cycles, lost after 0.5 s of silence
        clock.t += 0.01
        core.cycle()
        silent.append(("elbow_flex", "lost") in core.servo_faults())
    assert not any(silent[:49]) and all(silent[50:]), "a silence shorter than lost_after_s is not a lost servo"
    assert read_servo_fault(_entries(core)["elbow_flex"].values).kinds == (ServoFaultKind.LOST,)
    bus.unplugged.clear()
    for _ in range(300):  # it answers again at a probe: the fault is over
        clock.t += 0.01
        core.cycle()
        if not core.servo_faults():
            break
    assert core.servo_faults() == frozenset()
