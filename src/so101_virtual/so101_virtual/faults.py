"""Faults injected into the virtual bus, settable at run time (thread-safe).

:class:`FaultInjector` is consulted by :class:`so101_virtual.bus_server.BusServer` for every reply
and read by the physics side for the electrical faults:

* ``drop_next(n)`` / ``drop_fraction(p)``: replies lost on the wire (the servo still executed the
  instruction) → the client sees a timeout (``COMM_RX_TIMEOUT``);
* ``corrupt_next(n)`` / ``corrupt_fraction(p)``: replies with a wrong checksum → ``COMM_RX_CORRUPT``;
* ``unplug(id)`` / ``plug(id)``: the servo is off the bus: it neither hears nor answers anything;
* ``force_error_bits(id, bits)``: bits OR-ed into the status byte of that servo's replies and into
  its ``Status`` register as the host reads it (bit 0 voltage, 2 overheat, 5 overload, ...);
* ``set_voltage_sag(volts, id=None)``: supply sag, data for the physics side
  (:meth:`FaultInjector.voltage_sag`) which lowers ``Present_Voltage`` and the available torque;
* ``set_extra_latency(seconds)``: added to every reply's delay (a slow adapter or hub);
* ``heat(id, celsius)``: that servo's winding is at ``celsius`` from the next physics step on (a servo hot from
  earlier work, or in a hot enclosure); the physics side takes it once (:meth:`FaultInjector.take_heat`) and the
  winding then cools by the servo's thermal model;
* ``clear()``: all of the above back to normal (a heated servo keeps cooling from where it is).

From outside the process (``so101 virtual-bus --faults-socket PATH``),
:class:`FaultControlServer` serves the same operations as JSON lines on a UNIX socket; see its
docstring for the commands, and :func:`send_fault_command` for a client.
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import socketserver
import threading
from collections.abc import Iterable
from typing import Any

__all__ = ["FaultInjector", "FaultControlServer", "send_fault_command", "FaultCommandError"]

log = logging.getLogger(__name__)


class FaultInjector:
    """Run-time faults for the virtual bus (see the module docstring)."""

    def __init__(self, seed: int | None = 0) -> None:
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self.dropped = 0  # replies dropped so far (for tests and benchmarks: the truth a client's counts meet)
        self.corrupted = 0  # replies sent with a wrong checksum so far
        self.clear()

    # ----------------------------------------------------------------- setters
    def clear(self) -> None:
        with self._lock:
            self._drop_next = 0
            self._drop_fraction = 0.0
            self._corrupt_next = 0
            self._corrupt_fraction = 0.0
            self._unplugged: set[int] = set()
            self._error_bits: dict[int, int] = {}
            self._sag_all = 0.0
            self._sag: dict[int, float] = {}
            self._extra_latency = 0.0
            self._heat: dict[int, float] = {}

    def drop_next(self, count: int = 1) -> None:
        with self._lock:
            self._drop_next = _non_negative_int(count, "count")

    def drop_fraction(self, fraction: float) -> None:
        with self._lock:
            self._drop_fraction = _fraction(fraction)

    def corrupt_next(self, count: int = 1) -> None:
        with self._lock:
            self._corrupt_next = _non_negative_int(count, "count")

    def corrupt_fraction(self, fraction: float) -> None:
        with self._lock:
            self._corrupt_fraction = _fraction(fraction)

    def unplug(self, servo_id: int) -> None:
        with self._lock:
            self._unplugged.add(int(servo_id))

    def plug(self, servo_id: int) -> None:
        with self._lock:
            self._unplugged.discard(int(servo_id))

    def force_error_bits(self, servo_id: int, bits: int) -> None:
        """Status bits forced on for ``servo_id`` (0 clears them)."""
        bits = int(bits)
        if not 0 <= bits <= 0x7F:
            raise ValueError(f"error bits {bits:#x} out of range 0..0x7f")
        with self._lock:
            if bits:
                self._error_bits[int(servo_id)] = bits
            else:
                self._error_bits.pop(int(servo_id), None)

    def set_voltage_sag(self, volts: float, servo_id: int | None = None) -> None:
        """Supply sag in volts, for every servo (``servo_id=None``) or one of them."""
        volts = float(volts)
        if not 0.0 <= volts < 100.0:
            raise ValueError(f"voltage sag {volts} V out of range")
        with self._lock:
            if servo_id is None:
                self._sag_all = volts
            else:
                self._sag[int(servo_id)] = volts

    def set_extra_latency(self, seconds: float) -> None:
        seconds = float(seconds)
        if not 0.0 <= seconds <= 1.0:
            raise ValueError(f"extra latency {seconds} s out of range 0..1")
        with self._lock:
            self._extra_latency = seconds

    def heat(self, servo_id: int, celsius: float) -> None:
        """Set ``servo_id``'s winding temperature to ``celsius`` at the next physics step."""
        celsius = float(celsius)
        if not -20.0 <= celsius <= 150.0:
            raise ValueError(f"temperature {celsius} °C out of range -20..150")
        with self._lock:
            self._heat[int(servo_id)] = celsius

    # ----------------------------------------------------------------- queries
    def is_unplugged(self, servo_id: int) -> bool:
        with self._lock:
            return servo_id in self._unplugged

    def unplugged(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self._unplugged)

    def error_bits(self, servo_id: int) -> int:
        with self._lock:
            return self._error_bits.get(servo_id, 0)

    def voltage_sag(self, servo_id: int | None = None) -> float:
        """Volts to subtract from the supply seen by ``servo_id`` (or the bus-wide sag)."""
        with self._lock:
            return self._sag_all + (self._sag.get(servo_id, 0.0) if servo_id is not None else 0.0)

    def take_heat(self) -> dict[int, float]:
        """The pending :meth:`heat` requests (servo id → °C), handed to the physics once."""
        with self._lock:
            pending, self._heat = self._heat, {}
            return pending

    @property
    def extra_latency(self) -> float:
        with self._lock:
            return self._extra_latency

    def reply_fate(self) -> str:
        """For one reply about to be sent: ``"drop"``, ``"corrupt"`` or ``"ok"`` (consumes counts)."""
        with self._lock:
            fate = self._fate()
            self.dropped += fate == "drop"
            self.corrupted += fate == "corrupt"
            return fate

    def _fate(self) -> str:
        if self._drop_next:
            self._drop_next -= 1
            return "drop"
        if self._drop_fraction and self._rng.random() < self._drop_fraction:
            return "drop"
        if self._corrupt_next:
            self._corrupt_next -= 1
            return "corrupt"
        if self._corrupt_fraction and self._rng.random() < self._corrupt_fraction:
            return "corrupt"
        return "ok"

    def state(self) -> dict[str, Any]:
        """Everything set, as plain data (for the control socket and logs)."""
        with self._lock:
            return {
                "drop_next": self._drop_next,
                "drop_fraction": self._drop_fraction,
                "corrupt_next": self._corrupt_next,
                "corrupt_fraction": self._corrupt_fraction,
                "unplugged": sorted(self._unplugged),
                "error_bits": {str(k): v for k, v in sorted(self._error_bits.items())},
                "voltage_sag": self._sag_all,
                "voltage_sag_per_servo": {str(k): v for k, v in sorted(self._sag.items())},
                "extra_latency": self._extra_latency,
                "heat_pending": {str(k): v for k, v in sorted(self._heat.items())},
            }


