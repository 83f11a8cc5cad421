"""The safety filter: validates commands, bounds the output and holds on stale input or e-stop (no rclpy).

Time is passed in by the caller (seconds on any monotonic clock shared by all calls); nothing here
reads a wall clock, so every behaviour is reproducible in tests.

Guarantees, whatever the inputs (see the package README for the exact statement). A measurement is
*fresh* while it is at most ``watchdog_timeout`` old; an old one is never acted on.

1. no output until every joint has a fresh measured position;
2. every output position lies in ``[lower + margin, upper − margin]`` of its joint;
3. between consecutive outputs at times ``t₋`` and ``t`` (``dt = t − t₋``), for every joint that does not
   *restart* at ``t``: ``|y − y₋| ≤ v_max·dt`` and ``|v − v₋| ≤ a_max·dt`` with ``v = (y − y₋)/dt`` and
   ``v₋`` the previous step's velocity (0 after a restart). One exception to the acceleration bound: a
   closing gripper stops at once (``y = y₋``) when its load limit is exceeded;
4. relative to the arm (its *leash*): every output of a joint with a fresh measured position ``m`` lies
   within ``reseed_tolerance + tracking_lag·s`` of the clipped ``m``, ``s`` the faster of the previous
   output's speed and the measured one (up to ``max_velocity``: a following arm lags by that much), or
   within ``limp_tolerance`` of it when the servo reported no load with that position and in every reading
   of the ``limp_hold`` before it (torque off).
   Where the bounded step of 3 would leave the leash (the arm fell, was pushed, is blocked or cannot
   carry its load), the output *restarts* at its edge, at rest, and ramps from there; a hold or the
   e-stop then holds the measured position. Against a blocked arm the output never comes closer than
   ``reseed_tolerance``: the servo keeps the steady push its own protections judge;
5. the e-stop brakes the output to a stop within 3 and holds it there (or, by 4, at the arm's leash)
   until :meth:`SafetyFilter.reset`;
6. with no accepted command for ``watchdog_timeout`` (or no fresh measured state), the target of every
   joint becomes its measured position at that moment (clipped), or where its output can stop when its
   measurement is not fresh, and stays there until a new command arrives (or, by 4, the arm is moved);
   the output brakes onto it within 3.

When to step: the node steps on every accepted command as it arrives (the bounds of 3 use the real
time since the previous output) unless commands come faster than ``max_rate_hz`` (:meth:`SafetyFilter.
forward_due`: then the latest one waits for a tick), and on a timer only when :meth:`SafetyFilter.tick_due`
says the output has something to do on its own (e-stop, watchdog hold, not yet at its target, a waiting
command, an output outside its leash). The guarantees hold for any sequence of ``step`` times.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from so101_common.joints import JOINT_NAMES
from so101_common.rejections import RejectReason, bounded
from so101_safety.config import SafetyConfig
from so101_safety.limiter import MIN_DT, limit_step

__all__ = ["RejectReason", "Verdict", "SafeCommand", "FilterStats", "SafetyFilter"]

_NAN = float("nan")
_BURST = 2  # outputs max_rate_hz lets through back to back (a jittery stream at the rate passes)
_COMMAND_INTERVAL_WEIGHT = 0.1  # of each new interval in the command stream's running mean period (about 10 commands)
# rad: how far a gripper loaded above its limit may move and still count as held by an object (fingers on an
# object move less while the load builds; a free gripper under that load travels 0.25 rad or more in
# gripper_load_hold, measured on SAGE's gripper_cycles on the virtual SO-101)
GRASP_TRAVEL = 0.05


@dataclass(frozen=True)
class Verdict:
    """The outcome of :meth:`SafetyFilter.on_command` (or ``on_measured``)."""

    accepted: bool
    reason: RejectReason | None = None
    detail: str = ""

    def __bool__(self) -> bool:
        return self.accepted

    @classmethod
    def ok(cls, detail: str = "") -> Verdict:
        return cls(True, None, detail)

    @classmethod
    def reject(cls, reason: RejectReason, detail: str) -> Verdict:
        return cls(False, reason, bounded(detail))  # a 100 kB joint name is never echoed whole


@dataclass(frozen=True)
class SafeCommand:
    """What to publish this tick: a position for every joint plus the filter's state."""

    stamp: float  # s, the ``now`` of the step
    names: tuple[str, ...]
    positions: tuple[float, ...]  # rad, within the margins
    velocities: tuple[float, ...]  # rad/s, (y − y₋)/dt of this step (0 when restarted)
    targets: tuple[float, ...] = ()  # rad, what each joint is heading for (commanded, clipped; the hold; the e-stop's stop)
    estopped: bool = False
    holding: bool = False  # watchdog hold: the target is the measured position latched at the hold
    command_stale: bool = False  # no accepted command within the watchdog timeout (or none yet)
    measured_stale: bool = False  # no measured state within the watchdog timeout
    restarted: tuple[str, ...] = ()  # joints whose output stopped at its leash around the measured position (at rest)
    clipped: tuple[str, ...] = ()  # joints whose commanded target lies outside the position limits
    rate_limited: tuple[str, ...] = ()  # joints whose output has not reached its target yet
    gripper_limited: bool = False  # gripper load above the limit: the gripper does not close further
    reasons: tuple[str, ...] = ()  # human-readable, one per active condition
    estop_reason: str | None = None

    @property
    def state(self) -> str:
        return "estopped" if self.estopped else "holding" if self.holding else "active"


