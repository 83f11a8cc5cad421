"""The real scservo_sdk client (PortHandler, PacketHandler(0), GroupSyncRead/Write) against the
virtual bus over a real pseudo-terminal."""

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import scservo_sdk as scs

from so101_feetech.control_table import FEEDBACK_BLOCK, Register, decode_register, encode_sign_magnitude
from so101_feetech.protocol import BROADCAST_ID, Instruction, PacketParser, StatusPacket, encode_instruction
from so101_testing import wait_for
from so101_virtual.bus_server import BusServer, BusTiming
from so101_virtual.pty_link import PtyLink, line_speed
from so101_virtual.servo_memory import ServoMemory, make_servos

IDS = (1, 2, 3, 4, 5, 6)


class PatientPort(scs.PortHandler):
    """scservo_sdk's PortHandler with a 200 ms packet-timeout floor (LeRobot patches this timeout
    too): the semantics under test stay the same, and a heavily loaded CI machine that does not
    schedule the bus thread within the SDK's default ~34 ms cannot turn a reply into a timeout."""

    def setPacketTimeout(self, packet_length: int) -> None:
        super().setPacketTimeout(packet_length)
        self.packet_timeout: float = max(self.packet_timeout, 200.0)


@dataclass
class Rig:
    servos: dict[int, ServoMemory]
    server: BusServer
    link: PtyLink
    port: scs.PortHandler
    ph: scs.protocol_packet_handler

    def read(self, servo_id: int, register: Register) -> int:
        data, comm, error = self.ph.readTxRx(self.port, servo_id, register.address, register.size)
        assert (comm, error) == (scs.COMM_SUCCESS, 0)
        return decode_register(register, bytes(data))

    def write(self, servo_id: int, register: Register, raw: int) -> tuple[int, int]:
        if register.size == 1:
            return self.ph.write1ByteTxRx(self.port, servo_id, register.address, raw)
        return self.ph.write2ByteTxRx(self.port, servo_id, register.address, raw)


def first_reply(port: scs.PortHandler, timeout: float = 2.0) -> StatusPacket | None:
    parser = PacketParser("status")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = parser.feed(port.readPort(64))
        if found:
            return found[0]  # type: ignore[return-value]
        time.sleep(0.001)
    return None


@pytest.fixture
def rig(tmp_path) -> Iterator[Rig]:
    servos = make_servos(IDS)
    server = BusServer(servos, timing=BusTiming.fast())
    with PtyLink(server, str(tmp_path / "so101_follower")) as link:
        port = PatientPort(link.path)
        assert port.openPort()
        try:
            yield Rig(servos, server, link, port, scs.PacketHandler(0))
        finally:
            port.closePort()


def test_link_is_a_raw_pty_with_symlink(rig: Rig) -> None:
    assert os.path.realpath(rig.link.path) == rig.link.device_path
    assert line_speed(rig.link._slave) == 1_000_000
    rig.port.writePort(encode_instruction(9, Instruction.PING))  # nobody answers, nothing echoes
    rig.port.writePort(encode_instruction(2, Instruction.PING))
    assert first_reply(rig.port) == StatusPacket(2, 0, b"")


def test_ping_reads_model_number(rig: Rig) -> None:
    assert rig.ph.ping(rig.port, 3) == (777, scs.COMM_SUCCESS, 0)
    model, comm, _ = rig.ph.ping(rig.port, 42)
    assert comm == scs.COMM_RX_TIMEOUT


def test_broadcast_ping_scan(rig: Rig) -> None:
    """As LeRobot's broadcast_ping: one broadcast PING, every servo answers in id order."""
    assert rig.ph.txPacket(rig.port, [0, 0, BROADCAST_ID, 2, scs.INST_PING, 0]) == scs.COMM_SUCCESS
    rig.port.is_using = False
    parser, found = PacketParser("status"), list[Any]()
    deadline = time.monotonic() + 2
    while len(found) < len(IDS) and time.monotonic() < deadline:
        found += parser.feed(rig.port.readPort(64))
    assert [p.servo_id for p in found] == list(IDS)


