"""One STS3215's control table as state: what the host reads and writes, what the firmware updates.

Two sides use a :class:`ServoMemory`:

* the **host side** (the bus server) calls :meth:`ServoMemory.read` / :meth:`ServoMemory.write`, which
  follow the servo's rules (read-only registers are not writable, the EEPROM lock, ID/baud checks,
  ``Torque_Enable = 128`` calibrates the mid position);
* the **firmware side** (physics, firmware model) calls :meth:`ServoMemory.set_encoder`,
  :meth:`ServoMemory.set_feedback`, :meth:`ServoMemory.get` / :meth:`ServoMemory.set`, which bypass
  those rules.

``memory.lock`` (a re-entrant lock) guards the table: every method takes it, and a caller that needs
several registers to be consistent with each other holds it around the calls (``with memory.lock:``).

Behaviour chosen where the real servo is under-documented (documented here, tested in
``test/test_bus_server*.py``):

* **EEPROM lock.** Feetech's memory table describes ``Lock`` (55) as the EEPROM *save* lock: with
  ``Lock = 0`` a write to an EEPROM register is stored and survives a power cycle; with ``Lock = 1``
  the write still takes effect in the running table but is lost at the next power cycle (users who
  change an ID without unlocking see it revert after power-off). That is what this class does by
  default: :meth:`power_cycle` restores the EEPROM area from its last saved image. With
  ``strict_eeprom_lock=True`` locked EEPROM writes are ignored altogether, which makes a client that
  forgets to unlock fail loudly in tests instead of losing its settings at the next power-up.
* **Lock at power-up** is 0 (unlocked), matching the Feetech SDK examples that only lock after a
  configuration; LeRobot writes ``Lock`` explicitly on every torque change anyway.
* **Read-only registers** (and addresses no register uses) ignore host writes without an error,
  like the servo; a read of an unused address returns 0.
* ``ID`` accepts 0..253, ``Baud_Rate`` 0..7; other values are ignored.
* ``Torque_Enable = 128`` sets ``Homing_Offset`` so the present position reads 2048, saves it
  (whatever the lock) and leaves torque off.
* ``Present_Position = (actual − Homing_Offset) mod 4096`` (single-turn); the firmware side sets the
  actual encoder reading with :meth:`set_encoder`, a ``Homing_Offset`` write updates it at once.

The physics posts every servo's feedback each firmware pass (1 kHz) with :meth:`ServoMemory.post_feedback`, which only
keeps the values; they are rounded, encoded and written into the table when the table is next looked at (a host read,
:meth:`~ServoMemory.get`, :meth:`~ServoMemory.snapshot`, any write). The host reads at the bus's rate (100 Hz): encoding
every pass was a third of the arm's cost, and what a read returns is the same (the latest pass's values).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any, cast

from so101_feetech.control_table import (
    FEEDBACK_BLOCK,
    MODEL_NUMBER_STS3215,
    TABLE_SIZE,
    Area,
    Register,
    decode_register,
    decode_sign_magnitude,
    encode_register,
    encode_sign_magnitude,
)

__all__ = ["ServoMemory", "make_servos", "FACTORY_DEFAULTS", "STEPS_PER_TURN", "EEPROM_END"]

STEPS_PER_TURN = 4096
# Where the firmware side writes, looked up once: the physics writes the feedback of six servos every
# firmware pass (1 kHz), and going through the Register enum for each value was most of its cost.
_FEEDBACK_LAYOUT = tuple((r.address, r.size, r.spec.sign_bit) for r in (
    Register.Present_Velocity, Register.Present_Load, Register.Present_Voltage, Register.Present_Temperature,
    Register.Present_Current))
_HOMING_ADDRESS = Register.Homing_Offset.address
_HOMING_SIGN_BIT = cast(int, Register.Homing_Offset.spec.sign_bit)  # sign-magnitude: never None
_PRESENT_ADDRESS = Register.Present_Position.address
_MOVING_ADDRESS, _STATUS_ADDRESS = Register.Moving.address, Register.Status.address
_FEEDBACK_START, _FEEDBACK_END = FEEDBACK_BLOCK[0], FEEDBACK_BLOCK[0] + FEEDBACK_BLOCK[1]
# the feedback as posted (encoder steps, velocity step/s, load 0.1 %, voltage 0.1 V, °C, current 6.5 mA LSB, moving,
# status; unrounded) and as written into the table (rounded)
_Feedback = tuple[int, float, float, float, float, float, bool, int]
_NOTHING_WRITTEN: tuple[object, ...] = (None,) * 8
# EEPROM occupies addresses 0..EEPROM_END-1 (everything before Torque_Enable).
EEPROM_END = Register.Torque_Enable.address

# Factory values of an STS3215 (12 V version) as shipped, after Feetech's memory table and LeRobot's
# notes (Return_Delay_Time 250 = 500 us, P 32); registers not listed start at 0. Present_Position is
# not listed: it always derives from the encoder reading and Homing_Offset.
FACTORY_DEFAULTS: dict[Register, int] = {
    Register.Firmware_Major_Version: 3,
    Register.Firmware_Minor_Version: 10,
    Register.Model_Number: MODEL_NUMBER_STS3215,
    Register.ID: 1,
    Register.Baud_Rate: 0,  # 1 Mbaud
    Register.Return_Delay_Time: 250,  # 500 us (LeRobot sets 0)
    Register.Response_Status_Level: 1,
    Register.Min_Position_Limit: 0,
    Register.Max_Position_Limit: 4095,
    Register.Max_Temperature_Limit: 70,
    Register.Max_Voltage_Limit: 140,  # 14.0 V
    Register.Min_Voltage_Limit: 40,  # 4.0 V
    Register.Max_Torque_Limit: 1000,
    Register.Phase: 12,
    Register.Unloading_Condition: 44,
    Register.LED_Alarm_Condition: 47,
    Register.P_Coefficient: 32,
    Register.D_Coefficient: 32,
    Register.I_Coefficient: 0,
    Register.Minimum_Startup_Force: 16,
    Register.CW_Dead_Zone: 1,
    Register.CCW_Dead_Zone: 1,
    Register.Protection_Current: 500,
    Register.Angular_Resolution: 1,
    Register.Homing_Offset: 0,
    Register.Operating_Mode: 0,
    Register.Protective_Torque: 20,
    Register.Protection_Time: 200,
    Register.Overload_Torque: 80,
    Register.Torque_Enable: 0,
    Register.Acceleration: 0,
    Register.Goal_Position: 0,
    Register.Goal_Time: 0,
    Register.Goal_Velocity: 0,
    Register.Torque_Limit: 1000,
    Register.Lock: 0,
    Register.Present_Voltage: 120,  # 12.0 V
    Register.Present_Temperature: 25,
    Register.Maximum_Acceleration: 0,
}


def _byte_map() -> tuple[tuple[Area | None, ...], frozenset[int]]:
    areas: list[Area | None] = [None] * TABLE_SIZE
    for reg in Register:
        for addr in range(reg.address, reg.address + reg.size):
            areas[addr] = reg.spec.area
    special = frozenset(
        a
        for reg in (Register.ID, Register.Baud_Rate, Register.Torque_Enable, Register.Homing_Offset)
        for a in range(reg.address, reg.address + reg.size)
    )
    return tuple(areas), special


_AREAS, _SPECIAL = _byte_map()


class ServoMemory:
    """The control table of one STS3215 (see the module docstring for the rules it follows)."""

    def __init__(
        self,
        servo_id: int = 1,
        *,
        overrides: Mapping[Register, int] | None = None,
        strict_eeprom_lock: bool = False,
    ) -> None:
        self.lock = threading.RLock()
        self.strict_eeprom_lock = strict_eeprom_lock
        self._factory = dict(FACTORY_DEFAULTS)
        self._factory.update(overrides or {})
        self._table = bytearray(TABLE_SIZE)
        self._actual = 2048  # encoder reading, 0..4095
        self._posted: _Feedback | None = None  # the firmware's latest feedback (post_feedback)
        self._taken: _Feedback | None = None  # the posted feedback last written into the table
        self._written: tuple[object, ...] = _NOTHING_WRITTEN  # its values as written (rounded)
        # bumped by every change of the registers below the feedback (the settings the firmware reads): the physics
        # reads them again only after one (ArmPhysics._refresh_settings)
        self.settings_version = 0
        self._load_factory()
        self.set(Register.ID, servo_id)
        self._saved_eeprom = bytes(self._table[:EEPROM_END])

    # ----------------------------------------------------------------- identity
    @property
    def servo_id(self) -> int:
        return self._table[Register.ID.address]

    @property
    def baudrate_index(self) -> int:
        return self._table[Register.Baud_Rate.address]

    @property
    def actual_position(self) -> int:
        """The encoder reading before the homing offset (0..4095)."""
        with self.lock:
            self._take_posted()
            return self._actual

    # ----------------------------------------------------------------- host side
    def read(self, address: int, length: int) -> bytes:
        """Bytes as a READ would return them. Raises ``ValueError`` outside the table."""
        if address < 0 or length < 0 or address + length > TABLE_SIZE:
            raise ValueError(f"read of {length} byte(s) at {address} outside the {TABLE_SIZE}-byte table")
        with self.lock:
            if address < _FEEDBACK_END and address + length > _FEEDBACK_START:
                self._take_posted()
            return bytes(self._table[address : address + length])

    def write(self, address: int, data: bytes | bytearray) -> bool:
        """Apply a host WRITE with the servo's rules. Returns False when it falls outside the table
        (the bus server answers that with an instruction error); ignored bytes are not an error."""
        if address < 0 or address + len(data) > TABLE_SIZE:
            return False
        with self.lock:
            self._take_posted()  # a Homing_Offset write or a mid-position calibration reads the latest encoder reading
            self.settings_version += 1
            # Every EEPROM byte lies below Lock (55), so the lock state before the write governs
            # all EEPROM bytes of this write, even when the same packet also writes Lock.
            locked = self._table[Register.Lock.address] != 0
            eeprom_writable = not (locked and self.strict_eeprom_lock)
            touched_special = False
            for offset, value in enumerate(data):
                addr = address + offset
                area = _AREAS[addr]
                if area is None or area is Area.READ_ONLY or (area is Area.EEPROM and not eeprom_writable):
                    continue
                if addr in _SPECIAL:
                    touched_special = True
                else:
                    self._table[addr] = value
            if touched_special:
                self._write_special(address, bytes(data), eeprom_writable)
            if not locked and address < EEPROM_END:
                self._save_eeprom_range(address, len(data))
        return True

    def _save_eeprom_range(self, address: int, length: int) -> None:
        saved = bytearray(self._saved_eeprom)
        end = min(address + length, EEPROM_END)
        saved[address:end] = self._table[address:end]
        self._saved_eeprom = bytes(saved)

    def _write_special(self, address: int, data: bytes, eeprom_writable: bool) -> None:
        """Registers whose write has a side effect or a value check."""

        def written(reg: Register) -> bytes | None:
            # the register's bytes after this write (a partial write merges with the current bytes)
            lo, hi = reg.address, reg.address + reg.size
            if hi <= address or address + len(data) <= lo:
                return None
            cur = bytearray(self._table[lo:hi])
            for a in range(max(lo, address), min(hi, address + len(data))):
                cur[a - lo] = data[a - address]
            return bytes(cur)

        if eeprom_writable:
            if (raw := written(Register.ID)) is not None and raw[0] <= 253:
                self._table[Register.ID.address] = raw[0]
            if (raw := written(Register.Baud_Rate)) is not None and raw[0] <= 7:
                self._table[Register.Baud_Rate.address] = raw[0]
            if (raw := written(Register.Homing_Offset)) is not None:
                addr = Register.Homing_Offset.address
                self._table[addr : addr + 2] = raw
                self._update_present_position()
        if (raw := written(Register.Torque_Enable)) is not None:
            if raw[0] == 128:
                self._calibrate_mid()
            else:
                self._table[Register.Torque_Enable.address] = raw[0]

    def _calibrate_mid(self) -> None:
        offset = max(-2047, self._actual - 2048)  # the 11-bit magnitude cannot hold -2048
        self.set(Register.Homing_Offset, offset)
        self._save_eeprom_range(Register.Homing_Offset.address, 2)
        self._table[Register.Torque_Enable.address] = 0

    # ----------------------------------------------------------------- firmware side
    def get(self, register: Register) -> int:
        """A register's value (sign-magnitude decoded)."""
        addr = register.address
        with self.lock:
            if addr >= _FEEDBACK_START:
                self._take_posted()
            return decode_register(register, self._table[addr : addr + register.size])

    def set(self, register: Register, value: int) -> None:
        """Set a register as the firmware would (no lock/read-only rules). Raises ``ValueError``
        when the value does not fit."""
        raw = encode_register(register, int(value))
        addr = register.address
        with self.lock:
            self._take_posted()
            self.settings_version += 1
            self._table[addr : addr + register.size] = raw
            if register is Register.Homing_Offset:
                self._update_present_position()

    def snapshot(self) -> bytes:
        """A consistent copy of the whole table."""
        with self.lock:
            self._take_posted()
            return bytes(self._table)

    def set_encoder(self, actual_raw: int) -> None:
        """The magnetic encoder's reading (steps, wrapped to 0..4095); updates Present_Position."""
        with self.lock:
            self._take_posted()
            self._set_encoder(actual_raw)

    def _set_encoder(self, actual_raw: int) -> None:
        self._actual = int(actual_raw) % STEPS_PER_TURN
        self._update_present_position()

    def set_feedback(
        self,
        velocity: int | None = None,
        load: int | None = None,
        voltage: int | None = None,
        temperature: int | None = None,
        current: int | None = None,
        moving: int | bool | None = None,
        status: int | None = None,
    ) -> None:
        """Feedback registers in raw units (velocity step/s, load 0.1 %, voltage 0.1 V, °C, current
        6.5 mA LSB; signed values are clamped to what the register holds). ``None`` leaves one as is."""
        with self.lock:
            self._take_posted()
            self._set_feedback(velocity, load, voltage, temperature, current, moving, status)

    def _set_feedback(self, velocity: float | None, load: float | None, voltage: float | None,
                      temperature: float | None, current: float | None, moving: object, status: int | None) -> None:
        table = self._table
        for (address, size, sign_bit), value in zip(
                _FEEDBACK_LAYOUT, (velocity, load, voltage, temperature, current), strict=True):
            if value is not None:
                table[address : address + size] = _clamped_bytes(value, size, sign_bit)
        if moving is not None:
            table[_MOVING_ADDRESS] = 1 if moving else 0
        if status is not None:
            table[_STATUS_ADDRESS] = int(status) & 0xFF

    def post_feedback(self, encoder: int, velocity: float, load: float, voltage: float, temperature: float,
                      current: float, moving: bool, status: int) -> None:
        """The firmware's feedback of its latest pass, unrounded, in :meth:`set_feedback`'s units (``encoder`` as in
        :meth:`set_encoder`): written into the table when it is next looked at, each value only where its rounded
        value changed since the last post written (so a value set by other means stays until the firmware's changes).
        One reference stored, no lock: the firmware pass does not wait for a host read."""
        self._posted = (encoder, velocity, load, voltage, temperature, current, moving, status)

    def _take_posted(self) -> None:
        """Write the feedback posted since the table was last looked at (the caller holds the lock)."""
        posted = self._posted
        if posted is self._taken or posted is None:
            return
        self._taken = posted
        encoder, velocity, load, voltage, temperature, current, moving, status = posted
        values = (encoder, round(velocity), round(load), round(voltage), round(temperature), round(current),
                  bool(moving), status)
        last = self._written
        if encoder != last[0]:
            self._set_encoder(encoder)
        if values[1:] != last[1:]:
            changed = [v if v != o else None for v, o in zip(values[1:], last[1:], strict=True)]
            self._set_feedback(*changed)
        self._written = values

    def _update_present_position(self) -> None:
        table = self._table
        offset = decode_sign_magnitude(table[_HOMING_ADDRESS] | table[_HOMING_ADDRESS + 1] << 8, _HOMING_SIGN_BIT)
        present = (self._actual - offset) % STEPS_PER_TURN
        table[_PRESENT_ADDRESS : _PRESENT_ADDRESS + 2] = present.to_bytes(2, "little")

    # ----------------------------------------------------------------- life cycle
    def _load_factory(self) -> None:
        self._table[:] = bytes(TABLE_SIZE)
        for reg, value in self._factory.items():
            addr = reg.address
            self._table[addr : addr + reg.size] = encode_register(reg, value)
        self._update_present_position()

    def factory_reset(self, keep_id: bool = True) -> None:
        """RESET instruction: factory EEPROM and SRAM (saved), ID kept when ``keep_id``."""
        with self.lock:
            self._take_posted()
            self.settings_version += 1
            servo_id = self.servo_id
            self._load_factory()
            if keep_id:
                self._table[Register.ID.address] = servo_id
            self._saved_eeprom = bytes(self._table[:EEPROM_END])

    def power_cycle(self) -> None:
        """Power off and on: EEPROM from its saved image, SRAM from factory values, feedback kept
        as the firmware last set it (the physics keeps running)."""
        with self.lock:
            self._take_posted()
            self.settings_version += 1
            feedback = bytes(self._table[Register.Present_Position.address : Register.Present_Current.address + 2])
            self._load_factory()
            self._table[:EEPROM_END] = self._saved_eeprom
            start = Register.Present_Position.address
            self._table[start : start + len(feedback)] = feedback
            self._update_present_position()

    @property
    def saved_eeprom(self) -> bytes:
        """The EEPROM image that survives a power cycle."""
        with self.lock:
            return self._saved_eeprom


def _clamped_bytes(value: float, size: int, sign_bit: int | None) -> bytes:
    """A feedback value rounded, clamped to what its register holds and encoded (sign-magnitude when signed)."""
    value = int(round(value))
    if sign_bit is None:
        raw = max(0, min((1 << (8 * size)) - 1, value))
    else:
        limit = (1 << sign_bit) - 1
        raw = encode_sign_magnitude(max(-limit, min(limit, value)), sign_bit)
    return raw.to_bytes(size, "little")


def make_servos(ids: Iterable[int] = range(1, 7), **kwargs: Any) -> dict[int, ServoMemory]:
    """Factory-fresh servos keyed by id (the SO-101's are 1..6); ``kwargs`` go to each ServoMemory."""
    return {servo_id: ServoMemory(servo_id, **kwargs) for servo_id in ids}
