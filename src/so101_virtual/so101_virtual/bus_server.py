"""The STS3215 bus as a server: instruction packets in, status packets out, over ServoMemory objects.

:class:`BusServer` is transport-free: :meth:`BusServer.handle` takes request bytes and returns every
reply byte (in-process use); :meth:`BusServer.process` takes one parsed instruction and returns the
replies with the time each one is due (:class:`Reply`), which :class:`so101_virtual.pty_link.PtyLink`
honours on a pseudo-terminal.

Semantics (what ``scservo_sdk`` and LeRobot rely on):

* PING answers a status packet with no parameters; a broadcast PING is answered by every servo on
  the bus, in id order (LeRobot's ``broadcast_ping`` scan). The SDK's ``ping`` then READs
  Model_Number (address 3, 2 bytes), answered from the table (777).
* READ answers the bytes; WRITE / REG_WRITE / ACTION / RESET answer an empty status packet when
  addressed to one servo and ``Response_Status_Level`` ≥ 1; broadcast instructions other than PING
  and SYNC_READ never answer. With ``Response_Status_Level`` = 0 only PING, READ and SYNC_READ answer.
* REG_WRITE holds one write per servo until ACTION (usually broadcast) applies it; RESET restores the
  factory table and keeps the ID.
* SYNC_READ (addr, len, ids…): each addressed servo present on the bus answers its own status packet,
  in the order of the request; absent or unplugged ids are skipped (the client times out on them).
* SYNC_WRITE (addr, len, (id, data×len)…) applies silently; a malformed one is ignored as a whole.
* The error byte of a reply is the servo's ``Status`` register, OR the bits forced by the
  :class:`~so101_virtual.faults.FaultInjector`, OR ``ERROR_INSTRUCTION`` (0x40) for a malformed
  instruction (bad parameter count, range outside the table, unknown instruction).
* A servo hears a request only when its ``Baud_Rate`` matches the host's line speed (when the
  transport knows it), so a scan over baud rates finds each servo at its own rate.
* ID changes re-key the servo immediately (lookups go by the ``ID`` register each time).

LeRobot's connect handshake (``FeetechMotorsBus.connect`` → ``_handshake``) is served as follows:
``_assert_motors_exist`` pings every configured id (PING, then the SDK's follow-up READ of
Model_Number, which must equal 777 for ``sts3215``), then ``_assert_same_firmware`` READs
Firmware_Major_Version (0) and Firmware_Minor_Version (1) of every id; all servos of a
:class:`ServoMemory` default to the same firmware (3.10), so the handshake passes. Any non-zero error
byte makes LeRobot raise, so forced error bits show up there as they would with a real arm.

Timing (:class:`BusTiming`): a reply is due ``latency + jitter + extra latency (faults)`` after the
request, plus the request's own wire time, then, per reply in order, the servo's
``Return_Delay_Time × 2 µs`` and the reply's wire time (10 bits per byte at the servo's baud rate).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from so101_feetech.control_table import BAUD_RATES, TABLE_SIZE, Register
from so101_feetech.protocol import (
    BROADCAST_ID,
    ERROR_INSTRUCTION,
    Instruction,
    InstructionPacket,
    PacketParser,
    encode_status,
)

from .faults import FaultInjector
from .servo_memory import ServoMemory

__all__ = ["BusServer", "BusTiming", "Reply"]

_STATUS_ADDR = Register.Status.address
_BITS_PER_BYTE = 10  # start + 8 data + stop


@dataclass(frozen=True)
class BusTiming:
    """How long the virtual bus takes to answer.

    Fields: ``byte_time`` emulates the UART (10 bits per byte at the servo's baud rate, both for the
    request and each reply); ``return_delay`` honours each servo's Return_Delay_Time (×2 µs);
    ``latency_s`` is a fixed extra delay per request (USB adapter, OS); ``jitter_s`` adds a uniform
    random 0..jitter_s to it (seeded by ``seed``).
    """

    byte_time: bool = True
    return_delay: bool = True
    latency_s: float = 0.0
    jitter_s: float = 0.0
    seed: int | None = 0

    def __post_init__(self) -> None:
        if self.latency_s < 0 or self.jitter_s < 0:
            raise ValueError(f"latency_s and jitter_s must be >= 0 (got {self.latency_s}, {self.jitter_s})")

    def wire_time(self, nbytes: int, baud: int) -> float:
        """Seconds ``nbytes`` take on the line at ``baud`` (0 without byte-time emulation)."""
        return nbytes * _BITS_PER_BYTE / baud if self.byte_time else 0.0

    @classmethod
    def fast(cls) -> BusTiming:
        """No emulated delays at all: replies as fast as the host can take them (tests)."""
        return cls(byte_time=False, return_delay=False)

    @classmethod
    def realistic(cls, latency_s: float = 0.0, jitter_s: float = 0.0, seed: int | None = 0) -> BusTiming:
        """The wire figures of a real bus: UART byte time at each servo's baud rate and its return
        delay. Adapter latency/jitter are opt-in (gap profiles set them).

        At 1 Mbaud with Return_Delay_Time 0 one driver cycle (SYNC_WRITE of six goals, 26 bytes, then
        SYNC_READ of the 15-byte feedback block of six servos, 14 + 6 × 21 bytes) keeps the line busy
        1.66 ms: a ceiling of ~600 Hz, as on the real bus; each 100 µs of adapter latency costs ~30 Hz.
        """
        return cls(byte_time=True, return_delay=True, latency_s=latency_s, jitter_s=jitter_s, seed=seed)


@dataclass(frozen=True, slots=True)
class Reply:
    """A reply packet and when its last byte is on the wire, in seconds after the request arrived."""

    due: float
    data: bytes
    servo_id: int


def _baud_of(memory: ServoMemory) -> int:
    return BAUD_RATES.get(memory.baudrate_index, 1_000_000)


class BusServer:
    """Serves the STS3215 protocol over ``servos`` (keys must equal each memory's ID)."""

    def __init__(
        self,
        servos: Mapping[int, ServoMemory],
        faults: FaultInjector | None = None,
        timing: BusTiming | None = None,
    ) -> None:
        for servo_id, memory in servos.items():
            if memory.servo_id != servo_id:
                raise ValueError(f"servo keyed {servo_id} has ID register {memory.servo_id}")
        self._memories = list(servos.values())
        self.faults = faults if faults is not None else FaultInjector()
        self.timing = timing if timing is not None else BusTiming()
        self._rng = random.Random(self.timing.seed)
        self._registered: dict[ServoMemory, tuple[int, bytes]] = {}
        self._lock = threading.Lock()
        self.requests = 0  # instruction packets processed

    @property
    def servos(self) -> dict[int, ServoMemory]:
        """The servos by their current ID (re-keyed after an ID write)."""
        return {m.servo_id: m for m in self._memories}

    # ----------------------------------------------------------------- entry points
    def handle(self, request: bytes, host_baud: int | None = None) -> bytes:
        """Every reply to the packets in ``request``, concatenated (no waiting)."""
        parser = PacketParser("instruction")
        out: list[bytes] = []
        for packet in parser.feed(request):
            assert isinstance(packet, InstructionPacket)  # an instruction parser yields nothing else
            out.extend(r.data for r in self.process(packet, host_baud))
        return b"".join(out)

    def process(self, packet: InstructionPacket, host_baud: int | None = None) -> list[Reply]:
        """Execute one instruction; the replies it causes with their due times."""
        with self._lock:
            self.requests += 1
            answers = self._execute(packet, host_baud)
            return self._schedule(packet, answers, host_baud)

    # ----------------------------------------------------------------- execution
    def _listeners(self, host_baud: int | None) -> list[ServoMemory]:
        unplugged = self.faults.unplugged()
        out = []
        for m in self._memories:
            if m.servo_id in unplugged:
                continue
            if host_baud is not None and abs(_baud_of(m) - host_baud) > 0.03 * host_baud:
                continue
            out.append(m)
        return out

    def _execute(self, packet: InstructionPacket, host_baud: int | None) -> list[tuple[ServoMemory, int, bytes]]:
        """Apply the instruction; (servo, extra error bits, params) for each servo that answers."""
        listeners = self._listeners(host_baud)
        inst, params, target = packet.instruction, packet.params, packet.servo_id
        broadcast = target == BROADCAST_ID
        if inst == Instruction.SYNC_READ:
            return self._sync_read(listeners, params)
        if inst == Instruction.SYNC_WRITE:
            self._sync_write(listeners, params)
            return []
        if broadcast:
            targets = sorted(listeners, key=lambda m: m.servo_id)
        else:
            targets = [m for m in listeners if m.servo_id == target]
        answers: list[tuple[ServoMemory, int, bytes]] = []
        for memory in targets:
            error, data = self._one(memory, inst, params)
            if inst == Instruction.PING:
                answers.append((memory, error, b""))
            elif broadcast:
                continue
            elif inst == Instruction.READ or memory.get(Register.Response_Status_Level) >= 1:
                answers.append((memory, error, data))
        return answers

    def _one(self, memory: ServoMemory, inst: int, params: bytes) -> tuple[int, bytes]:
        """One servo executes one non-sync instruction: (instruction error bits, reply params)."""
        if inst == Instruction.PING:
            return 0, b""
        if inst == Instruction.READ:
            if len(params) != 2 or params[0] + params[1] > TABLE_SIZE:
                return ERROR_INSTRUCTION, b""
            return 0, self._read(memory, params[0], params[1])
        if inst in (Instruction.WRITE, Instruction.REG_WRITE):
            if len(params) < 2:
                return ERROR_INSTRUCTION, b""
            address, data = params[0], bytes(params[1:])
            if address + len(data) > TABLE_SIZE:
                return ERROR_INSTRUCTION, b""
            if inst == Instruction.WRITE:
                memory.write(address, data)
            else:
                self._registered[memory] = (address, data)
            return 0, b""
        if inst == Instruction.ACTION:
            pending = self._registered.pop(memory, None)
            if pending is not None:
                memory.write(*pending)
            return 0, b""
        if inst == Instruction.RESET:
            self._registered.pop(memory, None)
            memory.factory_reset(keep_id=True)
            return 0, b""
        return ERROR_INSTRUCTION, b""

    def _read(self, memory: ServoMemory, address: int, length: int) -> bytes:
        data = memory.read(address, length)
        forced = self.faults.error_bits(memory.servo_id)
        if forced and address <= _STATUS_ADDR < address + length:
            patched = bytearray(data)
            patched[_STATUS_ADDR - address] |= forced
            data = bytes(patched)
        return data

    def _sync_read(self, listeners: list[ServoMemory], params: bytes) -> list[tuple[ServoMemory, int, bytes]]:
        if len(params) < 2 or params[0] + params[1] > TABLE_SIZE:
            return []
        address, length = params[0], params[1]
        by_id = {m.servo_id: m for m in listeners}
        answers = []
        for servo_id in params[2:]:
            memory = by_id.get(servo_id)
            if memory is not None:
                answers.append((memory, 0, self._read(memory, address, length)))
        return answers

    def _sync_write(self, listeners: list[ServoMemory], params: bytes) -> None:
        if len(params) < 2:
            return
        address, length = params[0], params[1]
        body = params[2:]
        if length == 0 or len(body) % (length + 1) or address + length > TABLE_SIZE:
            return  # malformed: the servos ignore the whole packet
        by_id = {m.servo_id: m for m in listeners}
        for start in range(0, len(body), length + 1):
            memory = by_id.get(body[start])
            if memory is not None:
                memory.write(address, body[start + 1 : start + 1 + length])

    # ----------------------------------------------------------------- replies and time
    def _schedule(
        self, packet: InstructionPacket, answers: list[tuple[ServoMemory, int, bytes]], host_baud: int | None
    ) -> list[Reply]:
        if not answers:
            return []
        timing = self.timing
        t = timing.latency_s + self.faults.extra_latency
        if timing.jitter_s:
            t += self._rng.uniform(0.0, timing.jitter_s)
        t += timing.wire_time(len(packet.params) + 6, host_baud or _baud_of(answers[0][0]))
        replies = []
        for memory, extra_error, params in answers:
            servo_id = memory.servo_id
            error = (memory.read(_STATUS_ADDR, 1)[0] | self.faults.error_bits(servo_id) | extra_error) & 0x7F
            data = encode_status(servo_id, error, params)
            if timing.return_delay:
                t += memory.get(Register.Return_Delay_Time) * 2e-6
            t += timing.wire_time(len(data), _baud_of(memory))
            fate = self.faults.reply_fate()
            if fate == "drop":
                continue
            if fate == "corrupt":
                data = data[:-1] + bytes((data[-1] ^ 0x5A,))
            replies.append(Reply(t, data, servo_id))
        return replies
