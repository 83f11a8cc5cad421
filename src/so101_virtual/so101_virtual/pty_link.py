"""A pseudo-terminal that behaves like the SO-101's USB-serial adapter, served by a BusServer.

``PtyLink(server, link_path)`` opens a pty pair, puts the slave in raw mode without echo (an echoed
instruction would look like a status packet to the client), keeps the slave open on the server side
(so the master never sees a hang-up when the client closes and reopens the port), optionally points
a symlink at the slave (``/tmp/so101_follower`` → ``/dev/pts/N``), and serves the bus in a background
thread: it reads the master with ``select``, frames instructions with
:class:`~so101_feetech.protocol.PacketParser` and writes each reply when it is due
(:class:`~so101_virtual.bus_server.BusTiming`; the replies to one request leave together when the
last one is due, so nothing arrives early and there is one wake-up per request). The client opens :attr:`PtyLink.device_path` (or the
link) with ``scservo_sdk.PortHandler`` like a real port.

The line speed the client set on the port (``PortHandler.setBaudRate`` → termios) is read back on
every request and given to the server, so only servos at that baud rate hear it.

A partial packet that gets no new byte for ``inter_byte_timeout`` seconds is abandoned, like the
servo's receive timeout, so one corrupt length byte cannot stall the bus.
"""

from __future__ import annotations

import array
import fcntl
import logging
import os
import select
import struct
import termios
import threading
import time
import tty

from so101_feetech.protocol import Packet, PacketParser

from .bus_server import BusServer

__all__ = ["PtyLink", "line_speed"]

log = logging.getLogger(__name__)

_TCGETS2 = 0x802C542A  # Linux: struct termios2 (44 bytes), c_ospeed at offset 40
_SLEEP_MARGIN = 150e-6  # below this a reply is written at once rather than slept for


def line_speed(fd: int) -> int | None:
    """The output baud rate set on a tty (Linux ``TCGETS2``, any rate), None when unknown."""
    try:
        buf = array.array("B", bytes(44))
        fcntl.ioctl(fd, _TCGETS2, buf, True)
        speed = struct.unpack_from("I", buf, 40)[0]
        return speed or None
    except OSError:
        return None


class PtyLink:
    """Serve ``server`` on a new pty (see the module docstring). Context manager; :meth:`close` stops
    the thread, closes both ends and removes the symlink."""

    def __init__(
        self,
        server: BusServer,
        link_path: str | None = None,
        *,
        honour_baud: bool = True,
        inter_byte_timeout: float = 0.02,
    ) -> None:
        self.server = server
        self.link_path = link_path
        self.honour_baud = honour_baud
        self.inter_byte_timeout = inter_byte_timeout
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave, termios.TCSANOW)
        attrs = termios.tcgetattr(self._slave)
        attrs[3] &= ~(termios.ECHO | termios.ECHONL | termios.ICANON)
        termios.tcsetattr(self._slave, termios.TCSANOW, attrs)
        self.device_path = os.ttyname(self._slave)
        os.set_blocking(self._master, False)
        self._wake_r, self._wake_w = os.pipe()
        self._stop = threading.Event()
        self.parser = PacketParser("instruction")
        self.lost_bytes = 0  # reply bytes dropped because the client's input buffer was full
        self._line_free = 0.0  # monotonic time the line is free again (last request/reply on the wire)
        if link_path is not None:
            self._make_link(link_path)
        self._thread = threading.Thread(target=self._serve, name=f"pty-bus {self.device_path}", daemon=True)
        self._thread.start()
        log.info("virtual bus on %s%s", self.device_path, f" (link {link_path})" if link_path else "")

    @property
    def path(self) -> str:
        """The path a client should open: the symlink when there is one, else the device."""
        return self.link_path or self.device_path

    def _make_link(self, link_path: str) -> None:
        if os.path.islink(link_path):
            os.unlink(link_path)
        elif os.path.exists(link_path):
            raise FileExistsError(f"{link_path} exists and is not a symlink; not replacing it")
        os.symlink(self.device_path, link_path)

    # ----------------------------------------------------------------- serving
    def _serve(self) -> None:
        master = self._master
        last_byte = time.monotonic()
        try:
            while not self._stop.is_set():
                timeout = self.inter_byte_timeout if self.parser.pending else 0.5
                ready, _, _ = select.select([master, self._wake_r], [], [], timeout)
                if self._wake_r in ready:
                    break
                if master not in ready:
                    if self.parser.pending and time.monotonic() - last_byte >= self.inter_byte_timeout:
                        self._answer(self.parser.resync(), time.monotonic())
                    continue
                try:
                    data = os.read(master, 4096)
                except BlockingIOError:
                    continue
                except OSError as err:  # EIO: no slave open (cannot happen while we hold it)
                    log.debug("pty read: %s", err)
                    time.sleep(0.01)
                    continue
                now = time.monotonic()
                last_byte = now
                self._answer(self.parser.feed(data), now)
        except Exception:  # pragma: no cover - logged, the link stays closed
            log.exception("virtual bus thread on %s died", self.device_path)

    def _answer(self, packets: list[Packet], received: float) -> None:
        if not packets:
            return
        host_baud = line_speed(self._slave) if self.honour_baud else None
        for packet in packets:
            # Half-duplex line: a request the host queued behind another one (e.g. SYNC_READ right
            # after a SYNC_WRITE, which has no reply) starts on the wire when the line is free.
            start = max(received, self._line_free)
            replies = self.server.process(packet, host_baud)  # type: ignore[arg-type]
            wire = self.server.timing.wire_time(len(packet.params) + 6, host_baud or 1_000_000)
            self._line_free = start + max([wire, *(r.due for r in replies)])
            if replies:
                # One wake-up per request: the replies go out together when the last one is due.
                # No byte arrives early, and a SYNC_READ completes when it would on the wire;
                # one sleep instead of one per reply keeps the cost low on a busy machine.
                self._write_at(start + replies[-1].due, b"".join(r.data for r in replies))

    def _write_at(self, due: float, data: bytes) -> None:
        delay = due - time.monotonic()
        if delay > _SLEEP_MARGIN:
            time.sleep(delay)
        try:
            written = os.write(self._master, data)
        except BlockingIOError:
            written = 0
        if written < len(data):  # nobody reads the port and its buffer is full: lost, as on a wire
            self.lost_bytes += len(data) - written
            log.debug("pty full: %d reply byte(s) lost", len(data) - written)

    # ----------------------------------------------------------------- life cycle
    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=5)
        for fd in (self._master, self._slave, self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.link_path is not None and os.path.islink(self.link_path):
            try:
                if os.readlink(self.link_path) == self.device_path:
                    os.unlink(self.link_path)
            except OSError:
                pass

    def __enter__(self) -> PtyLink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
