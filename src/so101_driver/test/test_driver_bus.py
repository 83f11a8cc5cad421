"""FeetechBus (real scservo_sdk underneath) against the virtual STS3215 bus over a real pty."""

from __future__ import annotations

import logging
import os
import time
from types import SimpleNamespace

import pytest

from so101_common.joints import OVERLOAD_PROTECTION_S, joint_by_id
from so101_driver import bus as bus_module
from so101_driver.bus import Feedback, FeetechBus, ScanResult
from so101_driver.errors import BusTimeout, CorruptPacket, PortError, ServoError
from so101_feetech.control_table import MODEL_NUMBER_STS3215, ErrorBit, Register
from so101_testing import wait_for
from so101_virtual.bus_server import BusServer, BusTiming
from so101_virtual.faults import FaultInjector
from so101_virtual.pty_link import PtyLink
from so101_virtual.servo_memory import ServoMemory

IDS = [1, 2, 3, 4, 5, 6]
TIMEOUT_MS = 50.0  # LeRobot's figure: generous, the test machine may be loaded


@pytest.fixture
def servos() -> dict[int, ServoMemory]:
    return {i: ServoMemory(i) for i in IDS}


@pytest.fixture
def faults() -> FaultInjector:
    return FaultInjector(seed=1)


@pytest.fixture
def link(servos, faults):
    with PtyLink(BusServer(servos, faults, BusTiming.fast())) as link:
        yield link


@pytest.fixture
def bus(link):
    with FeetechBus(link.device_path, timeout_ms=TIMEOUT_MS, retries=2) as bus:
        yield bus


def test_connect_close_and_context_manager(link):
    bus = FeetechBus(link.device_path, timeout_ms=TIMEOUT_MS)
    assert not bus.is_connected
    with pytest.raises(PortError, match="not open"):
        bus.ping(1)
    with bus:
        assert bus.is_connected
        assert bus.ping(1) == MODEL_NUMBER_STS3215
    assert not bus.is_connected
    bus.close()  # idempotent
    bus.connect()
    assert bus.ping(2) == MODEL_NUMBER_STS3215
    bus.close()


def test_missing_port_is_a_port_error(tmp_path):
    with pytest.raises(PortError, match="cannot open"):
        FeetechBus(str(tmp_path / "ttyNOPE")).connect()


def test_bad_arguments():
    with pytest.raises(ValueError):
        FeetechBus("/dev/null", retries=-1)
    with pytest.raises(ValueError):
        FeetechBus("/dev/null", timeout_ms=0)


def test_read_and_write_registers(bus, servos):
    assert bus.read(Register.Model_Number, 3) == MODEL_NUMBER_STS3215
    assert bus.read("Firmware_Major_Version", 3) == servos[3].get(Register.Firmware_Major_Version)
    bus.write(Register.Goal_Position, 2, 1234)
    assert servos[2].get(Register.Goal_Position) == 1234
    assert bus.read(Register.Goal_Position, 2) == 1234
    bus.write("Acceleration", 4, 254)
    assert bus.read("Acceleration", 4) == 254
    with pytest.raises(ValueError, match="read-only"):
        bus.write(Register.Present_Position, 1, 5)
    with pytest.raises(KeyError, match="unknown STS3215 register"):
        bus.read("Present_Positoin", 1)


def test_sign_magnitude_homing_offset_and_eeprom_lock(bus, servos):
    servos[5].set_encoder(1000)
    bus.write(Register.Lock, 5, 1)
    with bus.eeprom_unlocked([5]):
        assert servos[5].get(Register.Lock) == 0
        bus.write(Register.Homing_Offset, 5, -1047)
    assert servos[5].get(Register.Lock) == 1  # restored
    raw = int.from_bytes(servos[5].read(Register.Homing_Offset.address, 2), "little")
    assert raw == 1047 | (1 << 11)  # sign at bit 11 on the wire
    assert bus.read(Register.Homing_Offset, 5) == -1047
    # Present_Position = actual - Homing_Offset
    assert bus.read(Register.Present_Position, 5) == 2047
    assert servos[5].saved_eeprom[Register.Homing_Offset.address] == 1047 & 0xFF  # saved while unlocked


