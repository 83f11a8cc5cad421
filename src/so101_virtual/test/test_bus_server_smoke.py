"""Smoke test: the in-process bus answers PING and READ of the model number."""

from so101_driver.control_table import Register
from so101_driver.protocol import Instruction, PacketParser, encode_instruction
from so101_virtual.bus_server import BusServer, BusTiming
from so101_virtual.servo_memory import ServoMemory


def test_ping_and_model_read_in_process() -> None:
    server = BusServer({i: ServoMemory(i) for i in (1, 2)}, timing=BusTiming.fast())
    parser = PacketParser("status")
    (pong,) = parser.feed(server.handle(encode_instruction(2, Instruction.PING)))
    assert (pong.servo_id, pong.error, pong.params) == (2, 0, b"")
    request = encode_instruction(1, Instruction.READ, bytes((Register.Model_Number.address, 2)))
    (status,) = parser.feed(server.handle(request))
    assert int.from_bytes(status.params, "little") == 777
