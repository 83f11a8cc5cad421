"""What the bus hands back, as plain data: one servo's decoded feedback block, scan results, fault counts."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from so101_feetech.control_table import FEEDBACK_BLOCK, ErrorBit, Register, decode_error_bits, decode_sign_magnitude

__all__ = ["Feedback", "ScanResult", "BusCounters"]

_FB_ADDR, _FB_LEN = FEEDBACK_BLOCK


def _feedback_layout() -> tuple[struct.Struct, tuple[int | None, ...]]:
    """One ``struct`` for the feedback block, built from the control table (the decode is on the
    control loop's hot path: one unpack instead of eight register look-ups per servo)."""
    fmt, cursor = "<", _FB_ADDR
    for reg in _FB_FIELDS:
        fmt += "x" * (reg.address - cursor) + {1: "B", 2: "H"}[reg.size]
        cursor = reg.address + reg.size
    if cursor != _FB_ADDR + _FB_LEN:
        raise RuntimeError("FEEDBACK_BLOCK and the feedback registers disagree")
    return struct.Struct(fmt), tuple(reg.spec.sign_bit for reg in _FB_FIELDS)


# Feedback's fields, in address order
_FB_FIELDS = (Register.Present_Position, Register.Present_Velocity, Register.Present_Load, Register.Present_Voltage,
              Register.Present_Temperature, Register.Status, Register.Moving, Register.Present_Current)
_FB_STRUCT, _FB_SIGN_BITS = _feedback_layout()


@dataclass(frozen=True)
class Feedback:
    """One servo's feedback block (addresses 56..70), decoded; servo units."""

    position: int  # Present_Position, steps
    velocity: int  # Present_Velocity, steps/s (signed)
    load: int  # Present_Load, 0.1 % of max torque (signed, direction of motion)
    voltage: int  # Present_Voltage, 0.1 V
    temperature: int  # Present_Temperature, °C
    status: int  # Status register (same bits as ErrorBit)
    moving: bool  # Moving
    current: int  # Present_Current, 6.5 mA (signed)
    error: int = 0  # error byte of the status packet that carried it

    @classmethod
    def from_block(cls, data: bytes | bytearray, error: int = 0) -> Feedback:
        if len(data) < _FB_LEN:
            raise ValueError(f"feedback block needs {_FB_LEN} bytes, got {len(data)}")
        values = [decode_sign_magnitude(v, bit) if bit is not None else v
                  for v, bit in zip(_FB_STRUCT.unpack_from(data), _FB_SIGN_BITS, strict=True)]
        values[6] = bool(values[6])  # Moving
        return cls(*values, error=error)  # type: ignore[arg-type,misc]  # mypy cannot count the star-args

    @property
    def voltage_v(self) -> float:
        return self.voltage / 10.0

    @property
    def current_a(self) -> float:
        return self.current * 0.0065

    @property
    def flags(self) -> list[ErrorBit]:
        """Error bits set in the Status register or the reply's error byte."""
        return decode_error_bits(self.status | self.error)


@dataclass
class BusCounters:
    """What went wrong on the bus since it was created (monotonic counts; the driver turns them into rates)."""

    transactions: int = 0  # requests sent (a retry is a new request)
    retries: int = 0  # requests repeated because a reply was missing, malformed or flagged
    timeouts: int = 0  # replies that did not arrive by their deadline (one per servo per request)
    corrupt: int = 0  # malformed replies (bad checksum or length, cut short)

    def snapshot(self) -> BusCounters:
        return BusCounters(self.transactions, self.retries, self.timeouts, self.corrupt)


@dataclass(frozen=True)
class ScanResult:
    servo_id: int
    model: int  # Model_Number (STS3215 = 777)
    firmware: str  # "major.minor"
    baudrate: int
    error: int = 0  # error byte of its PING reply