def test_sync_read_feedback_decodes_the_block(bus, servos):
    for i, memory in servos.items():
        memory.set_encoder(1000 + i)
        memory.set_feedback(velocity=-30 * i, load=-100 - i, voltage=118, temperature=30 + i,
                            current=-7 * i, moving=i % 2, status=0)
    feedback = bus.sync_read_feedback(IDS)
    assert list(feedback) == IDS
    fb = feedback[3]
    assert fb == Feedback(position=1003, velocity=-90, load=-103, voltage=118, temperature=33, status=0,
                          moving=True, current=-21, error=0)
    assert fb.voltage_v == pytest.approx(11.8) and fb.current_a == pytest.approx(-21 * 0.0065)


def test_sync_read_is_one_transaction(bus, link):
    before = link.server.requests
    bus.sync_read_feedback(IDS)
    assert link.server.requests == before + 1
    bus.sync_write_goal_positions(dict.fromkeys(IDS, 2000))
    assert wait_for(lambda: link.server.requests == before + 2, timeout=2)


def test_goals_written_with_the_sync_read(bus, servos, link, faults):
    before = link.server.requests
    feedback, failures = bus.sync_read_feedback_partial(IDS, goals={1: 1500, 4: 2500})
    assert sorted(feedback) == IDS and not failures
    # the SYNC_WRITE went out first, in the same transfer: applied by the time the replies came
    assert (servos[1].get(Register.Goal_Position), servos[4].get(Register.Goal_Position)) == (1500, 2500)
    assert link.server.requests == before + 2
    # a retry repeats the SYNC_READ only
    faults.unplug(2)
    before = link.server.requests
    _, failures = bus.sync_read_feedback_partial(IDS, goals={1: 1600})
    assert list(failures) == [2] and link.server.requests == before + 1 + 3
    assert servos[1].get(Register.Goal_Position) == 1600


def test_sync_write_goal_positions(bus, servos):
    bus.sync_write_goal_positions({1: 100, 2: 4095, 6: 2048})  # no reply: wait for the servos to take it
    assert wait_for(lambda: [servos[i].get(Register.Goal_Position) for i in (1, 2, 6)] == [100, 4095, 2048], timeout=2)
    bus.sync_write_goal_positions({})  # nothing to do


def test_set_torque_writes_enable_then_lock(bus, servos):
    bus.set_torque(IDS, True)
    assert all(servos[i].get(Register.Torque_Enable) == 1 and servos[i].get(Register.Lock) == 1 for i in IDS)
    bus.set_torque([2], False)
    assert servos[2].get(Register.Torque_Enable) == 0 and servos[2].get(Register.Lock) == 0
    assert servos[1].get(Register.Torque_Enable) == 1


def test_configure_lerobot(bus, servos):
    servos[1].set(Register.Phase, 12 | 0x10)
    bus.set_torque([3], True)
    bus.configure_lerobot(IDS, gripper_id=6)
    for i in IDS:
        m = servos[i]
        assert m.get(Register.Return_Delay_Time) == 0
        assert m.get(Register.Acceleration) == 254 and m.get(Register.Maximum_Acceleration) == 254
        assert (m.get(Register.P_Coefficient), m.get(Register.I_Coefficient), m.get(Register.D_Coefficient)) == (16, 0, 32)
        assert not m.get(Register.Phase) & 0x10
        # EEPROM values were written unlocked: they survive a power cycle
        assert m.saved_eeprom[Register.Return_Delay_Time.address] == 0
    assert servos[1].get(Register.Phase) == 12
    assert servos[6].get(Register.Max_Torque_Limit) == 500
    assert servos[6].get(Register.Protection_Current) == 250
    assert servos[6].get(Register.Overload_Torque) == 25
    assert servos[5].get(Register.Max_Torque_Limit) == 1000
    assert servos[3].get(Register.Torque_Enable) == 1  # torque restored where it was on
    assert servos[4].get(Register.Torque_Enable) == 0


