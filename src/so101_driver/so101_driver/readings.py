"""What one driver cycle yields, as plain data: joint samples, servo telemetry, command results (no rclpy)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from so101_driver.feedback import Feedback

__all__ = ["JointSample", "ServoTelemetry", "CycleResult", "CommandResult"]


@dataclass(frozen=True)
class JointSample:
    """Joint state in :attr:`DriverCore.names` order; NaN for joints whose servo did not answer."""

    stamp: float  # clock() when the servos were asked for it (when they sampled it; it arrives a round trip later), s
    names: tuple[str, ...]
    position: np.ndarray  # rad
    velocity: np.ndarray  # rad/s
    effort: np.ndarray  # N·m, estimated from Present_Load
    valid: np.ndarray  # bool: servo answered this cycle


@dataclass(frozen=True)
class ServoTelemetry:
    joint: str
    servo_id: int
    feedback: Feedback | None  # None when the servo did not answer this cycle
    faulted: bool
    fault_reason: str
    consecutive_failures: int
    total_failures: int
    probe_interval_s: float = 0.0  # > 0 while the servo is out of the cycle and probed at this interval
    silent_s: float = 0.0  # s since its last reply, while it does not answer

    @property
    def flags(self) -> list[str]:
        return [b.name for b in self.feedback.flags] if self.feedback else []


@dataclass(frozen=True)
class CycleResult:
    sample: JointSample | None  # None when no servo answered
    telemetry: tuple[ServoTelemetry, ...]
    bus_ok: bool
    faults_changed: bool = False  # a servo fault began or ended in this cycle (report it now, not at the next period)


@dataclass(frozen=True)
class CommandResult:
    goals: dict[str, float]  # joint → goal actually applied (rad, after clamping)
    clamped: tuple[str, ...]  # joints whose requested goal was outside the calibrated range