def _non_negative_int(value: Any, name: str) -> int:
    value = int(value)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, not {value}")
    return value


def _fraction(value: Any) -> float:
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"fraction must be within 0..1, not {value}")
    return value


# --------------------------------------------------------------------------- control socket
class FaultCommandError(RuntimeError):
    """A fault command was refused by the control server."""


def _apply(faults: FaultInjector, command: dict[str, Any]) -> dict[str, Any]:
    op = command.get("op")
    ids: Iterable[int]
    if op == "clear":
        faults.clear()
    elif op == "state":
        pass
    elif op == "drop_next":
        faults.drop_next(command.get("count", 1))
    elif op == "drop_fraction":
        faults.drop_fraction(command["fraction"])
    elif op == "corrupt_next":
        faults.corrupt_next(command.get("count", 1))
    elif op == "corrupt_fraction":
        faults.corrupt_fraction(command["fraction"])
    elif op in ("unplug", "plug"):
        ids = command["ids"] if "ids" in command else [command["id"]]
        for servo_id in ids:
            (faults.unplug if op == "unplug" else faults.plug)(int(servo_id))
    elif op == "error_bits":
        faults.force_error_bits(int(command["id"]), int(command["bits"]))
    elif op == "voltage_sag":
        servo_id = command.get("id")
        faults.set_voltage_sag(command["volts"], None if servo_id is None else int(servo_id))
    elif op == "extra_latency":
        faults.set_extra_latency(command["seconds"])
    elif op == "heat":
        faults.heat(int(command["id"]), command["celsius"])
    else:
        raise ValueError(f"unknown op {op!r}")
    return {"ok": True, "state": faults.state()}


