"""BusServer in process: instruction semantics, reply rules, error byte and timing schedule."""

import pytest

from so101_feetech.control_table import FEEDBACK_BLOCK, Register, encode_register
from so101_feetech.protocol import (
    BROADCAST_ID,
    ERROR_INSTRUCTION,
    Instruction,
    InstructionPacket,
    PacketParser,
    StatusPacket,
    encode_instruction,
)
from so101_virtual.bus_server import BusServer, BusTiming
from so101_virtual.faults import FaultInjector
from so101_virtual.servo_memory import ServoMemory, make_servos


@pytest.fixture
def bus() -> BusServer:
    return BusServer(make_servos(), timing=BusTiming.fast())


def ask(
    server: BusServer, servo_id: int, instruction: Instruction, params: bytes | list[int] = b""
) -> list[StatusPacket]:
    return PacketParser("status").feed(server.handle(encode_instruction(servo_id, instruction, params)))  # type: ignore[return-value]


def write_params(register: Register, value: int) -> bytes:
    return bytes((register.address,)) + encode_register(register, value)


def test_ping_and_model_read(bus: BusServer) -> None:
    assert ask(bus, 2, Instruction.PING) == [StatusPacket(2, 0, b"")]
    (status,) = ask(bus, 1, Instruction.READ, [Register.Model_Number.address, 2])
    assert int.from_bytes(status.params, "little") == 777
    assert ask(bus, 9, Instruction.PING) == []


def test_broadcast_ping_answered_by_all_in_id_order() -> None:
    server = BusServer({i: ServoMemory(i) for i in (5, 2, 4)}, timing=BusTiming.fast())
    assert [p.servo_id for p in ask(server, BROADCAST_ID, Instruction.PING)] == [2, 4, 5]


def test_write_answers_when_addressed_only(bus: BusServer) -> None:
    assert ask(bus, 3, Instruction.WRITE, write_params(Register.Goal_Position, 1500)) == [StatusPacket(3, 0, b"")]
    assert bus.servos[3].get(Register.Goal_Position) == 1500
    assert ask(bus, BROADCAST_ID, Instruction.WRITE, write_params(Register.Goal_Position, 900)) == []
    assert all(m.get(Register.Goal_Position) == 900 for m in bus.servos.values())
    assert ask(bus, BROADCAST_ID, Instruction.READ, [56, 2]) == []


def test_reg_write_applies_on_action(bus: BusServer) -> None:
    for servo_id in (1, 2):
        assert ask(bus, servo_id, Instruction.REG_WRITE, write_params(Register.Goal_Position, 100 * servo_id))
    assert bus.servos[1].get(Register.Goal_Position) == 0
    assert ask(bus, BROADCAST_ID, Instruction.ACTION) == []
    assert (bus.servos[1].get(Register.Goal_Position), bus.servos[2].get(Register.Goal_Position)) == (100, 200)
    assert ask(bus, 1, Instruction.ACTION) == [StatusPacket(1, 0, b"")]  # nothing pending: no change
    assert bus.servos[1].get(Register.Goal_Position) == 100


def test_reset_restores_factory_and_keeps_id(bus: BusServer) -> None:
    ask(bus, 4, Instruction.WRITE, write_params(Register.P_Coefficient, 16))
    assert ask(bus, 4, Instruction.RESET) == [StatusPacket(4, 0, b"")]
    assert bus.servos[4].get(Register.P_Coefficient) == 32


def test_sync_read_in_request_order_skipping_absent(bus: BusServer) -> None:
    for servo_id, memory in bus.servos.items():
        memory.set_encoder(1000 + servo_id)
    address, length = FEEDBACK_BLOCK
    replies = ask(bus, BROADCAST_ID, Instruction.SYNC_READ, [address, length, 6, 3, 42, 1])
    assert [p.servo_id for p in replies] == [6, 3, 1]
    assert all(len(p.params) == length == 15 for p in replies)
    assert int.from_bytes(replies[0].params[:2], "little") == 1006


