"""Diagnostics in and out, as plain data (the node maps them to ``diagnostic_msgs``).

In: the gripper load from the driver's telemetry on ``/diagnostics``. Key names are matched loosely
so the driver may change its spelling: a status counts when its name or hardware_id contains
``match`` (default ``"gripper"``, case-insensitive; the driver publishes ``"so101_driver: gripper"``).
Within it the first key (case-insensitive) that fits, in this order, gives the load as a fraction of
the joint's max effort:

1. a ``load`` key with ``fraction`` or ``ratio`` in it: the value as it is (0..1);
2. a ``load`` key with ``percent``, ``pct`` or ``%``: value / 100;
3. a ``load`` key with ``permille`` (the driver's ``load_permille``), or plain ``load``: value / 1000
   (the STS3215's Present_Load register counts 0.1 % of max torque);
4. an ``effort`` or ``torque`` key: |N·m| / max_effort.

Keys with ``limit``, ``max``, ``overload`` or ``protect`` in them are settings, not readings, and are
skipped; so are values that do not parse as a finite number (a unit after the number is allowed).
The sign is dropped (the load's sign only tells the direction).

Out: :func:`status_report` turns the filter's last output and counters into a level, a message and
key/values.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from so101_common.diagnostics import Level
from so101_safety.core import FilterStats, SafeCommand

__all__ = ["StatusReport", "parse_gripper_load", "load_fraction", "status_report"]

_NUMBER = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
_SETTING_WORDS = ("limit", "max", "overload", "protect")


@dataclass(frozen=True)
class StatusReport:
    level: Level
    message: str
    values: dict[str, str]


def load_fraction(key: str, value: str, max_effort: float) -> float | None:
    """The load fraction one key/value pair gives, or None when it is not a load reading."""
    k = key.lower()
    if any(word in k for word in _SETTING_WORDS):
        return None
    match = _NUMBER.match(str(value))
    if match is None:
        return None
    number = abs(float(match.group(1)))
    if not math.isfinite(number):
        return None
    if "load" in k:
        if "fraction" in k or "ratio" in k:
            return number
        if "percent" in k or "pct" in k or "%" in k:
            return number / 100.0
        return number / 1000.0
    if "effort" in k or "torque" in k:
        return number / max_effort
    return None


def _key_rank(key: str) -> int:
    k = key.lower()
    if "load" in k:
        if "fraction" in k or "ratio" in k:
            return 0
        if "percent" in k or "pct" in k or "%" in k:
            return 1
        return 2
    return 3


def parse_gripper_load(statuses: Iterable[tuple[str, str, Sequence[tuple[str, str]]]], max_effort: float,
                       match: str = "gripper", ignore_prefix: str | None = None) -> float | None:
    """The gripper load fraction in a batch of ``(name, hardware_id, [(key, value), ...])`` statuses.

    ``ignore_prefix``: statuses whose name starts with it are skipped (the filter's own status).
    Returns the largest reading found (None when there is none).
    """
    needle = match.lower()
    found: list[float] = []
    for name, hardware_id, values in statuses:
        if ignore_prefix and name.startswith(ignore_prefix):
            continue
        if needle not in name.lower() and needle not in hardware_id.lower():
            continue
        ranked = sorted(((_key_rank(k), k, v) for k, v in values), key=lambda item: item[0])
        for _, key, value in ranked:
            fraction = load_fraction(key, value, max_effort)
            if fraction is not None:
                found.append(fraction)
                break
    return max(found) if found else None


def status_report(command: SafeCommand | None, stats: FilterStats, rejected_since_last: int = 0,
                  estop_reason: str | None = None, extra: Mapping[str, str] | None = None) -> StatusReport:
    """The filter's state for ``/diagnostics``: ERROR while e-stopped, WARN while waiting, holding,
    clipping, limiting the gripper or rejecting messages, OK otherwise."""
    values = {
        "commands_accepted": str(stats.accepted),
        "commands_rejected": str(stats.rejected_total),
        "measured_accepted": str(stats.measured_accepted),
        "measured_rejected": str(sum(stats.measured_rejected.values())),
        "estops": str(stats.estops),
        "resets": str(stats.resets),
        "steps": str(stats.steps),
    }
    values.update({f"rejected_{reason}": str(count) for reason, count in sorted(stats.rejected.items())})
    values.update(extra or {})
    if command is None:
        values["state"] = "waiting"
        if estop_reason is not None:
            values["estop_reason"] = estop_reason
            return StatusReport(Level.ERROR, f"e-stop latched: {estop_reason}; call ~/reset (no measured state yet)",
                                values)
        return StatusReport(Level.WARN, "waiting for a measured joint state: no output", values)
    values.update({
        "state": command.state,
        "reasons": "; ".join(command.reasons),
        "clipped_joints": ",".join(command.clipped),
        "rate_limited_joints": ",".join(command.rate_limited),
        "gripper_load_limited": str(command.gripper_limited),
        "estop_reason": command.estop_reason or "",
    })
    if command.estopped:
        return StatusReport(Level.ERROR, f"e-stop latched: {command.estop_reason}; call ~/reset", values)
    problems = list(command.reasons)
    if rejected_since_last:
        problems.append(f"{rejected_since_last} command(s) rejected")
    problems = [p for p in problems if not p.startswith("restarted")]
    if problems:
        return StatusReport(Level.WARN, "; ".join(problems), values)
    return StatusReport(Level.OK, "ok", values)