def test_configured_protection_is_the_joint_specification(bus, servos):
    """The compensator's and the safety filter's load limits derive from the joint specification's protection
    facts: they are what a factory servo holds once configured as LeRobot configures it."""
    bus.configure_lerobot(IDS, gripper_id=6)
    for i in IDS:
        assert servos[i].get(Register.Overload_Torque) / 100 == joint_by_id(i).overload
        assert servos[i].get(Register.Protection_Time) * 0.01 == OVERLOAD_PROTECTION_S


def test_configure_lerobot_writes_only_what_differs_and_keeps_a_holding_arm_powered(bus, servos, monkeypatch):
    first = bus.configure_lerobot(IDS, gripper_id=6)
    assert "P_Coefficient" in first[1] and "Overload_Torque" in first[6]  # factory settings: written
    assert bus.configure_lerobot(IDS, gripper_id=6) == {}  # configured (as by LeRobot): nothing written
    for i in IDS:
        servos[i].power_cycle()  # the RAM settings are lost, the EEPROM ones kept
    bus.set_torque(IDS, True)  # the arm holds its pose
    torque_off: list[int] = []
    set_torque = bus.set_torque

    def spy(ids, enabled: bool) -> None:
        ids = list(ids)
        if not enabled:
            torque_off.extend(ids)
        set_torque(ids, enabled)

    monkeypatch.setattr(bus, "set_torque", spy)
    again = bus.configure_lerobot(IDS, gripper_id=6)
    assert again == {i: ["Maximum_Acceleration", "Acceleration"] for i in IDS}
    assert torque_off == []  # RAM settings only: the torque was never cut
    assert all(servos[i].get(Register.Torque_Enable) == 1 and servos[i].get(Register.Acceleration) == 254 for i in IDS)


def test_ping_model_number_and_error_bits(bus, faults):
    assert bus.ping(4) == MODEL_NUMBER_STS3215
    faults.force_error_bits(4, 1 << ErrorBit.OVERHEAT.value)
    assert bus.ping(4) == MODEL_NUMBER_STS3215  # ping reports presence, not health
    assert bus.last_error[4] == 1 << ErrorBit.OVERHEAT.value


# --- scan ------------------------------------------------------------------------------------------


def test_scan_broadcast(bus, servos):
    results = bus.scan(baudrates=[1_000_000])
    assert [r.servo_id for r in results] == IDS
    assert results[0] == ScanResult(1, MODEL_NUMBER_STS3215, "3.10", 1_000_000, 0)


def test_scan_per_id_and_over_baud_rates(link, servos):
    servos[6].set(Register.Baud_Rate, 4)  # this one talks at 115200
    with FeetechBus(link.device_path, timeout_ms=TIMEOUT_MS) as bus:
        per_id = bus.scan(ids=range(0, 8), baudrates=[1_000_000], broadcast=False)
        assert [r.servo_id for r in per_id] == [1, 2, 3, 4, 5]
        results = bus.scan(baudrates=[1_000_000, 500_000, 115_200])
        assert [(r.servo_id, r.baudrate) for r in results] == [(i, 1_000_000) for i in range(1, 6)] + [(6, 115_200)]
        assert bus.baudrate == 1_000_000  # left at the first rate with servos


def test_scan_over_every_sts_baud_rate(link, servos):
    servos[2].set(Register.Baud_Rate, 7)  # 38400 in Feetech's table
    with FeetechBus(link.device_path, timeout_ms=TIMEOUT_MS) as bus:
        results = bus.scan()  # all of BAUD_RATES, including one the SDK cannot set (76800): skipped
    assert {(r.servo_id, r.baudrate) for r in results} == {(1, 1_000_000), (3, 1_000_000), (4, 1_000_000),
                                                           (5, 1_000_000), (6, 1_000_000), (2, 38_400)}


def test_scan_falls_back_to_per_id_pings_when_broadcast_answers_collide(bus, faults):
    faults.corrupt_next(1)  # one garbled broadcast answer
    results = bus.scan(ids=IDS, baudrates=[1_000_000])
    assert [r.servo_id for r in results] == IDS


# --- error paths -----------------------------------------------------------------------------------


