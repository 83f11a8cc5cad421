"""Errors of child processes as the one line the user needs (no rclpy).

A child (``so101 virtual-bus``, a node) that fails writes its clear message to its own output, often
after log lines and sometimes after a traceback. :func:`error_line` picks that message out, so the
parent can end with one line naming it (and where the whole log is) instead of its own traceback.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

__all__ = ["ChildProcessFailed", "error_line", "run_child", "raise_for_child"]

_TRACEBACK_LINES = ("Traceback (most recent call last):", "  File ", "    ")


class ChildProcessFailed(RuntimeError):
    """A child process failed; ``str()`` is one line: what failed and the child's own message."""


def error_line(output: str) -> str:
    """The child's message: its last line that says "error", else its last line that is not part of a
    traceback (for an uncaught exception: the ``Type: message`` line); "" for no output."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith(_TRACEBACK_LINES)]
    for line in reversed(lines):
        if "error" in line.lower() or "unknown" in line.lower():
            return line.strip()
    return lines[-1].strip() if lines else ""


def raise_for_child(what: str, returncode: int | None, output: str, log: Path | None = None) -> None:
    """Raise :class:`ChildProcessFailed` for a child that exited with ``returncode`` (None: still running,
    yet failed to do its part) with its message from ``output``. A message in the ``<program>: error: ...`` form
    whose program ``what`` already names (``node so101_driver``) loses that prefix: it would name it twice."""
    message = error_line(output) or (f"exit status {returncode}" if returncode is not None else "no output")
    message = message.removeprefix(f"{what.split()[-1]}: error: ")
    where = f" (log: {log})" if log is not None else ""
    raise ChildProcessFailed(f"{what}: {message}{where}")


def run_child(command: Sequence[str], what: str) -> subprocess.CompletedProcess[str]:
    """Run ``command`` to completion; on a non-zero exit, :class:`ChildProcessFailed` with its message."""
    done = subprocess.run(list(command), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise_for_child(what, done.returncode, done.stderr + "\n" + done.stdout)
    return done
