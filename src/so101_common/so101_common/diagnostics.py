"""Diagnostic levels shared by every core that reports a status (driver, safety, compensator, ...).

The cores stay ROS-free and say how healthy they are with :class:`Level`; the node shells copy the
value into ``diagnostic_msgs/DiagnosticStatus.level`` (same numbers, so no mapping table).
"""

from __future__ import annotations

import enum

__all__ = ["Level"]


class Level(enum.IntEnum):
    """Same values as the ``diagnostic_msgs/DiagnosticStatus`` levels."""

    OK = 0
    WARN = 1
    ERROR = 2
    STALE = 3