def test_unplugged_servo_raises_timeout_naming_servo_and_tries(bus, faults, caplog):
    faults.unplug(3)
    with caplog.at_level(logging.DEBUG, logger="so101_driver.bus"):
        with pytest.raises(BusTimeout, match=r"no reply from servo 3 after 3 tries") as info:
            bus.read(Register.Present_Position, 3)
    assert info.value.servo_id == 3 and info.value.tries == 3
    assert len([r for r in caplog.records if "servo 3 failed" in r.getMessage()]) == 3
    with pytest.raises(BusTimeout, match="servo 3"):
        bus.ping(3)
    with pytest.raises(BusTimeout, match="servo 3"):
        bus.write(Register.Goal_Position, 3, 100)
    with pytest.raises(BusTimeout, match="servo 3"):
        bus.sync_read_feedback(IDS)
    faults.plug(3)
    assert bus.read(Register.Model_Number, 3) == MODEL_NUMBER_STS3215


def test_sync_read_keeps_the_servos_that_answer(bus, faults, servos):
    for i, memory in servos.items():
        memory.set_encoder(500 + i)
    faults.unplug(2)
    faults.unplug(5)
    feedback, failures = bus.sync_read_feedback_partial(IDS)
    assert sorted(feedback) == [1, 3, 4, 6]
    assert feedback[6].position == 506
    assert sorted(failures) == [2, 5]
    assert isinstance(failures[2], BusTimeout) and failures[2].tries == 3
    assert "servo 5" in str(failures[5])


def test_a_reply_late_by_a_loaded_machine_behind_a_slow_adapter_is_waited_for(link, faults):
    """Behind an adapter whose latency is most of ``timeout_ms`` (20 ms of 25 here), a reply 13 ms later than usual is
    late, not lost: a sync read's first try waits twice the bus's usual latency (single tries, no retry to hide it)."""
    with FeetechBus(link.device_path, timeout_ms=25.0, retries=0) as slow:
        faults.set_extra_latency(0.020)
        for _ in range(5):
            feedback, failures = slow.sync_read_feedback_partial(IDS)
            assert not failures and len(feedback) == 6
        assert slow.usual_latency_s is not None and slow.usual_latency_s >= 0.020
        faults.set_extra_latency(0.033)
        feedback, failures = slow.sync_read_feedback_partial(IDS)
        assert not failures and len(feedback) == 6


def _off_the_cpu_after_one_packet(monkeypatch, packet_bytes: int) -> None:
    """The bus's next read takes one ``packet_bytes`` packet once every servo's has arrived, then its clock jumps 1 s
    (the process off the CPU past any deadline); later reads are the real ones on the shifted clock."""
    shift = [0.0]
    monkeypatch.setattr(bus_module, "time", SimpleNamespace(monotonic=lambda: time.monotonic() + shift[0]))
    read_available = bus_module.read_available

    def one_packet_then_off_the_cpu(port, wait_s: float) -> bytes:
        if shift[0]:
            return read_available(port, wait_s)
        assert wait_for(lambda: port.ser.in_waiting >= len(IDS) * packet_bytes, timeout=5)
        chunk = os.read(port.ser.fileno(), packet_bytes)
        shift[0] = 1.0
        return chunk

    monkeypatch.setattr(bus_module, "read_available", one_packet_then_off_the_cpu)


def test_replies_that_came_while_the_driver_was_off_the_cpu_are_read_not_timed_out(link, servos, monkeypatch):
    """The driver reads the first reply of a sync read, then is off the CPU past the read's deadline (its clock jumps
    1 s here) while the five other replies arrive: they lie in the port's buffer, came in time, and are read (a single
    try: no retry to hide a miss)."""
    for i, memory in servos.items():
        memory.set_encoder(500 + i)
    with FeetechBus(link.device_path, timeout_ms=TIMEOUT_MS, retries=0) as bus:
        _off_the_cpu_after_one_packet(monkeypatch, bus_module._STATUS_OVERHEAD + bus_module._FB_LEN)
        feedback, failures = bus.sync_read_feedback_partial(IDS)
    assert not failures and sorted(feedback) == IDS and feedback[6].position == 506


