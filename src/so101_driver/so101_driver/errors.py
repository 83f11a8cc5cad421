"""Exceptions of the SO-101 driver package.

``BusError`` is the root of everything the Feetech bus can raise; each concrete error names the
servo and how many tries were made, so a log line alone tells which cable to check.
"""

from __future__ import annotations

from so101_common.rejections import RejectReason, bounded
from so101_feetech.control_table import ErrorBit, decode_error_bits

__all__ = [
    "DriverError",
    "BusError",
    "PortError",
    "LostReply",
    "BusTimeout",
    "CorruptPacket",
    "ServoError",
    "CommandRejected",
]


class DriverError(Exception):
    """Base class of every error this package raises on purpose."""


class BusError(DriverError):
    """The Feetech bus could not complete a transaction."""

    def __init__(self, message: str, servo_id: int | None = None, tries: int = 0) -> None:
        super().__init__(message)
        self.servo_id = servo_id
        self.tries = tries


class PortError(BusError):
    """The serial port could not be opened, configured or written."""


def _lost_message(what: str, who: str, tries: int, detail: str) -> str:
    message = f"{what} from {who} after {tries} tr{'y' if tries == 1 else 'ies'}"
    return f"{message}: {detail}" if detail else message


class LostReply(BusError):
    """A servo's reply did not arrive usable; the subclasses say how."""

    what = "no usable reply"

    def __init__(self, servo_id: int | None, tries: int, detail: str = "") -> None:
        super().__init__(_lost_message(self.what, "the bus" if servo_id is None else f"servo {servo_id}", tries,
                                       detail), servo_id, tries)
        self.detail = detail

    def for_servos(self, servo_ids: list[int]) -> str:
        """The message for several servos lost in one transaction the same way (one log line for all)."""
        return _lost_message(self.what, "servos " + ", ".join(map(str, servo_ids)), self.tries, self.detail)


class BusTimeout(LostReply):
    """A servo did not answer (unplugged, wrong id or baud rate, no power)."""

    what = "no reply"


class CorruptPacket(LostReply):
    """A reply arrived but was malformed (bad checksum, truncated, wrong length)."""

    what = "corrupt reply"


class ServoError(BusError):
    """A servo answered with error bits set in its status byte (voltage, overheat, overload...)."""

    def __init__(self, servo_id: int, tries: int, bits: int, detail: str = "") -> None:
        self.bits = bits
        self.flags: list[ErrorBit] = decode_error_bits(bits)
        names = ", ".join(flag.name for flag in self.flags) or f"unknown bits 0x{bits:02X}"
        message = f"servo {servo_id} reports {names} (status 0x{bits:02X}) after {tries} tr{'y' if tries == 1 else 'ies'}"
        super().__init__(f"{message}: {detail}" if detail else message, servo_id, tries)


class CommandRejected(DriverError):
    """A joint command was refused (NaN, unknown joint, mismatched arrays...): ``reason`` says which rule
    (counted on ``/diagnostics``), the message says how, bounded in length (a 100 kB joint name is not echoed)."""

    def __init__(self, reason: RejectReason, detail: str) -> None:
        super().__init__(bounded(detail))
        self.reason = reason
