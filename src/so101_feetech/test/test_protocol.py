"""so101_feetech.protocol: encoding, checksum and the incremental parser (pure, property-tested)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from so101_feetech.protocol import (
    BROADCAST_ID,
    Instruction,
    InstructionPacket,
    PacketParser,
    StatusPacket,
    checksum,
    encode_instruction,
    encode_status,
)

ids = st.integers(0, BROADCAST_ID)
params = st.binary(max_size=40)
instructions = st.builds(InstructionPacket, ids, st.integers(0, 255), params)
statuses = st.builds(StatusPacket, ids, st.integers(0, 0x7F), params)


def test_known_vectors() -> None:
    # Feetech manual examples: PING id 1, READ id 1 addr 56 len 2.
    assert encode_instruction(1, Instruction.PING) == bytes.fromhex("ffff010201fb")
    assert encode_instruction(1, Instruction.READ, [56, 2]) == bytes.fromhex("ffff0104023802be")
    assert encode_status(1, 0, b"") == bytes.fromhex("ffff010200fc")
    assert checksum(b"\x01\x02\x01") == 0xFB


def test_scservo_sdk_agrees_on_the_checksum() -> None:
    """The SDK writes its own checksum: our packet must be byte-identical to what it sends."""
    import scservo_sdk as scs

    packet = [0, 0, 3, 5, scs.INST_WRITE, 42, 0x34, 0x12, 0]  # header and checksum filled in by the SDK

    class Capture:
        is_using = False

        def clearPort(self) -> None:
            pass

        def writePort(self, data: list[int]) -> int:
            self.data = bytes(data)
            return len(data)

    port = Capture()
    scs.PacketHandler(0).txPacket(port, packet)
    assert port.data == encode_instruction(3, Instruction.WRITE, [42, 0x34, 0x12])


def test_encode_rejects_bad_fields() -> None:
    with pytest.raises(ValueError):
        encode_instruction(255, Instruction.PING)
    with pytest.raises(ValueError):
        encode_status(1, 256)
    with pytest.raises(ValueError):
        encode_instruction(1, Instruction.WRITE, bytes(250))


@settings(deadline=None)  # microseconds each; a loaded CI box must not fail them
@given(st.lists(instructions, max_size=8))
def test_instruction_round_trip(packets: list[InstructionPacket]) -> None:
    parser = PacketParser("instruction")
    assert parser.feed(b"".join(p.encode() for p in packets)) == packets
    assert parser.pending == 0
    assert (parser.bad_checksums, parser.bad_lengths, parser.discarded_bytes) == (0, 0, 0)


@settings(deadline=None)  # microseconds each; a loaded CI box must not fail them
@given(st.lists(statuses, max_size=8), st.data())
def test_status_round_trip_in_random_chunks(packets: list[StatusPacket], data: st.DataObject) -> None:
    stream = b"".join(p.encode() for p in packets)
    parser = PacketParser("status")
    found = []
    pos = 0
    while pos < len(stream):
        step = data.draw(st.integers(1, 16))
        found += parser.feed(stream[pos : pos + step])
        pos += step
    assert found == packets


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), statuses)
def test_resync_after_random_garbage(garbage: bytes, packet: StatusPacket) -> None:
    """Garbage, then a good packet: the good packet is always found (garbage may add spurious
    packets when it happens to hold a valid frame, and may swallow the packet's start only if the
    garbage announced a longer frame: after an inter-byte timeout resync the packet is found)."""
    parser = PacketParser("status")
    found = parser.feed(garbage + packet.encode())
    while packet not in found and parser.pending:
        found += parser.resync()
    assert packet in found


@settings(deadline=None)  # microseconds each; a loaded CI box must not fail them
@given(statuses, st.integers(0, 255))
def test_bad_checksum_is_counted_and_skipped(packet: StatusPacket, flip: int) -> None:
    good = packet.encode()
    bad = good[:-1] + bytes((good[-1] ^ (flip or 1),))
    parser = PacketParser("status")
    assert parser.feed(bad + good) == [packet]
    assert parser.bad_checksums == 1


def test_bad_length_is_counted() -> None:
    parser = PacketParser("instruction")
    good = encode_instruction(1, Instruction.PING)
    assert parser.feed(b"\xff\xff\x01\x01\x00" + good) == [InstructionPacket(1, Instruction.PING)]
    assert parser.bad_lengths == 1
    assert parser.discarded_bytes == 5


def test_header_run_and_split_header() -> None:
    parser = PacketParser("status")
    good = encode_status(4, 0, b"\x01")
    assert parser.feed(b"\xff\xff\xff" + good[2:]) == [StatusPacket(4, 0, b"\x01")]
    assert parser.feed(b"\x00\xff") == []
    assert parser.feed(good[1:]) == [StatusPacket(4, 0, b"\x01")]


def test_truncated_packet_waits_then_resync_drops_it() -> None:
    parser = PacketParser("status")
    good = encode_status(2, 0, b"\x10\x20")
    assert parser.feed(good[:5]) == []
    assert parser.pending == 5
    assert parser.resync() == []
    assert parser.feed(good) == [StatusPacket(2, 0, b"\x10\x20")]


def test_invalid_kind() -> None:
    with pytest.raises(ValueError):
        PacketParser("reply")
