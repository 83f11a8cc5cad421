"""How bytes move on the serial port under the SDK: waiting reads, draining stale input, OS errors as
:class:`~so101_driver.errors.PortError` (no protocol knowledge here)."""

from __future__ import annotations

import contextlib
import os
import select
import time
from collections.abc import Iterator
from typing import Any

from so101_driver.errors import PortError

__all__ = ["waiting_read_port", "os_errors_as_port_errors", "discard_input", "read_available"]


def waiting_read_port(port: Any, length: int) -> bytes:
    """The SDK's ``readPort`` (a non-blocking read its receive loop calls back to back), made to
    wait up to 1 ms for data first: the loop no longer spins a CPU core at 100 % while a reply is on
    its way, which on a loaded machine also delayed the kernel work that delivers the reply."""
    ser = port.ser
    if not ser.in_waiting:
        try:
            select.select([ser.fileno()], [], [], 0.001)
        except (AttributeError, OSError, ValueError):  # no fileno (Windows)
            time.sleep(0.0002)
    return ser.read(length)


try:
    from termios import error as _TermiosError  # tcflush/tcdrain on a vanished device (POSIX)
except ImportError:  # pragma: no cover - Windows
    _TermiosError = OSError  # type: ignore[assignment,misc]


@contextlib.contextmanager
def os_errors_as_port_errors(port_name: str, what: str) -> Iterator[None]:
    """A serial failure (adapter unplugged: pyserial's SerialException is an OSError; termios.error
    is not) → PortError."""
    try:
        yield
    except (OSError, _TermiosError) as err:
        raise PortError(f"{what} on {port_name}: {err}") from err


def discard_input(port: Any) -> None:
    """Drop late replies of an earlier transaction so they cannot be taken for this one's."""
    with contextlib.suppress(Exception):
        port.ser.reset_input_buffer()


def drain_until_quiet(port: Any, until: float, quiet_s: float) -> None:
    """Drop what arrives until the monotonic time ``until``, or sooner once a reply came and the line then stayed
    quiet ``quiet_s``: the late reply of a transaction that timed out, which the next transaction would otherwise
    take for its own (a read of another register of the same servo reads the earlier register's value)."""
    heard = False
    while (left := until - time.monotonic()) > 0:
        if not read_available(port, min(left, quiet_s) if heard else left):
            if heard:
                return
            continue
        heard = True


def read_available(port: Any, wait_s: float) -> bytes:
    """What the port holds now, waiting up to ``wait_s`` for the first byte without spinning."""
    ser = port.ser
    try:
        fd = ser.fileno()
    except (AttributeError, ValueError, OSError):  # no file descriptor (Windows): poll pyserial
        if not ser.in_waiting:
            time.sleep(min(max(0.0, wait_s), 0.0005))
        return bytes(ser.read(ser.in_waiting))
    ready, _, _ = select.select([fd], [], [], max(0.0, wait_s))
    if not ready:
        return b""
    try:  # pyserial opens the port non-blocking: take everything there is in one system call
        data = os.read(fd, 4096)
    except BlockingIOError:
        return b""
    if not data:  # readable yet empty: end of file, the device is gone (what pyserial reports the same way)
        raise OSError("device reports readiness to read but returned no data (device disconnected?)")
    return data
