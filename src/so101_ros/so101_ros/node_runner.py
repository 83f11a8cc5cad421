"""The one ``main()`` body of every workspace node: init, spin, clean shutdown, exit code.

Imported only by node modules (it imports rclpy when called), so the rest of this package stays
ROS-free.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["run_node"]


def run_node(factory: Callable[[], Any], args: Sequence[str] | None, name: str,
             fatal: tuple[type[BaseException], ...] = (), spin: Callable[[Any], None] | None = None,
             on_exit: Callable[[Any], None] | None = None) -> int:
    """Build the node with ``factory`` and spin it until Ctrl-C, SIGTERM or ``rclpy`` shutdown.

    ``fatal`` errors (bad parameters, a model that does not fit, a port that does not open) are
    printed once as ``<name>: error: ...`` and give exit code 1; an error raised by a callback that the
    shutdown or a Ctrl-C interrupted ends the node quietly (exit code 0); anything else propagates with its
    traceback. ``spin`` replaces ``rclpy.spin`` (e.g. spin until a job is done); ``on_exit`` runs
    before the node is destroyed (e.g. close a file it was writing).
    """
    import rclpy
    from rclpy.executors import ExternalShutdownException

    interrupted = threading.Event()
    restore = _note_ctrl_c(interrupted)  # before rclpy.init, whose own handler chains to it
    rclpy.init(args=list(args) if args is not None else None)
    node = None
    try:
        node = factory()
        (spin or rclpy.spin)(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except fatal as err:
        print(f"{name}: error: {err}", file=sys.stderr, flush=True)
        return 1
    except Exception:
        # A shutdown under a callback that is running (a timer mid-publish: "publisher's context is invalid"), or a
        # Ctrl-C that landed inside a call into rclpy's C++ (pybind11 turns the KeyboardInterrupt it meets while
        # converting the call's arguments into "Unable to convert call argument '0' to Python object"): that is
        # the node stopping as asked, not an error to print a traceback for.
        if rclpy.ok() and not interrupted.is_set():
            raise
    finally:
        if node is not None:
            if on_exit is not None:
                on_exit(node)
            node.destroy_node()
        rclpy.try_shutdown()
        restore()
    return 0


def _note_ctrl_c(interrupted: threading.Event) -> Callable[[], None]:
    """Ctrl-C still raises KeyboardInterrupt and also sets ``interrupted``, so an error it caused on its way is
    known as the interruption it is. Returns what puts the previous handler back. Nothing changes outside the main
    thread (the only one that may set a handler) or where Ctrl-C does not raise KeyboardInterrupt (ignored, as in
    a shell's background job, or handled by the program)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:
        return lambda: None

    def on_ctrl_c(signum: int, frame: Any) -> None:
        interrupted.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_ctrl_c)

    def restore() -> None:
        signal.signal(signal.SIGINT, previous)
    return restore
