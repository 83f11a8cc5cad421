"""Why a joint command (or a measured joint state) was not used: one vocabulary for every core that
validates them (the driver, the safety filter), counted on ``/diagnostics`` as ``rejected_<reason>``,
and the bounded text of the log line that says so (a 100 kB joint name is never echoed whole), at most
one line per period however fast they come (:class:`LogThrottle`)."""

from __future__ import annotations

import enum
import time
from collections.abc import Callable

__all__ = ["RejectReason", "DETAIL_LIMIT", "LogThrottle", "bounded", "diagnostic_key"]

DETAIL_LIMIT = 300
"""Characters of a rejection's detail that reach a log line or ``/diagnostics``."""


class RejectReason(enum.Enum):
    """Why a message was not used."""

    EMPTY = "empty"  # no names and no positions
    LENGTH_MISMATCH = "length_mismatch"  # names and positions (or velocities/efforts) differ in length
    DUPLICATE_NAME = "duplicate_name"  # a joint named twice
    UNKNOWN_JOINT = "unknown_joint"  # a name that is not an SO-101 joint
    NON_FINITE = "non_finite"  # NaN or ±inf in a position
    MALFORMED = "malformed"  # names that are not strings, values that are not numbers
    BAD_STAMP = "bad_stamp"  # a non-finite time
    ESTOPPED = "estopped"  # a valid command while the e-stop is latched (ignored)
    READ_ONLY = "read_only"  # a command to an arm that only reads (the leader)


def diagnostic_key(reason: RejectReason) -> str:
    """The ``/diagnostics`` key that counts ``reason``."""
    return f"rejected_{reason.value}"


def bounded(text: str, limit: int = DETAIL_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


class LogThrottle:
    """At most one log line per ``period_s`` (on ``clock``); the lines held back are counted for the next one.

    Cheaper than the logger's own throttle under a flood (nothing is formatted or handed to the logger for
    a line held back), and the line that goes out says how many did not."""

    def __init__(self, period_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.period_s = period_s
        self._clock = clock
        self._next = -float("inf")
        self._held = 0

    def admit(self) -> int | None:
        """None when this line is held back; otherwise the number of lines held back since the previous one."""
        now = self._clock()
        if now < self._next:
            self._held += 1
            return None
        held, self._held, self._next = self._held, 0, now + self.period_s
        return held

    @staticmethod
    def suffix(held: int) -> str:
        """What a line adds about the ``held`` lines before it that were held back."""
        return f" ({held} more since the previous line)" if held else ""
