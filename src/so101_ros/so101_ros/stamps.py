"""Message times (``builtin_interfaces`` Time and Duration) in seconds."""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["seconds", "stamp_or"]


def seconds(time: Any) -> float:
    """A ``builtin_interfaces/Time`` or ``Duration`` in seconds."""
    return time.sec + time.nanosec * 1e-9


_Default = TypeVar("_Default", float, None)


def stamp_or(stamp: Any, default: _Default) -> float | _Default:
    """A header stamp in seconds, or ``default`` for an unset stamp (zero: the sender did not stamp it)."""
    return seconds(stamp) if stamp.sec or stamp.nanosec else default