def test_sync_write_is_silent_and_applies(bus: BusServer) -> None:
    body = bytes([42, 2]) + b"".join(bytes((i,)) + (2000 + i).to_bytes(2, "little") for i in (1, 2, 3))
    assert ask(bus, BROADCAST_ID, Instruction.SYNC_WRITE, body) == []
    assert [bus.servos[i].get(Register.Goal_Position) for i in (1, 2, 3, 4)] == [2001, 2002, 2003, 0]
    assert ask(bus, BROADCAST_ID, Instruction.SYNC_WRITE, body[:-1]) == []  # malformed: ignored whole
    assert bus.servos[3].get(Register.Goal_Position) == 2003


def test_status_return_level_zero(bus: BusServer) -> None:
    ask(bus, 2, Instruction.WRITE, write_params(Register.Response_Status_Level, 0))
    assert ask(bus, 2, Instruction.WRITE, write_params(Register.Goal_Position, 10)) == []
    assert bus.servos[2].get(Register.Goal_Position) == 10
    assert ask(bus, 2, Instruction.PING) == [StatusPacket(2, 0, b"")]
    assert len(ask(bus, 2, Instruction.READ, [42, 2])) == 1


def test_instruction_errors(bus: BusServer) -> None:
    assert ask(bus, 1, Instruction.READ, [250, 10]) == [StatusPacket(1, ERROR_INSTRUCTION, b"")]
    assert ask(bus, 1, Instruction.READ, [56]) == [StatusPacket(1, ERROR_INSTRUCTION, b"")]
    assert ask(bus, 1, Instruction.WRITE, [42]) == [StatusPacket(1, ERROR_INSTRUCTION, b"")]
    assert ask(bus, 1, 0x30, b"") == [StatusPacket(1, ERROR_INSTRUCTION, b"")]  # type: ignore[arg-type]


def test_error_byte_from_status_register_and_forced_bits(bus: BusServer) -> None:
    bus.servos[1].set_feedback(status=0x04)
    bus.faults.force_error_bits(1, 0x20)
    (pong,) = ask(bus, 1, Instruction.PING)
    assert pong.error == 0x24
    (status,) = ask(bus, 1, Instruction.READ, [Register.Status.address, 1])
    assert status.params == b"\x24"


def test_id_change_rekeys(bus: BusServer) -> None:
    ask(bus, 6, Instruction.WRITE, write_params(Register.ID, 9))
    assert ask(bus, 6, Instruction.PING) == []
    assert ask(bus, 9, Instruction.PING) == [StatusPacket(9, 0, b"")]
    assert 9 in bus.servos and 6 not in bus.servos


def test_baud_rate_filter(bus: BusServer) -> None:
    ask(bus, 2, Instruction.WRITE, write_params(Register.Baud_Rate, 4))
    ping = encode_instruction(BROADCAST_ID, Instruction.PING)
    at_1m = PacketParser("status").feed(bus.handle(ping, host_baud=1_000_000))
    at_115k = PacketParser("status").feed(bus.handle(ping, host_baud=115_200))
    assert [p.servo_id for p in at_1m] == [1, 3, 4, 5, 6]
    assert [p.servo_id for p in at_115k] == [2]


def test_keys_must_match_ids() -> None:
    with pytest.raises(ValueError):
        BusServer({2: ServoMemory(1)})


def test_timing_schedule() -> None:
    servos = make_servos((1, 2))
    server = BusServer(servos, FaultInjector(), BusTiming(latency_s=1e-3))
    servos[2].set(Register.Return_Delay_Time, 0)
    read = InstructionPacket(BROADCAST_ID, Instruction.SYNC_READ, bytes([56, 15, 1, 2]))
    first, second = server.process(read)
    byte = 10 / 1_000_000
    assert first.due == pytest.approx(1e-3 + 10 * byte + 500e-6 + 21 * byte)
    assert second.due == pytest.approx(first.due + 21 * byte)
    server.faults.set_extra_latency(2e-3)
    assert server.process(read)[0].due == pytest.approx(first.due + 2e-3)
    fast = BusServer(make_servos((1,)), timing=BusTiming.fast())
    assert fast.process(InstructionPacket(1, Instruction.PING))[0].due == 0.0
    with pytest.raises(ValueError):
        BusTiming(latency_s=-1)