@dataclass
class FilterStats:
    """Counters since start-up."""

    accepted: int = 0
    rejected: Counter[str] = field(default_factory=Counter)  # by RejectReason value
    measured_accepted: int = 0
    measured_rejected: Counter[str] = field(default_factory=Counter)
    steps: int = 0
    bad_step_times: int = 0  # step() calls whose time was not a finite real number (nothing computed)
    estops: int = 0
    resets: int = 0
    restarts: int = 0  # times an output was caught by its leash (the arm not where the outputs sent it)
    coalesced: int = 0  # accepted commands replaced by a later one before they were output (above max_rate_hz)

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())


class SafetyFilter:
    """Bounds joint commands for the SO-101; see the module docstring for the guarantees."""

    def __init__(self, config: SafetyConfig | None = None) -> None:
        self.config = config if config is not None else SafetyConfig()
        self.names: tuple[str, ...] = JOINT_NAMES
        self._limits = self.config.limits
        self._index = {name: i for i, name in enumerate(self.names)}
        self._gripper = next((i for i, lim in enumerate(self._limits) if lim.is_gripper), None)
        n = len(self.names)
        self.stats = FilterStats()
        # measured state
        self._measured = [_NAN] * n
        self._measured_time = [-math.inf] * n
        self._measured_speed = [0.0] * n  # rad/s, from the same joint state as the position (0 when it has none)
        # effort as a signed fraction of max effort (+: driving the joint's angle up) and its stamp, per joint (the
        # gripper's load; a limp servo's 0), and the stamp of the first reading of the joint's current run of readings
        # whose magnitude is below limp_load (inf: not in one)
        self._load = [_NAN] * n
        self._load_time = [-math.inf] * n
        self._unloaded_since = [math.inf] * n
        # command state
        self._target = [_NAN] * n  # clipped targets; NaN = take the measured position
        self._clipped = [False] * n
        self._command_time: float | None = None
        self._command_interval: float | None = None  # s, the stream's own period (a running mean of its intervals)
        self._pending = False  # an accepted command waits for its output (coalesced: the latest wins)
        # output state
        self._y: list[float] | None = None
        self._v = [0.0] * n
        self._t: float | None = None
        self._smoothed: list[float] | None = None
        self._last: SafeCommand | None = None
        self._holding = False
        self._commanded_in_hold = False  # a command arrived after the hold latched
        self._gripper_limited = False
        # when the gripper's load went above the limit with the gripper still, and where the gripper was then
        self._gripper_loaded_since: float | None = None
        self._gripper_loaded_at = _NAN
        self._estop_reason: str | None = None
        self._estop_target: list[float] | None = None  # where the output brakes to (and stays) while e-stopped
        # output pacing: a token bucket refilled at max_rate_hz, one token per output
        self._tokens = float(_BURST)
        self._token_time: float | None = None

    # ------------------------------------------------------------------ inputs

    @property
    def estopped(self) -> bool:
        return self._estop_reason is not None

    @property
    def estop_reason(self) -> str | None:
        return self._estop_reason

    @property
    def last(self) -> SafeCommand | None:
        """The most recent output of :meth:`step` (None before the first)."""
        return self._last

    @property
    def measured_known(self) -> bool:
        return all(math.isfinite(q) for q in self._measured)

    @property
    def pending(self) -> bool:
        """Whether an accepted command has not been output yet (it came faster than ``max_rate_hz``)."""
        return self._pending

    def on_command(self, names: Sequence[str], positions: Sequence[object], stamp: object) -> Verdict:
        """Validate a (possibly partial) command; if valid, its joints get new targets (clipped).

        ``positions`` and ``stamp`` may be real numbers of any type and size (float, int, Fraction,
        Decimal, numpy scalars); anything else (text, bools, complex, None, ...) is rejected with a reason."""
        verdict, parsed = self._parse(names, positions, stamp)
        if verdict.accepted and self.estopped:
            verdict = Verdict.reject(RejectReason.ESTOPPED, f"e-stop latched ({self._estop_reason}): command ignored")
        if not verdict.accepted:
            self.stats.rejected[verdict.reason.value if verdict.reason else "unknown"] += 1
            return verdict
        stamp_s = _as_float(stamp)  # a finite real number: _parse checked it
        if self._command_time is not None and stamp_s - self._command_time > self.config.watchdog_timeout:
            self._enter_hold(stamp_s)  # the stream had stalled: joints this command leaves out keep the hold
        clipped = []
        for i, value in parsed:
            lim = self._limits[i]
            self._target[i] = lim.clip(value)
            self._clipped[i] = not lim.lower <= value <= lim.upper
            if self._clipped[i]:
                clipped.append(self.names[i])
        if self._command_time is not None and 0.0 < stamp_s - self._command_time <= self.config.watchdog_timeout:
            interval = stamp_s - self._command_time
            self._command_interval = interval if self._command_interval is None else (
                self._command_interval + _COMMAND_INTERVAL_WEIGHT * (interval - self._command_interval))
        self._command_time = stamp_s if self._command_time is None else max(stamp_s, self._command_time)
        self._commanded_in_hold = self._holding
        if self._pending:
            self.stats.coalesced += 1  # the previous command was never output: this one replaces it
        self._pending = True
        self.stats.accepted += 1
        return Verdict.ok(f"clipped {clipped}" if clipped else "")

    def on_measured(self, names: Sequence[str], positions: Sequence[object], velocities: Sequence[object] = (),
                    efforts: Sequence[object] = (), stamp: object = 0.0) -> Verdict:
        """Take a measured joint state. Unknown names are ignored (other joints may share the topic);
        joints with a non-finite position keep their previous measurement.

        Values and ``stamp`` are taken as :meth:`on_command` takes them: a real number of any type, or
        not used (a position or an effort) or rejected (the stamp)."""
        verdict = self._parse_measured(names, positions, velocities, efforts, stamp)
        if verdict.accepted:
            self.stats.measured_accepted += 1
        else:
            self.stats.measured_rejected[verdict.reason.value if verdict.reason else "unknown"] += 1
        return verdict

    def estop(self, reason: str = "e-stop") -> None:
        """Latch the e-stop: the output brakes to a stop within its bounds and stays there until :meth:`reset`."""
        if not self.estopped:
            self.stats.estops += 1
            self._estop_reason = str(reason) or "e-stop"
            self._estop_target = None  # the stopping point, worked out at the next step

    def reset(self) -> bool:
        """Release a latched e-stop; returns False (and changes nothing) when none was latched.

        Targets fall back to the measured position and the filter holds there until a new command
        arrives (the output ramps there within its bounds, or restarts at its leash when the arm was moved)."""
        if not self.estopped:
            return False
        self._estop_reason = None
        self._estop_target = None
        self._target = [_NAN] * len(self.names)
        self._clipped = [False] * len(self.names)
        self._smoothed = None
        self._command_time = None
        self._command_interval = None
        self._holding = True
        self._commanded_in_hold = False
        self.stats.resets += 1
        return True

    # ------------------------------------------------------------------ output

    def forward_due(self, now: float) -> bool:
        """Whether a command accepted at ``now`` is output at once; otherwise it waits for a tick
        (:meth:`tick_due`), coalesced with any later one, so outputs never exceed ``max_rate_hz``."""
        return self._has_token(now)

    def tick_due(self, now: float, period: float) -> bool:
        """Whether a timer tick at ``now`` should :meth:`step` (and publish): the node steps on every
        accepted command at its arrival (unless :meth:`forward_due` says it came too fast) and ticks only
        for what no command brings.

        Due when nothing was output yet (and every joint has a fresh measurement), when a command waits
        for its output and ``max_rate_hz`` allows one, or when no output went out within ``period`` *and*
        the output has something to do on its own: the e-stop or the watchdog hold is on (or due now: the
        command or the measured state went stale), an output lies outside its leash (4: the arm is not where
        the outputs sent it), or the output has not reached its target (rate limited,
        smoothing, a gripper limit, a restart) and no command came within ``2·period``, or 1.5 of the command
        stream's own interval if that is longer (the commands carry it while they flow). A tick never lands just before a command of a live stream and cuts that
        command's step short: each step sees the full time since the previous output (its dt).
        """
        try:
            now, period = float(now), float(period)
        except (TypeError, ValueError):
            return False
        if not math.isfinite(now) or not self.measured_known:
            return False
        last = self._last
        if last is None or self._t is None:
            return all(self._fresh(now))
        if self._pending and self._has_token(now):
            return True
        if now - self._t < period:
            return False
        timeout = self.config.watchdog_timeout
        command_stale = self._command_time is None or abs(now - self._command_time) > timeout
        fresh = self._fresh(now)
        if self.estopped or self._holding or command_stale or not all(fresh):
            return True
        if any(ok and abs(y - lim.clip(q)) > self._reach(i) for i, (lim, q, y, ok)
               in enumerate(zip(self._limits, self._measured, self._y or (), fresh, strict=False))):
            return True  # the arm is not where the outputs sent it: leash the output now, not at the next command
        # between two commands of a live stream only once the next one is late: 2 ticks, or 1.5 of the stream's own
        # intervals if longer. Measured through ROS: with 2 ticks alone (20 ms), a 50 Hz stream's commands, each up to a
        # few ms late, let the tick step first in runs whose timer phase put ticks just after 20 ms: up to 400 extra
        # outputs in 30 s, and the compensated gripper tracked the multisine 30 mrad RMS off instead of 23
        wait = 2.0 * period if self._command_interval is None else max(2.0 * period, 1.5 * self._command_interval)
        between_commands = self._command_time is None or abs(now - self._command_time) >= wait
        return bool(last.rate_limited) and between_commands

    def step(self, now: object) -> SafeCommand | None:
        """The command to publish at ``now``, a real number of any type (None before every joint has a fresh
        measured position, or for a bad ``now``: one that is not a finite real number, counted in
        ``stats.bad_step_times``)."""
        t = _to_float(now)
        if t is None or not math.isfinite(t):
            self.stats.bad_step_times += 1
            return None
        now = t
        if not self.measured_known:
            return None
        fresh = self._fresh(now)
        if self._y is None and not all(fresh):
            return None  # the first output starts where the arm is: never from an old measurement
        if self._t is not None and now - self._t < MIN_DT and self._last is not None:
            return self._last  # no time has passed (or it went backwards): repeat, change nothing
        self.stats.steps += 1
        self._take_token(now)
        self._pending = False
        measured = [lim.clip(q) for lim, q in zip(self._limits, self._measured, strict=True)]
        command_stale = self._command_time is None or abs(now - self._command_time) > self.config.watchdog_timeout
        measured_stale = not all(fresh)
        if not self.estopped:
            if command_stale or measured_stale:
                if not self._holding or self._commanded_in_hold:
                    self._enter_hold(now)  # (again, if a command came in but is stale already: hold means hold)
            elif self._holding:
                self._holding = False
            self._target = [x if not math.isnan(x) else m if ok else self._stop_point(i)
                            for i, (x, m, ok) in enumerate(zip(self._target, measured, fresh, strict=True))]
        self._update_gripper_limit(now)
        n = len(self.names)
        if self._y is None or self._t is None:  # the first output: where the arm is
            y, v, leashed = list(measured), [0.0] * n, list(range(n))
            self._smoothed = list(measured)
            if self.estopped:
                self._estop_target = list(measured)
            target = list(self._estop_target) if self._estop_target is not None else list(self._target)
        else:
            if self.estopped:
                if self._estop_target is None:
                    self._estop_target = [self._stop_point(i) for i in range(n)]
                target = list(self._estop_target)
            else:
                target = self._smooth(now)
            reaches = [self._reach(i) for i in range(n)]
            y, v = self._advance(now - self._t, target)
            leashed = []
            for i, (m, ok, reach) in enumerate(zip(measured, fresh, reaches, strict=True)):
                if ok and abs(y[i] - m) > reach:  # the arm is not where the outputs sent it: stop at its leash
                    y[i], v[i] = self._limits[i].clip(m + math.copysign(reach, y[i] - m)), 0.0
                    leashed.append(i)
            for i in leashed:  # a hold (or the e-stop) holds where the arm now is, not where it was
                if self._smoothed is not None:
                    self._smoothed[i] = y[i]
                if self.estopped and self._estop_target is not None:
                    self._estop_target[i] = target[i] = measured[i]
                elif self._holding:
                    self._target[i] = measured[i]
            caught = self._last.restarted if self._last is not None else ()
            self.stats.restarts += sum(self.names[i] not in caught for i in leashed)  # each time one is caught
        self._y, self._v, self._t = y, v, now
        goal = target if self.estopped else self._target  # (what the output heads for, before the low-pass)
        self._last = self._command(now, goal, command_stale, measured_stale, tuple(self.names[i] for i in leashed))
        return self._last

    # ------------------------------------------------------------------ internals

    def _fresh(self, now: float) -> list[bool]:
        """Per joint: whether its measured position is recent enough to act on (within ``watchdog_timeout``)."""
        timeout = self.config.watchdog_timeout
        return [abs(now - t) <= timeout for t in self._measured_time]

    def _reach(self, i: int) -> float:
        """How far joint ``i``'s output may lie from its measured position: ``reseed_tolerance`` plus the lag
        of an arm that follows (``tracking_lag`` × the faster of the output's speed, which the arm responds
        to late, and the arm's measured speed, which outlasts a stopping output; up to ``max_velocity``); a
        limp joint (its servo reported no load with that position and for ``limp_hold`` before it: torque off)
        follows nothing: ``limp_tolerance``. A shorter run of no load is a servo with torque on that has not yet
        heard the outputs (at rest in its dead band, its new goal still on the bus): read as limp, each reversal
        on a slow bus restarted the output at rest 0.05 rad from the arm and the arm stuttered behind it."""
        config = self.config
        if self._load_time[i] == self._measured_time[i] and self._load_time[i] - self._unloaded_since[i] >= config.limp_hold:
            return config.limp_tolerance
        speed = min(max(abs(self._measured_speed[i]), abs(self._v[i])), self._limits[i].max_velocity)
        return config.reseed_tolerance + config.tracking_lag * speed

    def _stop_point(self, i: int) -> float:
        """Where joint ``i``'s output comes to rest braking at its acceleration bound (its output without one)."""
        if self._y is None:
            return _NAN
        lim, y, v = self._limits[i], self._y[i], self._v[i]
        return lim.clip(y + v * abs(v) / (2.0 * lim.max_acceleration))

    def _smooth(self, now: float) -> list[float]:
        """The targets after the optional low-pass (``smoothing_cutoff_hz``)."""
        target = list(self._target)
        cutoff = self.config.smoothing_cutoff_hz
        if cutoff > 0 and self._t is not None and self._y is not None:
            smoothed = self._smoothed if self._smoothed is not None else list(self._y)
            alpha = 1.0 - math.exp(-2.0 * math.pi * cutoff * (now - self._t))
            target = [s + alpha * (x - s) for s, x in zip(smoothed, target, strict=True)]
            self._smoothed = target
        return target

    def _advance(self, dt: float, target: list[float]) -> tuple[list[float], list[float]]:
        """One bounded step of every joint toward ``target``."""
        assert self._y is not None
        if self._gripper_limited and self._gripper is not None:
            # grasping (closing = decreasing angle): aim no further closed than the squeeze below where the
            # gripper is measured, so an output deep inside the object eases back and the load falls
            g = self._gripper
            measured = self._measured[g]
            target = list(target)
            floor = measured - self.config.gripper_grasp_squeeze if math.isfinite(measured) else self._y[g]
            target[g] = max(target[g], floor)
        ys, vs = [], []
        for lim, y_prev, v_prev, x in zip(self._limits, self._y, self._v, target, strict=True):
            if dt < MIN_DT:
                ys.append(y_prev)
                vs.append(0.0)
                continue
            y, v = limit_step(y_prev, v_prev, x, dt, lim.lower, lim.upper, lim.max_velocity, lim.max_acceleration)
            ys.append(y)
            vs.append(v)
        grip = self._gripper
        if self._gripper_limited and grip is not None and ys[grip] < self._y[grip]:
            ys[grip], vs[grip] = self._y[grip], 0.0  # stop closing at once
        return ys, vs

    def _enter_hold(self, now: float) -> None:
        """Watchdog: every target becomes the measured position (clipped) of this moment, or, for a joint
        whose measurement is not fresh, the point where its output can stop (never an old measurement)."""
        self._holding = True
        self._commanded_in_hold = False
        fresh = self._fresh(now)
        self._target = [lim.clip(q) if ok and math.isfinite(q) else self._stop_point(i)
                        for i, (lim, q, ok) in enumerate(zip(self._limits, self._measured, fresh, strict=True))]
        self._clipped = [False] * len(self.names)

    def _has_token(self, now: float) -> bool:
        self._refill(now)
        return self._tokens >= 1.0

    def _take_token(self, now: float) -> None:
        self._refill(now)
        self._tokens = max(0.0, self._tokens - 1.0)

    def _refill(self, now: float) -> None:
        if self._token_time is not None and now > self._token_time:
            self._tokens = min(float(_BURST), self._tokens + (now - self._token_time) * self.config.max_rate_hz)
        if self._token_time is None or now > self._token_time:
            self._token_time = now

    def _update_gripper_limit(self, now: float) -> None:
        limit = self.config.gripper_load_limit
        if limit <= 0 or self._gripper is None:
            self._gripper_limited = False
            return
        timeout = self.config.gripper_load_timeout
        g = self._gripper
        # a grasp is the servo pushing its fingers closed (closing = decreasing angle) onto what stops them. A load
        # the other way is the gripper pushed open against friction or a stop, which not closing cannot relieve:
        # counted as a grasp (measured, a sticky gripper on an arm never trained on), the output stayed open of the
        # gripper, whose push open kept the load above the release threshold and the gripper stuck for the rest of
        # the motion
        load = -self._load[g] if abs(now - self._load_time[g]) <= timeout else None
        if load is not None and load > limit:
            position = self._measured[g]
            if self._gripper_loaded_since is None or not abs(position - self._gripper_loaded_at) <= GRASP_TRAVEL:
                self._gripper_loaded_since, self._gripper_loaded_at = now, position  # (re)starts: still from here
            if now - self._gripper_loaded_since >= self.config.gripper_load_hold:
                self._gripper_limited = True
        else:
            self._gripper_loaded_since = None
            if load is None or load < limit - self.config.gripper_load_hysteresis:
                self._gripper_limited = False

    def _command(self, now: float, target: list[float], command_stale: bool, measured_stale: bool,
                 restarted: tuple[str, ...]) -> SafeCommand:
        assert self._y is not None
        estopped = self.estopped
        reasons = []
        clipped = tuple(n for n, c in zip(self.names, self._clipped, strict=True) if c) if not estopped else ()
        limited = tuple(n for n, y, x in zip(self.names, self._y, target, strict=True) if abs(y - x) > 1e-9)
        if estopped:
            reasons.append(f"e-stop: {self._estop_reason}")
        else:
            if command_stale:
                reasons.append("watchdog: no command yet" if self._command_time is None else
                               f"watchdog: no command for {now - self._command_time:.3f} s")
            if measured_stale:
                reasons.append("watchdog: measured state stale")
            if clipped:
                reasons.append(f"clipped to position limits: {', '.join(clipped)}")
            if self._gripper_limited:
                reasons.append(f"gripper grasping (closing load above {self.config.gripper_load_limit:.2f} for "
                               f"{self.config.gripper_load_hold:g} s, the gripper still): not closing further, squeeze "
                               f"{self.config.gripper_grasp_squeeze:g} rad")
        if restarted:
            reasons.append(f"restarted at its leash around the measured position: {', '.join(restarted)}")
        return SafeCommand(
            stamp=now, names=self.names, positions=tuple(self._y), velocities=tuple(self._v), targets=tuple(target),
            estopped=estopped, holding=self._holding and not estopped, command_stale=command_stale,
            measured_stale=measured_stale, restarted=restarted, clipped=clipped, rate_limited=limited,
            gripper_limited=self._gripper_limited and not estopped, reasons=tuple(reasons),
            estop_reason=self._estop_reason)

    def _parse(self, names: Sequence[str], positions: Sequence[object], stamp: object
               ) -> tuple[Verdict, list[tuple[int, float]]]:
        try:
            names, positions = list(names), list(positions)
        except TypeError as err:
            return Verdict.reject(RejectReason.MALFORMED, f"names/positions are not sequences: {err}"), []
        if not names and not positions:
            return Verdict.reject(RejectReason.EMPTY, "no joint names and no positions"), []
        if len(names) != len(positions):
            return Verdict.reject(RejectReason.LENGTH_MISMATCH,
                                  f"{len(names)} names but {len(positions)} positions"), []
        if not all(isinstance(n, str) for n in names):
            return Verdict.reject(RejectReason.MALFORMED, f"joint names must be strings: {names!r}"), []
        if len(set(names)) != len(names):
            duplicates = sorted(n for n, count in Counter(names).items() if count > 1)
            return Verdict.reject(RejectReason.DUPLICATE_NAME, f"joints named more than once: {duplicates!r}"), []
        unknown = [n for n in names if n not in self._index]
        if unknown:
            return Verdict.reject(RejectReason.UNKNOWN_JOINT,
                                  f"expected some of {list(self.names)}; unknown joints {unknown!r}"), []
        converted = [_to_float(p) for p in positions]
        not_numbers = [n for n, v in zip(names, converted, strict=True) if v is None]
        if not_numbers:
            return Verdict.reject(RejectReason.MALFORMED, f"positions must be real numbers; not for {not_numbers}"), []
        values = [v for v in converted if v is not None]
        bad = [n for n, p in zip(names, values, strict=True) if not math.isfinite(p)]
        if bad:
            return Verdict.reject(RejectReason.NON_FINITE, f"position for {bad} {_NOT_FINITE}"), []
        t = _to_float(stamp)
        if t is None or not math.isfinite(t):
            return Verdict.reject(RejectReason.BAD_STAMP, f"stamp {_show(stamp)} is not a finite time"), []
        return Verdict.ok(), [(self._index[n], p) for n, p in zip(names, values, strict=True)]

    def _parse_measured(self, names: Sequence[str], positions: Sequence[object], velocities: Sequence[object],
                        efforts: Sequence[object], stamp: object) -> Verdict:
        try:
            names, positions, velocities, efforts = list(names), list(positions), list(velocities), list(efforts)
            n_velocities = len(velocities)
        except TypeError as err:
            return Verdict.reject(RejectReason.MALFORMED, f"malformed joint state: {err}")
        t = _to_float(stamp)
        if t is None:
            return Verdict.reject(RejectReason.BAD_STAMP, f"stamp {_show(stamp)} is not a number")
        if not names:
            return Verdict.reject(RejectReason.EMPTY, "joint state without names")
        if len(positions) != len(names) or n_velocities not in (0, len(names)) or len(efforts) not in (0, len(names)):
            return Verdict.reject(RejectReason.LENGTH_MISMATCH, f"{len(names)} names, {len(positions)} positions, "
                                  f"{n_velocities} velocities, {len(efforts)} efforts")
        if not math.isfinite(t):
            return Verdict.reject(RejectReason.BAD_STAMP, f"stamp {_show(stamp)} is not a finite time")
        if len({n for n in names if isinstance(n, str)}) != sum(isinstance(n, str) for n in names):
            return Verdict.reject(RejectReason.DUPLICATE_NAME, "joints named more than once")
        used = 0
        for k, name in enumerate(names):
            i = self._index.get(name) if isinstance(name, str) else None
            if i is None:
                continue
            q = _as_float(positions[k])  # not a number, NaN, ±inf or beyond the float range: not used
            if math.isfinite(q):
                speed = _as_float(velocities[k]) if velocities else 0.0
                self._measured[i] = q
                self._measured_time[i] = t
                self._measured_speed[i] = speed if math.isfinite(speed) else 0.0
                used += 1
            if efforts:
                effort = _as_float(efforts[k])
                if math.isfinite(effort):
                    load = effort / self._limits[i].max_effort
                    if abs(load) >= self.config.limp_load:
                        self._unloaded_since[i] = math.inf
                    elif self._unloaded_since[i] == math.inf:  # the first of a run of no-load readings
                        self._unloaded_since[i] = t
                    self._load[i], self._load_time[i] = load, t
        if not used:
            return Verdict.reject(RejectReason.UNKNOWN_JOINT if not any(n in self._index for n in names)
                                  else RejectReason.NON_FINITE, "no usable joint position in the measured state")
        return Verdict.ok()


_NOT_FINITE = "is NaN, infinite or beyond the float range"


def _to_float(value: object) -> float | None:
    """A real number of any type and size as a float (±inf beyond the float range); None for anything
    else (text, bools, complex numbers, None, containers): only numbers are taken as numbers."""
    if type(value) is float:  # what every ROS message holds: skip the slow abstract-class checks below
        return value
    if isinstance(value, (bool, str, bytes, bytearray)):
        return None
    if not isinstance(value, (numbers.Real, Decimal)):
        if isinstance(value, numbers.Number):  # complex
            return None
        try:  # numpy 0-d arrays and other objects that say they are real numbers
            return float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):
            return None
    try:
        return float(value)
    except OverflowError:  # an int/Fraction/Decimal too large for a float
        return math.inf
    except (TypeError, ValueError):
        return None


def _as_float(value: object) -> float:
    number = _to_float(value)
    return _NAN if number is None else number


def _show(value: object) -> str:
    """A bounded repr for messages (10**400 has 401 digits)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