def test_scan_over_baud_rates_finds_servo_at_its_rate(rig: Rig) -> None:
    assert rig.write(4, Register.Baud_Rate, 4) == (scs.COMM_SUCCESS, 0)  # 115200 from now on
    assert rig.ph.ping(rig.port, 4)[1] == scs.COMM_RX_TIMEOUT
    assert rig.port.setBaudRate(115_200)
    assert rig.ph.ping(rig.port, 4) == (777, scs.COMM_SUCCESS, 0)
    assert rig.ph.ping(rig.port, 1)[1] == scs.COMM_RX_TIMEOUT


def test_read_write_one_and_two_byte_registers(rig: Rig) -> None:
    assert rig.read(2, Register.Firmware_Major_Version) == 3
    assert rig.read(2, Register.Firmware_Minor_Version) == 10
    assert rig.write(2, Register.Acceleration, 254) == (scs.COMM_SUCCESS, 0)
    assert rig.write(2, Register.Goal_Position, 3210) == (scs.COMM_SUCCESS, 0)
    assert rig.read(2, Register.Acceleration) == 254
    assert rig.read(2, Register.Goal_Position) == 3210
    assert rig.ph.read2ByteTxRx(rig.port, 2, Register.Goal_Position.address) == (3210, scs.COMM_SUCCESS, 0)


def test_eeprom_lock_semantics(rig: Rig) -> None:
    # LeRobot's order: torque off + Lock 0, EEPROM writes, torque on + Lock 1.
    rig.write(1, Register.Lock, 0)
    rig.write(1, Register.P_Coefficient, 16)
    rig.write(1, Register.Lock, 1)
    rig.write(1, Register.D_Coefficient, 20)  # locked: effective now, not saved
    assert (rig.read(1, Register.P_Coefficient), rig.read(1, Register.D_Coefficient)) == (16, 20)
    rig.servos[1].power_cycle()
    assert (rig.read(1, Register.P_Coefficient), rig.read(1, Register.D_Coefficient)) == (16, 32)


def test_read_only_register_write_is_ignored(rig: Rig) -> None:
    assert rig.write(1, Register.Model_Number, 1) == (scs.COMM_SUCCESS, 0)
    assert rig.read(1, Register.Model_Number) == 777


def test_reg_write_then_broadcast_action(rig: Rig) -> None:
    for servo_id in (1, 2):
        data = list((1000 + servo_id).to_bytes(2, "little"))
        assert rig.ph.regWriteTxRx(rig.port, servo_id, Register.Goal_Position.address, 2, data) == (scs.COMM_SUCCESS, 0)
    assert rig.read(1, Register.Goal_Position) == 0
    assert rig.ph.action(rig.port, BROADCAST_ID) == scs.COMM_SUCCESS
    assert (rig.read(1, Register.Goal_Position), rig.read(2, Register.Goal_Position)) == (1001, 1002)


def test_sync_read_feedback_block_of_six(rig: Rig) -> None:
    for servo_id, memory in rig.servos.items():
        memory.set_encoder(100 * servo_id)
        memory.set_feedback(
            velocity=-10 * servo_id, load=-5, voltage=121, temperature=30 + servo_id, current=7, moving=1
        )
    address, length = FEEDBACK_BLOCK
    group = scs.GroupSyncRead(rig.port, rig.ph, address, length)
    for servo_id in IDS:
        assert group.addParam(servo_id)
    assert group.txRxPacket() == scs.COMM_SUCCESS
    for servo_id in IDS:
        assert group.isAvailable(servo_id, address, length)
        assert group.getData(servo_id, Register.Present_Position.address, 2) == 100 * servo_id
        velocity = group.getData(servo_id, Register.Present_Velocity.address, 2)
        assert scs.SCS_TOHOST(velocity, 15) == -10 * servo_id
        assert scs.SCS_TOHOST(group.getData(servo_id, Register.Present_Load.address, 2), 10) == -5
        assert group.getData(servo_id, Register.Present_Voltage.address, 1) == 121
        assert group.getData(servo_id, Register.Present_Temperature.address, 1) == 30 + servo_id
        assert group.getData(servo_id, Register.Moving.address, 1) == 1
        assert group.getData(servo_id, Register.Present_Current.address, 2) == 7