def test_a_broadcast_ping_answered_while_the_scanner_was_off_the_cpu_finds_every_servo(link, monkeypatch):
    """A scan's broadcast PING: the first answer is read, then the scanner is off the CPU past the line's quiet time
    and the deadline (its clock jumps 1 s) while the five other servos answer: they lie in the port's buffer and are
    found, not missed."""
    with FeetechBus(link.device_path, timeout_ms=TIMEOUT_MS, retries=0) as bus:
        _off_the_cpu_after_one_packet(monkeypatch, bus_module._STATUS_OVERHEAD)
        found, corrupt = bus.broadcast_ping()
    assert sorted(found) == IDS and corrupt == 0


def test_a_single_servo_write_behind_a_slow_adapter_waits_as_long_as_a_sync_read(link, faults, servos):
    """A torque toggle while the arm runs: once the sync reads measured the bus's latency (20 ms of 25), a write's
    reply 33 ms after its request is waited for, as a sync read's would be (single tries, no retry to hide it)."""
    with FeetechBus(link.device_path, timeout_ms=25.0, retries=0) as slow:
        faults.set_extra_latency(0.020)
        for _ in range(5):
            slow.sync_read_feedback_partial(IDS)
        faults.set_extra_latency(0.033)
        slow.set_torque(IDS, True)
        assert all(servos[i].get(Register.Torque_Enable) == 1 for i in IDS)


def test_patient_takes_lerobots_deadline_for_the_block_only(link, faults):
    with FeetechBus(link.device_path, timeout_ms=25.0, retries=0) as slow:
        faults.set_extra_latency(0.030)  # past the 25 ms deadline, well within LeRobot's 50
        with slow.patient():
            assert slow.read(Register.Torque_Enable, 1) == 0
        assert (slow.timeout_ms, slow.retries) == (25.0, 0)
        with pytest.raises(BusTimeout):
            slow.read(Register.Torque_Enable, 1)


def test_a_late_reply_is_not_taken_for_the_next_reads_answer(link, faults, servos):
    """A read that timed out behind a slow adapter: its reply still comes, during the next transaction. Taken for
    the next read's answer, a read of Lock (0) returned Torque_Enable's 1."""
    servos[1].set(Register.Torque_Enable, 1)
    servos[1].set(Register.Lock, 0)
    with FeetechBus(link.device_path, timeout_ms=25.0, retries=0) as slow:
        faults.set_extra_latency(0.030)  # past the 25 ms deadline, well within LeRobot's 50
        with pytest.raises(BusTimeout):
            slow.read(Register.Torque_Enable, 1)
        with slow.patient():
            assert slow.read(Register.Lock, 1) == 0


def test_a_late_feedback_reply_is_not_taken_for_a_reads_answer(link, faults, servos):
    """The same after a sync read: its late reply read as Lock gave the low byte of Present_Position."""
    servos[1].set(Register.Lock, 1)
    with FeetechBus(link.device_path, timeout_ms=25.0, retries=0) as slow:
        faults.set_extra_latency(0.030)  # past the 25 ms deadline, well within LeRobot's 50
        feedback, failures = slow.sync_read_feedback_partial([1])
        assert not feedback and set(failures) == {1}
        with slow.patient():
            assert slow.read(Register.Lock, 1) == 1


def test_a_late_feedback_reply_is_not_taken_for_the_next_sync_reads(link, faults, servos):
    """A sync read that timed out behind a slow adapter: its reply still comes, during the next cycle's sync read.
    Taken for that read's answer, the servo's position was the cycle before's, stamped as this cycle's."""
    servos[1].set(Register.Present_Position, 1000)
    with FeetechBus(link.device_path, timeout_ms=25.0, retries=0) as slow:
        faults.set_extra_latency(0.030)  # past the 25 ms deadline
        feedback, failures = slow.sync_read_feedback_partial([1])
        assert not feedback and set(failures) == {1}
        servos[1].set(Register.Present_Position, 2000)  # the arm moved; the bus is quick again
        faults.set_extra_latency(0.0)
        feedback, failures = slow.sync_read_feedback_partial([1])
        assert not failures and feedback[1].position == 2000


