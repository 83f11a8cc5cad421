"""The filter's ``/diagnostics`` status as plain data (the node maps it to ``diagnostic_msgs``).

:func:`status_report` turns the filter's last output and counters into a level, a message and
key/values. (The gripper load comes in typed, as the effort of ``joint_states``, not from here.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from so101_common.diagnostics import Level
from so101_safety.core import FilterStats, SafeCommand

__all__ = ["StatusReport", "status_report"]



@dataclass(frozen=True)
class StatusReport:
    level: Level
    message: str
    values: dict[str, str]


def status_report(command: SafeCommand | None, stats: FilterStats, rejected_since_last: int = 0,
                  estop_reason: str | None = None, extra: Mapping[str, str] | None = None) -> StatusReport:
    """The filter's state for ``/diagnostics``: ERROR while e-stopped, WARN while waiting, holding,
    clipping, limiting the gripper or rejecting messages, OK otherwise."""
    values = {
        "commands_accepted": str(stats.accepted),
        "commands_rejected": str(stats.rejected_total),
        "measured_accepted": str(stats.measured_accepted),
        "measured_rejected": str(sum(stats.measured_rejected.values())),
        "commands_coalesced": str(stats.coalesced),
        "estops": str(stats.estops),
        "resets": str(stats.resets),
        "restarts": str(stats.restarts),
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