def test_sync_write_goal_positions(rig: Rig) -> None:
    group = scs.GroupSyncWrite(rig.port, rig.ph, Register.Goal_Position.address, 2)
    for servo_id in IDS:
        assert group.addParam(servo_id, [scs.SCS_LOBYTE(2000 + servo_id), scs.SCS_HIBYTE(2000 + servo_id)])
    assert group.txPacket() == scs.COMM_SUCCESS
    # silent: the first reply after it is the one to the next instruction (the pty keeps order)
    rig.port.writePort(encode_instruction(1, Instruction.READ, [Register.Goal_Position.address, 2]))
    assert first_reply(rig.port) == StatusPacket(1, 0, (2001).to_bytes(2, "little"))
    assert [rig.read(i, Register.Goal_Position) for i in IDS] == [2000 + i for i in IDS]


def test_status_return_level_zero(rig: Rig) -> None:
    # the new level already governs the reply to the write that sets it
    assert rig.write(5, Register.Response_Status_Level, 0) == (scs.COMM_RX_TIMEOUT, 0)
    assert rig.write(5, Register.Goal_Position, 77) == (scs.COMM_RX_TIMEOUT, 0)  # applied, no answer
    assert rig.read(5, Register.Goal_Position) == 77
    assert rig.ph.ping(rig.port, 5)[1] == scs.COMM_SUCCESS


def test_sign_magnitude_registers(rig: Rig) -> None:
    rig.servos[3].set_encoder(2500)
    rig.write(3, Register.Lock, 0)
    assert rig.write(3, Register.Homing_Offset, encode_sign_magnitude(-300, 11)) == (scs.COMM_SUCCESS, 0)
    assert rig.read(3, Register.Homing_Offset) == -300
    assert rig.read(3, Register.Present_Position) == 2800
    assert rig.write(3, Register.Goal_Velocity, scs.SCS_TOSCS(-500, 15)) == (scs.COMM_SUCCESS, 0)
    assert rig.read(3, Register.Goal_Velocity) == -500


def test_return_delay_time(tmp_path) -> None:
    servos = make_servos((1, 2))
    servos[1].set(Register.Return_Delay_Time, 0)  # servo 2 keeps the factory 250 (500 us)
    server = BusServer(servos, timing=BusTiming(byte_time=False, return_delay=True))
    with PtyLink(server) as link:
        port = PatientPort(link.device_path)
        assert port.openPort()
        ph = scs.PacketHandler(0)

        def ping_time(servo_id: int) -> float:
            start = time.perf_counter()
            _, comm, _ = ph.readTxRx(port, servo_id, 0, 1)
            assert comm == scs.COMM_SUCCESS
            return time.perf_counter() - start

        try:
            # interleaved, so that both servos meet the same machine; the fastest round trip of each, because a
            # return delay is a floor under every reply while a busy machine only ever adds to some
            times: dict[int, list[float]] = {1: [], 2: []}
            for _ in range(25):
                for servo_id in times:
                    times[servo_id].append(ping_time(servo_id))
            assert min(times[2]) - min(times[1]) > 400e-6
        finally:
            port.closePort()


def test_truncated_packet_is_dropped_after_the_inter_byte_timeout(rig: Rig) -> None:
    """A frame announcing more bytes than ever come must not stall the bus: once the inter-byte
    timeout gives up on it, the PING queued behind it is found and answered."""
    rig.port.writePort(b"\xff\xff\x01\x09\x03" + encode_instruction(1, Instruction.PING))
    assert first_reply(rig.port) == StatusPacket(1, 0, b"")
    assert rig.link.parser.discarded_bytes >= 5


def test_client_reconnects(rig: Rig) -> None:
    rig.port.closePort()
    port = PatientPort(rig.link.path)
    assert port.openPort()
    try:
        assert rig.ph.ping(port, 6)[1] == scs.COMM_SUCCESS
    finally:
        port.closePort()
    rig.port.openPort()


def test_replies_nobody_reads_are_lost_not_blocking(tmp_path) -> None:
    """With no reader the pty fills up; the bus drops what does not fit and keeps serving."""
    server = BusServer(make_servos((1,)), timing=BusTiming.fast())
    with PtyLink(server) as link:
        port = PatientPort(link.device_path)
        assert port.openPort()
        try:
            read_all = encode_instruction(1, Instruction.READ, [0, 240])
            for _ in range(200):  # ~50 kB of replies, never read
                port.writePort(read_all)
            assert wait_for(lambda: server.requests == 200, timeout=20)
            assert link.lost_bytes > 0
            port.ser.reset_input_buffer()
            assert scs.PacketHandler(0).ping(port, 1) == (777, scs.COMM_SUCCESS, 0)
        finally:
            port.closePort()
