"""What a motion's supervisor knows of the arm, without ROS: latest measured and commanded positions, whether
the arm has come to rest at its command, how many joint states arrived, the servo faults reported since the
motion started and what the driver measured of its bus meanwhile (``so101_bringup.session.DeployMonitor``
feeds it from its subscriptions)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from so101_common.joints import JOINT_NAMES
from so101_common.servo_faults import FaultSpanTracker, ServoFault

__all__ = ["ArmWatch"]


class ArmWatch:
    """Times are seconds on one clock the caller chooses; fault spans count from :meth:`mark`."""

    STILL_RAD = 0.005  # a joint that moved less than this (≈3 encoder steps) is at rest

    def __init__(self, now: float) -> None:
        self.measured = np.full(len(JOINT_NAMES), np.nan)
        self.commanded = np.full(len(JOINT_NAMES), np.nan)
        self.faults = FaultSpanTracker()
        self.states = 0  # joint states received since mark()
        self.bus_entries: list[dict[str, str]] = []  # the driver's bus diagnostics (key/values) since mark()
        self._origin = now
        self._rest = np.full(len(JOINT_NAMES), np.nan)  # where the arm was when it last moved
        self._still_since = now

    def mark(self, now: float) -> None:
        """Start a new motion: fault times count from now; faults still present open new spans."""
        self._origin = now
        self.faults = FaultSpanTracker()
        self.states = 0
        self.bus_entries = []

    def on_bus(self, values: dict[str, str]) -> None:
        """The driver's bus entry on ``/diagnostics`` (its configured, achieved and possible cycle rates)."""
        self.bus_entries.append(values)

    def on_state(self, names: Sequence[str], positions: Sequence[float], now: float) -> None:
        _store(names, positions, self.measured)
        self.states += 1
        if not np.all(np.abs(self.measured - self._rest) <= self.STILL_RAD):  # NaN (not yet measured): moved
            self._rest = self.measured.copy()
            self._still_since = now

    def on_command(self, names: Sequence[str], positions: Sequence[float]) -> None:
        _store(names, positions, self.commanded)

    def on_faults(self, faults: list[ServoFault], now: float) -> None:
        if faults:
            self.faults.observe(now - self._origin, faults)

    def settled(self, now: float, tolerance: float = 0.25, hold_s: float = 0.3) -> bool:
        """Every joint within ``tolerance`` rad of its command (the gap profile's sag included) and none moved
        more than :attr:`STILL_RAD` for ``hold_s``: an episode that starts before the arm has come to rest
        carries the approach in its first seconds, which no compensator should be judged on."""
        offset = np.abs(self.measured - self.commanded)
        near = bool(np.all(np.isfinite(offset)) and offset.max() < tolerance)
        return near and now - self._still_since >= hold_s


def _store(names: Sequence[str], positions: Sequence[float], target: np.ndarray) -> None:
    for name, value in zip(names, positions, strict=False):
        if name in JOINT_NAMES:
            target[JOINT_NAMES.index(name)] = value
