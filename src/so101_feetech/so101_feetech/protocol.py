"""Feetech STS packet format: encode, checksum and an incremental parser (pure, no I/O).

Shared by the bus client (:mod:`so101_driver.bus`) and the virtual bus (``so101_virtual.bus_server``)
so both sides frame packets the same way.

Wire format (Feetech protocol 0, STS/SMS series, little-endian data)::

    instruction  FF FF ID LEN INST P1..Pn CHK      LEN = n + 2
    status       FF FF ID LEN ERR  P1..Pn CHK      CHK = ~(ID + LEN + INST/ERR + sum(P)) & 0xFF

IDs 0..253 address one servo, 0xFE (:data:`BROADCAST_ID`) addresses all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "BROADCAST_ID",
    "MAX_ID",
    "HEADER",
    "MAX_PACKET_LENGTH",
    "ERROR_INSTRUCTION",
    "Instruction",
    "InstructionPacket",
    "StatusPacket",
    "Packet",
    "checksum",
    "encode_instruction",
    "encode_status",
    "PacketParser",
]

BROADCAST_ID = 0xFE
MAX_ID = 0xFD  # highest addressable servo id
HEADER = b"\xff\xff"
# Largest whole packet (header..checksum) the scservo_sdk accepts (TXPACKET_MAX_LEN / RXPACKET_MAX_LEN).
MAX_PACKET_LENGTH = 250
# Status-byte bit the virtual bus sets for a malformed instruction (Dynamixel protocol 1.0's
# "instruction error" bit, which Feetech's protocol inherits; < 0x80 so the SDK accepts the packet).
ERROR_INSTRUCTION = 0x40


class Instruction(IntEnum):
    PING = 0x01
    READ = 0x02
    WRITE = 0x03
    REG_WRITE = 0x04
    ACTION = 0x05
    RESET = 0x06
    SYNC_READ = 0x82
    SYNC_WRITE = 0x83


@dataclass(frozen=True, slots=True)
class InstructionPacket:
    """Host → servo. ``instruction`` is the raw byte (an :class:`Instruction` when known)."""

    servo_id: int
    instruction: int
    params: bytes = b""

    def encode(self) -> bytes:
        return encode_instruction(self.servo_id, self.instruction, self.params)


@dataclass(frozen=True, slots=True)
class StatusPacket:
    """Servo → host. ``error`` is the status byte (error bits, see ``control_table.ErrorBit``)."""

    servo_id: int
    error: int
    params: bytes = b""

    def encode(self) -> bytes:
        return encode_status(self.servo_id, self.error, self.params)


Packet = InstructionPacket | StatusPacket


def checksum(body: bytes | bytearray | memoryview) -> int:
    """Checksum over ID, LEN, INST/ERR and the parameters (everything between header and checksum)."""
    return ~sum(body) & 0xFF


def _encode(servo_id: int, code: int, params: bytes | bytearray | list[int]) -> bytes:
    if not 0 <= servo_id <= BROADCAST_ID:
        raise ValueError(f"servo id {servo_id} out of range 0..{BROADCAST_ID}")
    if not 0 <= code <= 0xFF:
        raise ValueError(f"instruction/error byte {code} out of range 0..255")
    params = bytes(params)
    length = len(params) + 2
    if length + 4 > MAX_PACKET_LENGTH:
        raise ValueError(f"packet of {length + 4} bytes exceeds {MAX_PACKET_LENGTH}")
    body = bytes((servo_id, length, code)) + params
    return HEADER + body + bytes((checksum(body),))


def encode_instruction(servo_id: int, instruction: int, params: bytes | bytearray | list[int] = b"") -> bytes:
    """An instruction packet, ready for the wire."""
    return _encode(servo_id, int(instruction), params)


def encode_status(servo_id: int, error: int, params: bytes | bytearray | list[int] = b"") -> bytes:
    """A status (reply) packet, ready for the wire."""
    return _encode(servo_id, error, params)


class PacketParser:
    """Incremental framing of a byte stream into packets.

    ``feed(data)`` returns every complete packet found so far. Garbage between packets is skipped;
    a bad length byte or a bad checksum is counted and parsing resumes one byte after the header
    that started the bad frame (so a good packet hidden inside garbage is still found). Never raises
    on input. ``kind`` selects what the packets are: ``"instruction"`` (what a servo receives) or
    ``"status"`` (what a host receives).

    Counters: ``bad_checksums``, ``bad_lengths``, ``discarded_bytes`` (bytes not part of a good packet).
    """

    def __init__(self, kind: str = "instruction") -> None:
        if kind not in ("instruction", "status"):
            raise ValueError(f"kind must be 'instruction' or 'status', not {kind!r}")
        self._status = kind == "status"
        self._buffer = bytearray()
        self.bad_checksums = 0
        self.bad_lengths = 0
        self.discarded_bytes = 0
        self.packets = 0

    @property
    def pending(self) -> int:
        """Bytes held back waiting for the rest of a packet."""
        return len(self._buffer)

    def reset(self) -> None:
        """Forget buffered bytes (counted as discarded); counters are kept."""
        self.discarded_bytes += len(self._buffer)
        self._buffer.clear()

    def resync(self) -> list[Packet]:
        """Give up on the partial packet at the front (e.g. after an inter-byte timeout).

        Drops one byte and re-parses the rest, returning any packet found in it.
        """
        if not self._buffer:
            return []
        del self._buffer[0]
        self.discarded_bytes += 1
        return self.feed(b"")

    def feed(self, data: bytes | bytearray | memoryview) -> list[Packet]:
        buf = self._buffer
        buf += data
        out: list[Packet] = []
        while True:
            start = buf.find(HEADER)
            if start < 0:
                # keep a trailing 0xFF: it may be the first header byte of the next packet
                keep = 1 if buf[-1:] == b"\xff" else 0
                self.discarded_bytes += len(buf) - keep
                del buf[: len(buf) - keep]
                return out
            # A run of 0xFF: the header is the last two of them (an id is never 0xFF).
            while start + 2 < len(buf) and buf[start + 2] == 0xFF:
                start += 1
            if start:
                self.discarded_bytes += start
                del buf[:start]
            if len(buf) < 4:
                return out
            length = buf[3]
            if length < 2 or length + 4 > MAX_PACKET_LENGTH:
                self.bad_lengths += 1
                self._skip_one()
                continue
            total = length + 4
            if len(buf) < total:
                return out
            body = bytes(buf[2 : total - 1])
            if checksum(body) != buf[total - 1]:
                self.bad_checksums += 1
                self._skip_one()
                continue
            del buf[:total]
            self.packets += 1
            servo_id, code, params = body[0], body[2], body[3:]
            if self._status:
                out.append(StatusPacket(servo_id, code, params))
            else:
                out.append(InstructionPacket(servo_id, code, params))

    def _skip_one(self) -> None:
        del self._buffer[0]
        self.discarded_bytes += 1
