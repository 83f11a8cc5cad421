"""Why a joint command (or a measured joint state) was not used: one vocabulary for every core that
validates them (the driver, the safety filter), counted on ``/diagnostics`` as ``rejected_<reason>``,
and the bounded text of the log line that says so (a 100 kB joint name is never echoed whole)."""

from __future__ import annotations

import enum

__all__ = ["RejectReason", "DETAIL_LIMIT", "bounded", "diagnostic_key"]

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
