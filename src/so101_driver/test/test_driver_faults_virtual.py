"""The driver under faults with the real scservo_sdk against the virtual bus and its fault injector:
every dropped or corrupted reply is counted, an unplugged servo leaves the cycle and the healthy joints
keep being read, a port that is pulled away and brought back is waited for and reopened."""

from __future__ import annotations

import pytest

from so101_common.diagnostics import Level
from so101_common.joints import JOINT_NAMES, JOINTS
from so101_driver.bus import FeetechBus
from so101_driver.driver_core import DiagnosticEntry, DriverConfig, DriverCore
from so101_feetech.calibration import MotorCalibration
from so101_feetech.control_table import Register
from so101_testing import wait_for
from so101_virtual.bus_server import BusServer, BusTiming
from so101_virtual.faults import FaultInjector
from so101_virtual.pty_link import PtyLink
from so101_virtual.servo_memory import ServoMemory

IDS = [j.servo_id for j in JOINTS]
ELBOW = JOINT_NAMES.index("elbow_flex")


@pytest.fixture
def faults() -> FaultInjector:
    return FaultInjector(seed=3)


@pytest.fixture
def server(faults) -> BusServer:
    servos = {i: ServoMemory(i, overrides={Register.Return_Delay_Time: 0}) for i in IDS}
    return BusServer(servos, faults, BusTiming.realistic())


def _calibration() -> dict[str, MotorCalibration]:
    return {j.name: MotorCalibration(j.servo_id, 0, 0, 1024, 3072) for j in JOINTS}


def _entries(core: DriverCore) -> dict[str, DiagnosticEntry]:
    return {d.name.split(": ")[1]: d for d in core.diagnostics()}


def test_every_dropped_and_corrupted_reply_is_counted(server, faults):
    with PtyLink(server) as link, FeetechBus(link.device_path, timeout_ms=50.0, retries=1, reply_gap_ms=20.0) as bus:
        faults.drop_fraction(0.05)
        faults.corrupt_fraction(0.03)
        for _ in range(150):
            bus.sync_read_feedback_partial(IDS)
        assert faults.dropped > 0 and faults.corrupted > 0
        counters = bus.counters
        assert counters.corrupt == faults.corrupted
        assert counters.timeouts == faults.dropped + faults.corrupted  # a garbled reply is a missing one too
        assert counters.retries > 0 and counters.transactions == 150 + counters.retries


def test_intermittent_faults_turn_the_status_to_warn(server, faults):
    with PtyLink(server) as link:
        core = DriverCore(FeetechBus(link.device_path, timeout_ms=20.0, retries=1), _calibration(),
                          config=DriverConfig(rate_hz=0.0, fault_warn_per_s=1.0, fault_error_per_s=1e6))
        core.start()
        core.diagnostics()
        faults.drop_fraction(0.05)
        for _ in range(100):
            core.cycle()
        bus_entry = _entries(core)["bus"]
        core.stop()
    assert bus_entry.level == Level.WARN and bus_entry.message.startswith("bus faults ")
    assert float(bus_entry.values["timeouts_per_s"]) > 0 and float(bus_entry.values["retries_per_s"]) > 0


def test_the_driver_starts_and_toggles_torque_behind_an_adapter_slower_than_its_deadline(server, faults):
    """Replies 30 ms after each request against the cycle's 20 ms deadline (a USB-serial latency timer of 16 ms on a
    loaded machine): the start (configuring the servos, torque on) takes the bus's patient deadline; the cycle's reads
    and a torque toggle while running allow for the latency the start measured."""
    faults.set_extra_latency(0.030)
    with PtyLink(server) as link:
        bus = FeetechBus(link.device_path, timeout_ms=20.0, retries=1)
        core = DriverCore(bus, _calibration(), config=DriverConfig(configure_servos=True))
        core.start(torque_on=True)
        assert core.torque_enabled and (bus.timeout_ms, bus.retries) == (20.0, 1)
        assert all(core.cycle().sample.valid.all() for _ in range(5))
        core.set_torque(False)
        core.set_torque(True)
        assert core.torque_enabled and all(server.servos[i].get(Register.Torque_Enable) == 1 for i in IDS)
        core.stop()


def test_unplugged_servo_leaves_the_cycle_and_rejoins(server, faults):
    clock = [0.0]  # the core's clock, advanced 10 ms per cycle: the probes' schedule is exact

    def cycle():
        clock[0] += 0.01
        return core.cycle()

    with PtyLink(server) as link:
        bus = FeetechBus(link.device_path, timeout_ms=20.0, retries=1)
        core = DriverCore(bus, _calibration(), clock=lambda: clock[0],
                          config=DriverConfig(missing_after_failures=3, probe_interval_s=0.25))
        core.start()
        faults.unplug(3)
        results = [cycle() for _ in range(40)]  # probe at 0.28 s fails: the next is due at 0.78 s
        assert all(r.sample.valid.sum() == 5 and not r.sample.valid[ELBOW] for r in results)
        requests = server.requests
        for _ in range(10):
            cycle()
        # out of the cycle: one SYNC_WRITE + SYNC_READ per cycle (one transfer, two requests), no retries
        assert server.requests - requests == 20
        entries = _entries(core)
        assert entries["elbow_flex"].level == Level.ERROR and entries["bus"].values["probed_joints"] == "elbow_flex"
        faults.plug(3)
        assert wait_for(lambda: bool(cycle().sample.valid.all()), timeout=10, interval=0)
        assert _entries(core)["elbow_flex"].level == Level.OK
        core.stop()


def test_port_pulled_away_and_brought_back(tmp_path, server):
    path = str(tmp_path / "ttySO101")
    core = DriverCore(FeetechBus(path, timeout_ms=20.0, retries=1), _calibration(),
                      config=DriverConfig(reconnect_initial_s=0.05, reconnect_interval_s=0.2))
    core.start()  # the port is not there yet: the core waits for it
    bus_entry = _entries(core)["bus"]
    assert bus_entry.level == Level.ERROR and "waiting for the port" in bus_entry.message
    assert core.cycle().sample is None
    with PtyLink(server, link_path=path):
        assert wait_for(lambda: core.cycle().sample is not None, timeout=10)
        assert core.cycle().sample.valid.all()
    # the link is gone (adapter unplugged)
    assert wait_for(lambda: core.cycle().sample is None and not core.cycle().bus_ok, timeout=10)
    assert _entries(core)["bus"].level == Level.ERROR
    with PtyLink(server, link_path=path):  # plugged back in
        assert wait_for(lambda: core.cycle().sample is not None, timeout=10)
        assert core.cycle().sample.valid.all()
        core.stop()