class FaultControlServer:
    """Serves a :class:`FaultInjector` on a UNIX stream socket at ``path``, one JSON object per line.

    Requests (each answered by one line ``{"ok": true, "state": {...}}`` or
    ``{"ok": false, "error": "..."}``)::

        {"op": "state"}                              {"op": "clear"}
        {"op": "drop_next", "count": 3}              {"op": "drop_fraction", "fraction": 0.1}
        {"op": "corrupt_next", "count": 1}           {"op": "corrupt_fraction", "fraction": 0.05}
        {"op": "unplug", "id": 3}                    {"op": "plug", "ids": [3, 4]}
        {"op": "error_bits", "id": 2, "bits": 32}    {"op": "voltage_sag", "volts": 2.5[, "id": 1]}
        {"op": "extra_latency", "seconds": 0.002}    {"op": "heat", "id": 4, "celsius": 65}

    Try it with ``echo '{"op":"unplug","id":3}' | socat - UNIX-CONNECT:PATH`` or
    :func:`send_fault_command`. A stale socket file at ``path`` is replaced; the file is removed on
    :meth:`close`. Context manager.
    """

    def __init__(self, faults: FaultInjector, path: str) -> None:
        self.faults = faults
        self.path = str(path)
        if os.path.exists(self.path):
            if not _is_socket(self.path):
                raise FileExistsError(f"{self.path} exists and is not a socket")
            os.unlink(self.path)
        injector = faults

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                for line in self.rfile:
                    if not line.strip():
                        continue
                    try:
                        command = json.loads(line)
                        if not isinstance(command, dict):
                            raise ValueError("a command is a JSON object")
                        reply = _apply(injector, command)
                        log.info("fault command %s", command)
                    except (ValueError, KeyError, TypeError) as err:
                        reply = {"ok": False, "error": f"{type(err).__name__}: {err}"}
                    self.wfile.write((json.dumps(reply) + "\n").encode())
                    self.wfile.flush()

        self._server = socketserver.ThreadingUnixStreamServer(self.path, Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name="fault-control", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def __enter__(self) -> FaultControlServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_socket(path: str) -> bool:
    import stat

    return stat.S_ISSOCK(os.stat(path).st_mode)


def send_fault_command(path: str, command: dict[str, Any], timeout: float = 5.0) -> dict[str, Any]:
    """Send one command to a :class:`FaultControlServer`; returns the fault state after it.
    Raises :class:`FaultCommandError` when the server refuses the command."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall((json.dumps(command) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    reply = json.loads(data)
    if not reply.get("ok"):
        raise FaultCommandError(f"fault command {command} refused: {reply.get('error')}")
    return reply["state"]