def test_a_silent_servo_is_waited_for_once_when_it_falls_silent(bus, faults, monkeypatch):
    """An unplugged servo's reply is not coming: the sync read after its first miss waits out a late reply, the ones
    after do not (each would hold every cycle's goals back by a reply allowance)."""
    waits = []
    drain = bus_module.drain_until_quiet

    def counted(*args):
        waits.append(args)
        drain(*args)

    monkeypatch.setattr(bus_module, "drain_until_quiet", counted)
    bus.sync_read_feedback_partial(IDS)
    faults.unplug(2)
    for _ in range(5):
        feedback, failures = bus.sync_read_feedback_partial(IDS)
        assert set(failures) == {2} and len(feedback) == 5
    assert len(waits) == 1
    faults.plug(2)
    feedback, failures = bus.sync_read_feedback_partial(IDS)
    assert not failures and len(feedback) == 6


def test_dropped_reply_is_retried(bus, faults):
    faults.drop_next(1)
    assert bus.read(Register.Model_Number, 1) == MODEL_NUMBER_STS3215
    faults.drop_next(2)
    assert len(bus.sync_read_feedback(IDS)) == 6


def test_corrupt_replies_raise_corrupt_packet(bus, faults):
    faults.corrupt_next(3)
    with pytest.raises(CorruptPacket, match=r"corrupt reply from servo 2 after 3 tries") as info:
        bus.read(Register.Present_Position, 2)
    assert info.value.servo_id == 2 and info.value.tries == 3
    faults.corrupt_fraction(1.0)
    feedback, failures = bus.sync_read_feedback_partial(IDS)
    assert not feedback and all(isinstance(e, CorruptPacket) for e in failures.values())
    faults.clear()
    faults.corrupt_next(1)
    assert bus.read(Register.Present_Position, 2) >= 0  # one bad reply, then a good one


def test_error_bits_raise_servo_error_unless_tolerated(bus, faults):
    faults.force_error_bits(1, 1 << ErrorBit.OVERLOAD.value)
    with pytest.raises(ServoError, match=r"servo 1 reports OVERLOAD .* after 3 tries") as info:
        bus.read(Register.Present_Position, 1)
    assert info.value.flags == [ErrorBit.OVERLOAD] and info.value.servo_id == 1
    assert bus.read(Register.Present_Position, 1, strict=False) >= 0
    bus.set_torque([1], False)  # torque off works on an overloaded servo
    feedback = bus.sync_read_feedback(IDS)  # feedback keeps flowing, with the bits decoded
    assert feedback[1].error == 1 << ErrorBit.OVERLOAD.value
    assert ErrorBit.OVERLOAD in feedback[1].flags and feedback[1].status & (1 << 5)
    assert feedback[2].flags == []


def test_vanished_adapter_is_a_port_error_and_the_driver_reopens_it(servos, tmp_path):
    """USB adapter unplugged and plugged back (a new pty behind the same link path)."""
    from so101_driver.driver_core import DriverConfig, DriverCore
    from so101_feetech.calibration import MotorCalibration

    link_path = str(tmp_path / "so101")
    link = PtyLink(BusServer(servos, timing=BusTiming.fast()), link_path)
    bus = FeetechBus(link_path, timeout_ms=TIMEOUT_MS)
    cals = {name: MotorCalibration(i, 0, 0, 1024, 3072) for i, name in zip(IDS, ("shoulder_pan", "shoulder_lift",
            "elbow_flex", "wrist_flex", "wrist_roll", "gripper"), strict=True)}
    core = DriverCore(bus, cals, config=DriverConfig(reconnect_interval_s=0.05))
    core.start()
    assert core.cycle().sample.valid.all()
    link.close()
    with pytest.raises(PortError, match="sync read on"):
        bus.sync_read_feedback(IDS)
    with pytest.raises(PortError, match="read Model_Number on"):
        bus.read(Register.Model_Number, 1)
    result = core.cycle()
    assert not result.bus_ok and result.sample is None
    assert "Input/output error" in core.diagnostics()[0].message
    with PtyLink(BusServer(servos, timing=BusTiming.fast()), link_path):
        assert wait_for(lambda: (r := core.cycle()).bus_ok and r.sample is not None and r.sample.valid.all(), timeout=5)
    core.stop()
