"""When the compensator node steps (no rclpy): at the model's rate, phase-locked to the policy's commands.

A model was trained on rows one control period apart, so the node steps about once a period whatever the
policy's rate. A policy at the model's rate (its mean command interval within ``early`` … ``slower``
periods) is stepped on every command as it arrives. Otherwise a command is stepped at once when it comes
at least ``early`` periods after the previous step, else it waits for the node's timer, which fires one
period after the previous command's step (a policy faster than the model: the latest command once a
period). The timer steps on its own, holding the latest command, only where the policy is slower than the
model (a 30 Hz policy into a 50 Hz model). A policy at the model's rate is never stepped by the timer and
never made to wait for it: a command a few ms late would otherwise find its step taken by the timer with
the previous command and wait a whole period, and after one late message the next, on time, would wait
for the timer, and so would every one after it — measured through ROS on a loaded machine, most
commands of the demo reached the arm 15–20 ms late that way and one in ten was never used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["StepClock"]


@dataclass
class StepClock:
    """Step decisions on the node's clock (s). Call :meth:`on_command` for each command, :meth:`on_tick`
    when the timer fires, and :meth:`stepped` whenever a step is taken."""

    period: float  # s, the model's control period
    command_timeout: float  # s without a command after which the timer steps no more
    early: float = 0.75  # periods: a command closer than this to the previous step waits for the timer
    # (unless the policy is at the model's rate); also the shortest mean interval of a policy at that rate
    slower: float = 1.25  # periods: a mean command interval above this lets the timer fill in steps
    interval_weight: float = 0.1  # weight of each new command interval in the running mean
    last_step: float = -math.inf
    last_command: float = -math.inf
    interval: float | None = None  # s, running mean of the policy's command interval (pauses excluded)
    pending: bool = field(default=False)  # a command arrived that no step has used yet

    def on_command(self, now: float) -> bool:
        """A command arrived at ``now``: True when it is to be stepped at once."""
        gap = now - self.last_command
        if 0.0 < gap <= self.command_timeout:  # a pause (or the first command) says nothing about the rate
            self.interval = gap if self.interval is None else self.interval + self.interval_weight * (gap - self.interval)
        self.last_command = now
        self.pending = True
        return self.policy_at_rate or now - self.last_step >= self.early * self.period

    def on_tick(self, now: float) -> bool:
        """The timer fired at ``now``: True when a step is due (a waiting command, or a slower policy's fill-in)."""
        if now - self.last_command > self.command_timeout:
            return False
        return self.pending or self.policy_slower

    @property
    def policy_at_rate(self) -> bool:
        return self.interval is not None and self.early * self.period <= self.interval <= self.slower * self.period

    @property
    def policy_slower(self) -> bool:
        return self.interval is not None and self.interval > self.slower * self.period

    def stepped(self, now: float) -> None:
        self.last_step = now
        self.pending = False
