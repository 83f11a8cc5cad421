"""The policy node's ``/diagnostics`` status as plain data: level, message and key/values (no rclpy).

:class:`PolicyDiagnostics` remembers the counters at the previous report, so a status says what
happened *since* then (a tick missed a minute ago does not keep the node at WARN).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from so101_common.diagnostics import Level
from so101_policy.runner import RunnerStats
from so101_policy.spec import PolicySpec

__all__ = ["StatusReport", "NodeCounters", "PolicyDiagnostics"]


@dataclass(frozen=True)
class StatusReport:
    level: Level
    message: str
    values: dict[str, str]


@dataclass(frozen=True)
class NodeCounters:
    """What the node counts itself (messages it published or refused)."""

    published: int = 0
    bad_joint_states: int = 0
    bad_images: int = 0


@dataclass
class PolicyDiagnostics:
    """Decides the policy's status from the runner's stats, once per diagnostics period."""

    spec: PolicySpec
    rate_hz: float
    n_action_steps: int
    max_observation_age_s: float
    _last_missed: int = field(default=0, init=False)
    _last_errors: int = field(default=0, init=False)

    def report(self, s: RunnerStats, counters: NodeCounters, missing_images: Sequence[str]) -> StatusReport:
        """The status now; ``missing_images``: the configured cameras that have not sent a frame yet."""
        new_misses, new_errors = s.missed - self._last_missed, s.errors - self._last_errors
        self._last_missed, self._last_errors = s.missed, s.errors
        if not s.running:
            level, message = Level.OK, "stopped"
        elif new_errors:
            level, message = Level.ERROR, f"inference failing: {s.last_error}"
        elif s.observation_age_s == float("inf"):
            level, message = Level.WARN, "waiting for /joint_states"
        elif missing_images:
            level, message = Level.WARN, f"waiting for images {list(missing_images)}"
        elif self.max_observation_age_s > 0 and s.observation_age_s > self.max_observation_age_s:
            level, message = Level.WARN, f"/joint_states stale ({s.observation_age_s:.2f} s)"
        elif new_misses:
            level, message = Level.WARN, f"inference late: {new_misses} missed tick(s)"
        else:
            level, message = Level.OK, "running"
        values = {
            "running": s.running, "rate_hz": self.rate_hz, "published": counters.published,
            "queue_depth": s.queue_depth, "inference_pending": s.pending,
            "inference_latency_last_ms": f"{s.latency_last_ms:.2f}", "inference_latency_p50_ms": f"{s.latency_p50_ms:.2f}",
            "inference_latency_p99_ms": f"{s.latency_p99_ms:.2f}", "inference_latency_max_ms": f"{s.latency_max_ms:.2f}",
            "inferences": s.inferences, "inference_errors": s.errors, "missed_ticks": s.missed,
            "waiting_ticks": s.waiting, "ticks": s.ticks, "dropped_stale_actions": s.dropped_stale,
            "observation_age_s": f"{s.observation_age_s:.3f}", "bad_joint_states": counters.bad_joint_states,
            "bad_images": counters.bad_images, "last_error": s.last_error,
            "policy_type": self.spec.policy_type, "policy_kind": self.spec.kind,
            "chunk_size": self.spec.chunk_size, "n_action_steps": self.n_action_steps,
        }
        return StatusReport(level, message, {k: str(v).lower() if isinstance(v, bool) else str(v)
                                             for k, v in values.items()})
