"""What a motion's supervisor knows of the arm, without ROS: latest measured and commanded positions, whether
the arm has come to rest at its command, how many joint states arrived and the longest time without one, the
driver's cycle rate and counts as it reports them, the servos' temperatures, the servo faults reported since the
motion started, and what a recording still waits for (``so101_apps.deploy_monitor.DeployMonitor`` feeds it from its subscriptions)."""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from so101_common.joints import JOINT_NAMES
from so101_common.servo_faults import JOINT_KEY, SERVO_TELEMETRY, FaultSpanTracker, ServoFault, read_servo_faults

__all__ = ["ArmWatch", "StateGap"]

DRIVER_RATE_KEY = "configured_rate_hz"  # in the driver's bus entry on /diagnostics (so101_driver.health)
TEMPERATURE_KEY = SERVO_TELEMETRY["temperature"][0]  # in each answering servo's entry on /diagnostics


@dataclass(frozen=True)
class StateGap:
    """The longest time without a joint state during a motion, and when it began (s since the motion started)."""

    seconds: float = 0.0
    at_s: float = 0.0
    # how far apart the servos sampled the two joint states around it (their stamps; None: not known): as long as the
    # gap where the driver did not sample, much shorter where its states were held up after it
    sampled_s: float | None = None


class ArmWatch:
    """Times are seconds on one clock the caller chooses; fault spans count from :meth:`mark`."""

    STILL_RAD = 0.005  # net drift over the hold time below which a joint is at rest (≈3 encoder steps) ...
    NOISE_MARGIN = 4.0  # ... plus this many standard deviations of its measured encoder noise
    HISTORY_S = 2.0  # joint states kept for the rest test (longer than any hold time asked for)

    def __init__(self, now: float) -> None:
        self.measured = np.full(len(JOINT_NAMES), np.nan)
        self.commanded = np.full(len(JOINT_NAMES), np.nan)
        self.faults = FaultSpanTracker()
        self.states = 0  # joint states received since mark()
        self.driver_rate_hz: float | None = None  # the driver's configured cycle rate, from its bus diagnostics
        self.bus_entries: list[dict[str, str]] = []  # the driver's bus diagnostics (key/values) since mark()
        self.bus_before: dict[str, str] | None = None  # its last bus entry before mark(): where its counts started
        self.driver_status = ""  # the message of its latest bus entry ("all servos answering", "port failing: ...")
        self.twin_seen: float | None = None  # when the live gap twin last published its state (None: not yet)
        self.temperatures = np.full(len(JOINT_NAMES), np.nan)  # °C, each servo's latest report (NaN: none yet)
        self._origin = now
        self._last_state: float | None = None  # when the latest joint state arrived
        self._last_sampled: float | None = None  # when the servos sampled it (its stamp)
        self._longest_gap = StateGap()
        self._history: deque[tuple[float, np.ndarray]] = deque()  # (time, measured) of the last HISTORY_S
        self._expected: np.ndarray | None = None  # a pose to be commanded before the arm can be at rest at it

    def mark(self, now: float) -> None:
        """Start a new motion: fault times count from now; faults still present open new spans."""
        self._origin = now
        self.faults = FaultSpanTracker()
        self.states = 0
        self._longest_gap = StateGap()
        self.bus_before = self.bus_entries[-1] if self.bus_entries else self.bus_before
        self.bus_entries = []

    def on_state(self, names: Sequence[str], positions: Sequence[float], now: float,
                 sampled: float | None = None) -> None:
        """A joint state that arrived at ``now``, sampled at ``sampled`` (its stamp, on the same clock)."""
        _store(names, positions, self.measured)
        self.states += 1
        gap = self.longest_gap(now)
        if gap is not self._longest_gap and sampled is not None and self._last_sampled is not None:
            gap = StateGap(gap.seconds, gap.at_s, sampled - self._last_sampled)
        self._longest_gap = gap
        self._last_state, self._last_sampled = now, sampled
        self._history.append((now, self.measured.copy()))
        while len(self._history) > 2 and self._history[1][0] <= now - self.HISTORY_S:
            self._history.popleft()

    def longest_gap(self, now: float) -> StateGap:
        """The longest time without a joint state since :meth:`mark`, counting the one still open at ``now``."""
        if self._last_state is None:
            return self._longest_gap
        since = max(self._last_state, self._origin)
        if now - since > self._longest_gap.seconds:
            return StateGap(now - since, since - self._origin)
        return self._longest_gap

    def expect_command(self, names: Sequence[str], positions: Sequence[float] | np.ndarray) -> None:
        """The arm is at rest only at this pose (a new motion's start): until it is commanded, and for the hold
        time after, the arm is not at rest, wherever it rests now (still at the previous motion's end, within
        the tolerance of the new start, it would otherwise start the motion from there)."""
        self._expected = np.full(len(JOINT_NAMES), np.nan)
        _store(names, positions, self._expected)

    def on_command(self, names: Sequence[str], positions: Sequence[float]) -> None:
        _store(names, positions, self.commanded)
        known = self._expected is not None and np.isfinite(self._expected)
        if self._expected is not None and np.allclose(self.commanded[known], self._expected[known], rtol=0.0, atol=1e-9):
            self._expected = None
            self._history.clear()  # the rest test counts from the new command

    def on_twin(self, now: float) -> None:
        self.twin_seen = now

    def twin_live(self, now: float, within_s: float = 0.2) -> bool:
        """Whether the live gap twin published its state in the last ``within_s``."""
        return self.twin_seen is not None and now - self.twin_seen <= within_s

    def on_diagnostics(self, reports: Sequence[tuple[Mapping[str, str], str]], now: float) -> None:
        """One ``/diagnostics`` array as (key/values, message) per status: the servo faults, the driver's bus
        entry (its configured cycle rate and what it measured of its bus: achieved rate, cycle capacity, retries
        and timeouts) and each answering servo's temperature."""
        self.on_faults(read_servo_faults(reports), now)
        for values, message in reports:
            if DRIVER_RATE_KEY in values:
                self.driver_rate_hz = float(values[DRIVER_RATE_KEY])
                self.driver_status = message
                self.bus_entries.append(dict(values))
            joint = values.get(JOINT_KEY)
            if joint in JOINT_NAMES and TEMPERATURE_KEY in values:
                self.temperatures[JOINT_NAMES.index(joint)] = float(values[TEMPERATURE_KEY])

    def on_faults(self, faults: list[ServoFault], now: float) -> None:
        if faults:
            self.faults.observe(now - self._origin, faults)

    def recording_waits(self, now: float, unsubscribed: Collection[str], twin: bool) -> list[str]:
        """What an episode still waits for before it starts, in words (none: ready): the arm at rest at its
        command, the recorder's subscriptions (``unsubscribed``: topics it has not subscribed to yet), the
        driver's first report and, with ``twin``, the live gap twin's state. Waiting for the arm's first joint
        state, the driver's own word on its bus comes with it (a port that does not open, no servo answering)."""
        arm = self.waiting_for(now)
        if arm == "the first joint state" and self.driver_status:
            arm += f" (the driver: {self.driver_status})"
        waits = [arm,
                 f"the recorder to subscribe to {sorted(unsubscribed)}" if unsubscribed else None,
                 "the driver's first report on /diagnostics" if self.driver_rate_hz is None else None,
                 "the live gap twin's state" if twin and not self.twin_live(now) else None]
        return [wait for wait in waits if wait]

    def settled(self, now: float, tolerance: float = 0.25, hold_s: float = 0.3) -> bool:
        """Whether the arm rests at its command (:meth:`waiting_for` has nothing to wait for)."""
        return self.waiting_for(now, tolerance, hold_s) is None

    def waiting_for(self, now: float, tolerance: float = 0.25, hold_s: float = 0.3) -> str | None:
        """What keeps the arm from resting at its command, in words, or None when it rests there.

        At rest: every joint within ``tolerance`` rad of its command (the gap profile's sag included) and none
        drifted over the last ``hold_s`` by more than :attr:`STILL_RAD` plus :attr:`NOISE_MARGIN` standard
        deviations of its own encoder noise, measured on the same samples (a real encoder's readings jitter by
        a step or two at rest; the drift is the mean of the window's last third against its first third, so
        noise averages out and motion does not). An episode that starts before the arm has come to rest
        carries the approach in its first seconds, which no compensator should be judged on."""
        if np.isnan(self.commanded).any():
            return "the first command"
        if np.isnan(self.measured).any():
            return "the first joint state"
        if self._expected is not None:
            return "the motion's start pose to be commanded"
        offset = np.abs(self.measured - self.commanded)
        far = [f"{JOINT_NAMES[j]} {offset[j]:.3f} rad from its command" for j in np.flatnonzero(offset >= tolerance)]
        if far:
            return f"{', '.join(far)} (tolerance {tolerance} rad)"
        start = now - hold_s
        before = [i for i, (t, _) in enumerate(self._history) if t <= start]
        if not before:
            return f"{hold_s} s of joint states"
        window = np.array([q for _, q in list(self._history)[before[-1]:]])
        third = max(1, len(window) // 3)
        drift = np.abs(window[-third:].mean(axis=0) - window[:third].mean(axis=0))
        noise = _noise(window)
        limit = self.STILL_RAD + self.NOISE_MARGIN * noise
        moving = np.flatnonzero(drift > limit)
        if len(moving):
            return "the arm to come to rest: " + ", ".join(
                f"{JOINT_NAMES[j]} moved {drift[j] * 1e3:.1f} mrad in {hold_s} s (rest: under {limit[j] * 1e3:.1f}, "
                f"its noise {noise[j] * 1e3:.1f} mrad)" for j in moving)
        return None


def _noise(window: np.ndarray) -> np.ndarray:
    """Per joint, the standard deviation of white encoder noise on these samples: a robust spread (1.4826 · MAD)
    of successive differences, over √2 (a difference holds two samples' noise); zero from fewer than 3 samples."""
    if len(window) < 3:
        return np.zeros(window.shape[1])
    steps = np.diff(window, axis=0)
    spread = 1.4826 * np.median(np.abs(steps - np.median(steps, axis=0)), axis=0)
    return spread / np.sqrt(2.0)


def _store(names: Sequence[str], positions: Sequence[float] | np.ndarray, target: np.ndarray) -> None:
    for name, value in zip(names, positions, strict=False):
        if name in JOINT_NAMES:
            target[JOINT_NAMES.index(name)] = value
