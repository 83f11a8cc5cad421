"""Feetech STS3215 bus client on the real ``scservo_sdk`` (PortHandler, PacketHandler(0), group sync).

Every transaction goes through bounded retries: each failure is logged at debug level, the last one
raises :class:`~so101_driver.errors.BusTimeout`, :class:`~so101_driver.errors.CorruptPacket` or
:class:`~so101_driver.errors.ServoError` naming the servo and the number of tries.

The SDK's ``PortHandler`` carries every byte; single-servo transactions (ping, read, write) and
``sync_write`` are the SDK's own (``PacketHandler(0)``, ``GroupSyncWrite``). Two paths are framed
here with the shared :mod:`so101_feetech.protocol` instead, for reasons worth knowing:

- The feedback SYNC_READ. ``GroupSyncRead.rxPacket`` stops at the first servo that does not answer,
  and while it waits for that servo it reads and throws away the replies of the servos after it; it
  also drops each reply's error byte: one unplugged servo would blind the driver to all the others.
  Here the replies are collected with :class:`~so101_feetech.protocol.PacketParser`, keeping every
  answer that arrived, with its error byte, within one deadline. The request is one port write that
  can carry the cycle's SYNC_WRITE of goals just before the SYNC_READ (the SDK writes each packet
  separately and waits for it to drain): one hand-over to the adapter per control cycle.
- A broadcast PING has every servo answer; the SDK has no call for it (LeRobot writes its own too).

Deadlines. A reply is due within its wire time (10 bits per byte at the line's rate: ~0.2 ms for
a feedback reply at 1 Mbaud) plus ``timeout_ms`` for the adapter's and the OS's latency. A SYNC_READ
also ends early once the servos that answer have answered: when replies have started to flow and the
line then stays quiet for ``reply_gap_ms``, the servos still missing are not coming (a dropped reply
or an unplugged servo costs that gap, not the whole deadline; ending on either, it first takes what the port already
holds: a driver kept off the CPU past them between two reads would otherwise call replies lost that came in time), and a
retry of the servos still missing
waits at most twice the latency the first reply showed plus that gap (the line's latency was just
measured: a servo that does not answer within it is not coming either). A SYNC_READ's first try waits at least
twice the bus's usual latency (a running mean of the first replies' latency) plus that gap, when that is longer
than ``timeout_ms``: behind an adapter whose own latency is most of ``timeout_ms`` (a USB-serial latency timer of
16 ms against 20), a reply held up a few ms by a loaded machine is late, not lost; single-servo transactions (a torque
toggle while the arm runs) get the same allowance. After a transaction that timed out, the next transaction, a
sync read included, first waits out its late reply (up to one more allowance, or until the line is quiet after it):
taken for the next one's answer, a read of another register of the same servo read the earlier register's value,
and the next cycle's sync read took the servo's position of the cycle before for its own. A servo that stays
silent (unplugged, off) is waited for once, when it falls silent, not every cycle after. Work
that is not timed (configuring the servos and switching torque at start, before the bus's latency is known) runs
under :meth:`FeetechBus.patient`: LeRobot's 50 ms and retries. Every retry, timeout and malformed packet is counted
in :attr:`FeetechBus.counters` (the driver reports them per second).

The SDK's packet timeout is patched as LeRobot does (``tx_time_per_byte·(n + 3) + timeout_ms``),
which fixes the SDK's too-short timeout for long replies, and its ``readPort`` waits for data
(``select``, ≤ 1 ms) instead of letting the receive loop spin a core (see ``waiting_read_port``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import MethodType
from typing import Any

import scservo_sdk as scs

from so101_driver.errors import BusError, BusTimeout, CorruptPacket, PortError, ServoError
from so101_driver.feedback import BusCounters, Feedback, ScanResult
from so101_driver.serial_io import (
    discard_input,
    drain_until_quiet,
    os_errors_as_port_errors,
    read_available,
    waiting_read_port,
)
from so101_feetech import protocol
from so101_feetech.control_table import (
    BAUD_RATES,
    FEEDBACK_BLOCK,
    LEROBOT_GRIPPER_SETTINGS,
    LEROBOT_SERVO_SETTINGS,
    Area,
    Register,
    decode_error_bits,
    decode_register,
    encode_register,
)

__all__ = ["FeetechBus", "Feedback", "ScanResult", "BusCounters", "DEFAULT_TIMEOUT_MS", "DEFAULT_RETRIES",
           "DEFAULT_REPLY_GAP_MS"]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_MS = 50.0  # LeRobot's figure: USB serial adapters add up to a latency-timer tick
DEFAULT_RETRIES = 2  # extra tries after the first
# silence that ends a SYNC_READ once replies flowed: ~15 feedback replies' wire time at 1 Mbaud, and
# more than a USB full-speed frame (1 ms) by which an adapter may split one burst of replies
DEFAULT_REPLY_GAP_MS = 3.0
# weight of each sync read's first-reply latency in the bus's usual latency (a running mean over ~20 reads)
_LATENCY_WEIGHT = 0.05
_STATUS_OVERHEAD = 6  # FF FF ID LEN ERR ... CHK
_FB_ADDR, _FB_LEN = FEEDBACK_BLOCK
RegisterLike = Register | str


def _register(register: RegisterLike) -> Register:
    return register if isinstance(register, Register) else Register.by_name(register)


class FeetechBus:
    """A Feetech bus on one serial port (protocol 0: STS/SMS, little-endian)."""

    def __init__(self, port: str, baudrate: int = 1_000_000, timeout_ms: float = DEFAULT_TIMEOUT_MS,
                 retries: int = DEFAULT_RETRIES, log: logging.Logger | None = None,
                 reply_gap_ms: float = DEFAULT_REPLY_GAP_MS) -> None:
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        if timeout_ms <= 0:
            raise ValueError(f"timeout_ms must be > 0, got {timeout_ms}")
        if reply_gap_ms <= 0:
            raise ValueError(f"reply_gap_ms must be > 0, got {reply_gap_ms}")
        self.port = port
        self.baudrate = baudrate
        self.timeout_ms = float(timeout_ms)
        self.retries = retries
        self.reply_gap_ms = float(reply_gap_ms)
        self.counters = BusCounters()
        self.log = log or logger  # a node passes its own, so composed nodes keep their messages apart
        self._handler = scs.PacketHandler(0)
        self._port: Any = None
        self._sync_writers: dict[tuple[int, int], Any] = {}
        self._lock = threading.RLock()
        self.last_error: dict[int, int] = {}  # servo id → error byte of its latest reply
        self.usual_latency_s: float | None = None  # running mean of the first reply's latency to a sync read
        # a transaction timed out: its reply may still come until then (monotonic s), and is waited out first
        self._late_until = 0.0
        self._silent: set[int] = set()  # servos that did not answer their latest sync read

    # --- connection -----------------------------------------------------------------------------

    @property
    def is_connected(self) -> bool:
        return self._port is not None and self._port.is_open

    def connect(self) -> FeetechBus:
        """Open the port at :attr:`baudrate`; raises :class:`PortError` with the OS reason."""
        if self.is_connected:
            return self
        port = scs.PortHandler(self.port)
        port.setPacketTimeout = MethodType(_patched_set_packet_timeout(self), port)
        port.readPort = MethodType(waiting_read_port, port)
        try:
            ok = port.setBaudRate(self.baudrate)  # opens the port
        except Exception as err:  # serial.SerialException, OSError
            raise PortError(f"cannot open {self.port}: {err}") from err
        if not ok:
            raise PortError(f"{self.port}: unsupported baud rate {self.baudrate}")
        self._port = port
        self._sync_writers.clear()
        self.log.debug("opened %s at %d baud", self.port, self.baudrate)
        return self

    def close(self) -> None:
        """Release the port (idempotent)."""
        with self._lock:
            if self._port is not None:
                with contextlib.suppress(Exception):
                    self._port.closePort()
                self.log.debug("closed %s", self.port)
            self._port = None

    def __enter__(self) -> FeetechBus:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_baudrate(self, baudrate: int) -> None:
        """Change the host side's baud rate (the servos' Baud_Rate register is not touched)."""
        port = self._require_port()
        with self._lock:
            try:
                ok = port.setBaudRate(baudrate)
            except Exception as err:
                raise PortError(f"cannot set {self.port} to {baudrate} baud: {err}") from err
            if not ok:
                raise PortError(f"{self.port}: unsupported baud rate {baudrate}")
            self.baudrate = baudrate

    def _require_port(self) -> Any:
        if self._port is None:
            raise PortError(f"{self.port} is not open: call connect() first")
        return self._port

    # --- single-servo transactions --------------------------------------------------------------

    def ping(self, servo_id: int) -> int:
        """PING (+ the SDK's Model_Number read); returns the model number."""

        def op() -> tuple[int, int, int]:
            try:
                return self._handler.ping(self._port, servo_id)
            except IndexError:  # the SDK took a short (stale) status packet for the Model_Number reply
                return 0, scs.COMM_RX_CORRUPT, 0

        return int(self._transact("ping", servo_id, op, strict=False))

    def read(self, register: RegisterLike, servo_id: int, *, strict: bool = True) -> int:
        """Read one register, sign-magnitude decoded. ``strict=False`` accepts replies with error bits."""
        reg = _register(register)

        def op() -> tuple[Any, int, int]:
            data, comm, error = self._handler.readTxRx(self._port, servo_id, reg.address, reg.size)
            if comm == scs.COMM_SUCCESS and len(data) < reg.size:  # a short (stale) status packet
                return data, scs.COMM_RX_CORRUPT, error
            return data, comm, error

        data = self._transact(f"read {reg.name}", servo_id, op, strict=strict)
        return decode_register(reg, bytes(data))

    def write(self, register: RegisterLike, servo_id: int, value: int, *, strict: bool = True) -> None:
        """Write one register (sign-magnitude encoded) and wait for the servo's status reply.

        EEPROM registers only take effect with Lock = 0 (see :meth:`eeprom_unlocked`).
        """
        reg = _register(register)
        if reg.spec.area is Area.READ_ONLY:
            raise ValueError(f"{reg.name} is read-only")
        data = list(encode_register(reg, int(value)))

        def op() -> tuple[None, int, int]:
            comm, error = self._handler.writeTxRx(self._port, servo_id, reg.address, reg.size, data)
            return None, comm, error

        self._transact(f"write {reg.name}={value}", servo_id, op, strict=strict)

    def _transact(self, what: str, servo_id: int, op: Callable[[], tuple[Any, int, int]], strict: bool) -> Any:
        port = self._require_port()
        tries = 1 + self.retries
        comm, error = scs.COMM_SUCCESS, 0
        with self._lock:
            for attempt in range(1, tries + 1):
                if time.monotonic() < self._late_until:
                    drain_until_quiet(port, self._late_until, self.reply_gap_ms / 1000.0)
                discard_input(port)
                self.counters.transactions += 1
                self.counters.retries += attempt > 1
                try:
                    with os_errors_as_port_errors(self.port, what):
                        value, comm, error = op()
                finally:
                    port.is_using = False
                if comm == scs.COMM_SUCCESS:
                    self.last_error[servo_id] = error
                    if not error or not strict:
                        return value
                elif comm == scs.COMM_RX_TIMEOUT:
                    self.counters.timeouts += 1
                    self._late_until = time.monotonic() + self.reply_allowance_ms() / 1000.0
                elif comm == scs.COMM_RX_CORRUPT:
                    self.counters.corrupt += 1
                self.log.debug("%s on servo %d failed (try %d/%d): %s", what, servo_id, attempt, tries,
                             _describe(self._handler, comm, error))
        raise self._failure(servo_id, tries, comm, error, what)

    def _failure(self, servo_id: int, tries: int, comm: int, error: int, what: str) -> BusError:
        if comm == scs.COMM_RX_TIMEOUT:
            return BusTimeout(servo_id, tries, what)
        if comm == scs.COMM_RX_CORRUPT:
            return CorruptPacket(servo_id, tries, what)
        if comm == scs.COMM_SUCCESS:
            return ServoError(servo_id, tries, error, what)
        return PortError(f"{what} on servo {servo_id}: {self._handler.getTxRxResult(comm)} after {tries} tries",
                         servo_id, tries)

    @contextlib.contextmanager
    def eeprom_unlocked(self, ids: Iterable[int]) -> Iterator[None]:
        """Lock = 0 on ``ids`` for the block (EEPROM writes need it), then each servo's Lock restored."""
        ids = list(ids)
        previous = {i: self.read(Register.Lock, i, strict=False) for i in ids}
        for i in ids:
            self.write(Register.Lock, i, 0, strict=False)
        try:
            yield
        finally:
            for i, lock in previous.items():
                if lock:
                    self.write(Register.Lock, i, lock, strict=False)

    # --- several servos -------------------------------------------------------------------------

    def set_torque(self, ids: Iterable[int], enabled: bool) -> None:
        """Torque_Enable then Lock, as LeRobot does (on: 1, 1; off: 0, 0). Error bits do not stop it:
        turning torque off must work on an overloaded servo."""
        value = 1 if enabled else 0
        for i in ids:
            self.write(Register.Torque_Enable, i, value, strict=False)
            self.write(Register.Lock, i, value, strict=False)

    def configure_lerobot(self, ids: Sequence[int], gripper_id: int | None = None) -> dict[int, list[str]]:
        """LeRobot's SO-101 follower settings (``SOFollower.configure``); returns what was written, per servo.

        Return_Delay_Time 0, Acceleration and Maximum_Acceleration 254, position mode, Phase bit 4
        cleared (single-turn 0..4095), P 16 / I 0 / D 32; on the gripper Max_Torque_Limit 500,
        Protection_Current 250, Overload_Torque 25. Every setting is read first and only those that
        differ are written: an arm LeRobot configured is left as it is, and one that lost only its RAM
        settings to a power cycle (the accelerations) gets them back with its torque untouched. Torque
        goes off, as in LeRobot, only on servos with an EEPROM setting to change (a holding arm would
        sag while it is off), and is restored on those that had it on.
        """
        pending: dict[int, list[tuple[Register, int]]] = {}
        for i in ids:
            settings = LEROBOT_SERVO_SETTINGS + (LEROBOT_GRIPPER_SETTINGS if i == gripper_id else ())
            changes = [(register, value) for register, value in settings if self.read(register, i, strict=False) != value]
            phase = self.read(Register.Phase, i, strict=False)
            if phase & 0x10:
                changes.append((Register.Phase, phase & ~0x10))
            if changes:
                pending[i] = changes
        eeprom = [i for i, changes in pending.items() if any(r.value.area is Area.EEPROM for r, _ in changes)]
        torque_on = {i: self.read(Register.Torque_Enable, i, strict=False) for i in eeprom}
        self.set_torque(eeprom, False)  # also Lock = 0, which EEPROM writes need
        try:
            for i, changes in pending.items():
                for register, value in changes:
                    self.write(register, i, value, strict=False)
        finally:
            on = [i for i, t in torque_on.items() if t]
            if on:
                self.set_torque(on, True)
        return {i: [register.name for register, _ in changes] for i, changes in pending.items()}

    def sync_write(self, register: RegisterLike, values: Mapping[int, int]) -> None:
        """One SYNC_WRITE of ``register`` for every servo in ``values`` (no reply by design)."""
        if not values:
            return
        reg = _register(register)
        port = self._require_port()
        with self._lock:
            writer = self._sync_writers.get((reg.address, reg.size))
            if writer is None:
                writer = self._sync_writers[(reg.address, reg.size)] = scs.GroupSyncWrite(
                    port, self._handler, reg.address, reg.size)
            writer.clearParam()
            for servo_id, value in values.items():
                writer.addParam(int(servo_id), list(encode_register(reg, int(value))))
            try:
                with os_errors_as_port_errors(self.port, f"sync write of {reg.name}"):
                    comm = writer.txPacket()
            finally:
                port.is_using = False
        if comm != scs.COMM_SUCCESS:
            raise PortError(f"sync write of {reg.name}: {self._handler.getTxRxResult(comm)}")

    def sync_write_goal_positions(self, goals: Mapping[int, int]) -> None:
        """Goal_Position for several servos in one SYNC_WRITE."""
        self.sync_write(Register.Goal_Position, goals)

    def sync_read_feedback(self, ids: Sequence[int]) -> dict[int, Feedback]:
        """The feedback block of every servo in one SYNC_READ; raises for the first servo that failed."""
        feedback, failures = self.sync_read_feedback_partial(ids)
        if failures:
            raise next(iter(failures.values()))
        return feedback

    def sync_read_feedback_partial(self, ids: Sequence[int], goals: Mapping[int, int] | None = None,
                                   retries: int | None = None, budget_s: float | None = None,
                                   ) -> tuple[dict[int, Feedback], dict[int, BusError]]:
        """Like :meth:`sync_read_feedback`, but returns what arrived and a failure per missing servo.

        Servos that did not answer are asked again (one SYNC_READ for all of them) up to ``retries``
        times (default :attr:`retries`; 0 for a single probe), and only while a retry's deadline still
        ends within ``budget_s`` of the call (a control cycle's share of its period; None: no limit).
        Replies with error bits are kept (``Feedback.error``): they carry data.
        ``goals`` (servo id → Goal_Position): their SYNC_WRITE goes out in the same port write, just
        before the first SYNC_READ (the driver's cycle: one wake-up of the line instead of two).
        """
        port = self._require_port()
        feedback: dict[int, Feedback] = {}
        missing = list(dict.fromkeys(ids))
        corrupt = 0
        tries = 0
        max_retries = self.retries if retries is None else retries
        prefix = _sync_write_packet(Register.Goal_Position, goals) if goals else b""
        allowance_ms = self.reply_allowance_ms()
        until = None if budget_s is None else time.monotonic() + budget_s
        with self._lock:
            if time.monotonic() < self._late_until:
                drain_until_quiet(port, self._late_until, self.reply_gap_ms / 1000.0)
            while missing and tries <= max_retries:
                if tries and until is not None:  # a retry must end in time, or it is not worth starting
                    left_ms = 1000.0 * (until - time.monotonic()) - self._timeout_s(
                        len(missing) * (_STATUS_OVERHEAD + _FB_LEN), 0.0) * 1000.0
                    if left_ms <= 1.0:  # less than a reply's latency on any adapter
                        break
                    allowance_ms = min(allowance_ms, left_ms)
                tries += 1
                self.counters.transactions += 1
                self.counters.retries += tries > 1
                with os_errors_as_port_errors(self.port, "sync read"):
                    replies, corrupt, latency_s = self._sync_read_once(port, missing, prefix, allowance_ms)
                if latency_s is not None:
                    allowance_ms = min(allowance_ms, 2000.0 * latency_s + self.reply_gap_ms)
                    if tries == 1:
                        usual = self.usual_latency_s
                        self.usual_latency_s = latency_s if usual is None else usual + _LATENCY_WEIGHT * (latency_s - usual)
                self.counters.corrupt += corrupt
                prefix = b""
                for servo_id, (data, error) in replies.items():
                    feedback[servo_id] = Feedback.from_block(data, error)
                    self.last_error[servo_id] = error
                missing = [i for i in missing if i not in replies]
                self.counters.timeouts += len(missing)
                if missing:
                    self.log.debug("sync read: no reply from %s (try %d/%d, %d corrupt packets)",
                                 missing, tries, max_retries + 1, corrupt)
            if not self._silent.issuperset(missing):  # a servo that answered until now may still: waited out next
                self._late_until = time.monotonic() + allowance_ms / 1000.0
            self._silent = (self._silent | set(missing)) - set(feedback)
        failures: dict[int, BusError] = {}
        for servo_id in missing:
            failures[servo_id] = (CorruptPacket(servo_id, tries, "sync read of the feedback block") if corrupt
                                  else BusTimeout(servo_id, tries, "sync read of the feedback block"))
        return feedback, failures

    def _sync_read_once(self, port: Any, ids: Sequence[int], prefix: bytes, allowance_ms: float,
                        ) -> tuple[dict[int, tuple[bytes, int]], int, float | None]:
        """One SYNC_READ: the replies that came, the malformed packet count, the first byte's latency (s)."""
        request = prefix + protocol.encode_instruction(protocol.BROADCAST_ID, protocol.Instruction.SYNC_READ,
                                                       bytes((_FB_ADDR, _FB_LEN, *ids)))
        discard_input(port)
        if port.writePort(request) != len(request):
            raise PortError(f"sync read: {len(request)}-byte request not written")
        wanted = set(ids)
        reply_bytes = len(ids) * (_STATUS_OVERHEAD + _FB_LEN)
        sent = time.monotonic()
        deadline = sent + self._timeout_s(reply_bytes, allowance_ms)
        first_byte: float | None = None
        replies: dict[int, tuple[bytes, int]] = {}
        parser = protocol.PacketParser("status")
        gap = self.reply_gap_ms / 1000.0
        last_rx: float | None = None  # once replies flow, a quiet line means the rest are not coming

        def take(chunk: bytes) -> None:
            for packet in parser.feed(chunk):
                if isinstance(packet, protocol.StatusPacket) and packet.servo_id in wanted and len(packet.params) >= _FB_LEN:
                    replies[packet.servo_id] = (bytes(packet.params[:_FB_LEN]), packet.error)
                    wanted.discard(packet.servo_id)

        while wanted and (remaining := deadline - time.monotonic()) > 0:
            wait = remaining if last_rx is None else min(remaining, last_rx + gap - time.monotonic())
            if wait <= 0:
                break
            chunk = read_available(port, wait)
            if chunk:
                last_rx = time.monotonic()
                first_byte = first_byte if first_byte is not None else last_rx - sent
            take(chunk)
        if wanted:
            # One look without waiting: this process may have been off the CPU past the deadline or the gap while
            # the replies came in time; they are in the port's buffer, not late.
            take(read_available(port, 0.0))
        return replies, _corrupt_count(parser), first_byte

    # --- discovery ------------------------------------------------------------------------------

    def broadcast_ping(self) -> tuple[dict[int, int], int]:
        """PING to 0xFE; returns ``({id: error byte}, corrupt packet count)`` of the answers."""
        port = self._require_port()
        with self._lock, os_errors_as_port_errors(self.port, "broadcast ping"):
            discard_input(port)
            port.writePort(protocol.encode_instruction(protocol.BROADCAST_ID, protocol.Instruction.PING, b""))
            # every possible id answers 6 bytes; stop early once the line stays quiet for a while
            deadline = time.monotonic() + self._timeout_s(_STATUS_OVERHEAD * scs.MAX_ID)
            quiet = max(0.005, 30 * port.tx_time_per_byte / 1000.0)
            parser = protocol.PacketParser("status")
            found: dict[int, int] = {}

            def take(chunk: bytes) -> None:
                for reply in parser.feed(chunk):
                    if isinstance(reply, protocol.StatusPacket):
                        found[reply.servo_id] = reply.error

            last_rx = time.monotonic()
            while (now := time.monotonic()) < deadline:
                if found and now - last_rx > quiet:
                    break
                chunk = read_available(port, min(deadline - now, quiet))
                if chunk:
                    last_rx = time.monotonic()
                take(chunk)
            # what came while this process was off the CPU past the quiet or the deadline (as in a sync read)
            take(read_available(port, 0.0))
        return dict(sorted(found.items())), _corrupt_count(parser)

    def scan(self, ids: Iterable[int] = range(scs.MAX_ID + 1), baudrates: Iterable[int] | None = None,
             broadcast: bool = True) -> list[ScanResult]:
        """Find servos at each baud rate (default: all STS rates, current first).

        A broadcast PING finds every servo at once; each id in ``ids`` is pinged on its own when
        ``broadcast`` is False or when the broadcast answers collided (corrupt packets). The port is
        left at the first baud rate where servos were found (or the original rate).
        """
        original = self.baudrate
        rates = list(baudrates) if baudrates is not None else [original, *(b for b in BAUD_RATES.values() if b != original)]
        ids = list(ids)
        results: list[ScanResult] = []
        for baud in rates:
            if self._require_port().getCFlagBaud(baud) <= 0:  # e.g. 76800 (STS index 5): pyserial via the SDK refuses it
                self.log.debug("scan: %d baud is not supported by the SDK's port handler; skipped", baud)
                continue
            self.set_baudrate(baud)
            found: dict[int, int] = {}
            corrupt = 0
            if broadcast:
                answers, corrupt = self.broadcast_ping()
                found = {i: e for i, e in answers.items() if i in ids}
            if not broadcast or corrupt:
                found.update(self._ping_each(ids))
            for servo_id in sorted(found):
                results.append(self._describe_servo(servo_id, baud, found[servo_id]))
            self.log.debug("scan at %d baud: %s", baud, sorted(found) or "nothing")
        found_rates = [r.baudrate for r in results]
        self.set_baudrate(found_rates[0] if found_rates else original)
        return results

    def _ping_each(self, ids: Iterable[int]) -> dict[int, int]:
        found: dict[int, int] = {}
        for i in ids:
            with contextlib.suppress(BusError):
                self.ping(i)
                found[i] = self.last_error.get(i, 0)
        return found

    def _describe_servo(self, servo_id: int, baud: int, error: int) -> ScanResult:
        try:
            model = self.read(Register.Model_Number, servo_id, strict=False)
            major = self.read(Register.Firmware_Major_Version, servo_id, strict=False)
            minor = self.read(Register.Firmware_Minor_Version, servo_id, strict=False)
            firmware = f"{major}.{minor}"
        except BusError as err:
            self.log.debug("servo %d answered PING but not READ: %s", servo_id, err)
            model, firmware = -1, "?"
        return ScanResult(servo_id, model, firmware, baud, error)

    # --- helpers --------------------------------------------------------------------------------

    def reply_allowance_ms(self) -> float:
        """How long a reply may take beyond its wire time: ``timeout_ms``, or twice the bus's usual latency plus
        ``reply_gap_ms`` where that is longer (a reply held up a few ms behind a slow adapter is late, not lost)."""
        if self.usual_latency_s is None:
            return self.timeout_ms
        return max(self.timeout_ms, 2000.0 * self.usual_latency_s + self.reply_gap_ms)

    @contextlib.contextmanager
    def patient(self, retries: int = DEFAULT_RETRIES) -> Iterator[None]:
        """LeRobot's deadline (:data:`DEFAULT_TIMEOUT_MS`) and ``retries`` for the block where the bus's own are
        shorter: work that is not timed (configuring the servos, the first read, torque at start, a preflight's
        search for the servos) must not fail behind an adapter slower than the control cycle's deadline."""
        with self._lock:
            saved = self.timeout_ms, self.retries
            self.timeout_ms, self.retries = max(self.timeout_ms, DEFAULT_TIMEOUT_MS), max(self.retries, retries)
            try:
                yield
            finally:
                self.timeout_ms, self.retries = saved

    def _timeout_s(self, reply_bytes: int, allowance_ms: float | None = None) -> float:
        """LeRobot's packet timeout for ``reply_bytes`` of replies, in seconds (wire time + ``timeout_ms``)."""
        tx_ms = self._port.tx_time_per_byte if self._port is not None else 0.01
        return (tx_ms * (reply_bytes + 3) + (self.timeout_ms if allowance_ms is None else allowance_ms)) / 1000.0


def _patched_set_packet_timeout(bus: FeetechBus) -> Callable[[Any, int], None]:
    def set_packet_timeout(port: Any, packet_length: int) -> None:  # the SDK's name is setPacketTimeout
        port.packet_start_time = port.getCurrentTime()
        port.packet_timeout = port.tx_time_per_byte * (packet_length + 3) + bus.reply_allowance_ms()

    return set_packet_timeout


def _sync_write_packet(register: Register, values: Mapping[int, int]) -> bytes:
    """A SYNC_WRITE of ``register`` for ``values`` (servo id → value), ready for the wire."""
    params = bytearray((register.address, register.size))
    for servo_id, value in values.items():
        params.append(int(servo_id))
        params += encode_register(register, int(value))
    return protocol.encode_instruction(protocol.BROADCAST_ID, protocol.Instruction.SYNC_WRITE, params)


def _corrupt_count(parser: protocol.PacketParser) -> int:
    """Malformed replies seen: bad checksums or lengths, or a reply cut short at the deadline."""
    return parser.bad_checksums + parser.bad_lengths + (1 if parser.pending else 0)


def _describe(handler: Any, comm: int, error: int) -> str:
    if comm != scs.COMM_SUCCESS:
        return handler.getTxRxResult(comm)
    return "error bits " + (", ".join(b.name for b in decode_error_bits(error)) or f"0x{error:02X}")
