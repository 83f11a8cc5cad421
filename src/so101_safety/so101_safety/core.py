"""The safety filter: validates commands, bounds the output and holds on stale input or e-stop (no rclpy).

Time is passed in by the caller (seconds on any monotonic clock shared by all calls); nothing here
reads a wall clock, so every behaviour is reproducible in tests.

Guarantees, whatever the inputs (see the package README for the exact statement):

1. no output until a measured position is known for every joint;
2. every output position lies in ``[lower + margin, upper − margin]`` of its joint;
3. between consecutive outputs at times ``t₋`` and ``t`` (``dt = t − t₋``), unless the second one is a
   *reseed* (it then equals the clipped measured position, the arm's own position) or either one is
   e-stopped: ``|y − y₋| ≤ v_max·dt`` and ``|v − v₋| ≤ a_max·dt`` with ``v = (y − y₋)/dt`` and ``v₋``
   the previous step's velocity (0 after a reseed or an e-stop). One exception to the acceleration
   bound: a closing gripper stops at once (``y = y₋``) when its load limit is exceeded;
4. while e-stopped the output is the position held when the e-stop latched, unchanged until
   :meth:`SafetyFilter.reset`;
5. with no accepted command for ``watchdog_timeout`` (or no measured state for as long), the target of
   every joint becomes the measured position at that moment (clipped) and stays there until a new
   command arrives; the output brakes onto it within the bounds of 3.

When to step: the node steps on every accepted command as it arrives (the bounds of 3 use the real
time since the previous output) and on a timer only when :meth:`SafetyFilter.tick_due` says the output
has something to do on its own (e-stop, watchdog hold, not yet at its target). The guarantees hold for
any sequence of ``step`` times.

Reseeds happen on the first output, at the first step after a reset, and when a command ends a watchdog
hold (output at rest), each when the measured position is further than ``reseed_tolerance`` from the
last output; the command that ends the hold a reset started is rate limited (one restart per reset).
"""

from __future__ import annotations

import enum
import math
import numbers
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from so101_common.joints import JOINT_NAMES
from so101_safety.config import SafetyConfig
from so101_safety.limiter import MIN_DT, limit_step

__all__ = ["RejectReason", "Verdict", "SafeCommand", "FilterStats", "SafetyFilter"]

_NAN = float("nan")
_REST = 1e-6  # rad/s: below this every joint counts as at rest


class RejectReason(enum.Enum):
    """Why a message was not used."""

    EMPTY = "empty"  # no names and no positions
    LENGTH_MISMATCH = "length_mismatch"  # names and positions (or velocities/efforts) differ in length
    DUPLICATE_NAME = "duplicate_name"  # a joint named twice
    UNKNOWN_JOINT = "unknown_joint"  # a name that is not an SO-101 joint
    NON_FINITE = "non_finite"  # NaN or ±inf in a position
    MALFORMED = "malformed"  # names that are not strings, values that are not numbers
    BAD_STAMP = "bad_stamp"  # a non-finite time
    ESTOPPED = "estopped"  # a valid command while the e-stop is latched (ignored)


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
        return cls(False, reason, detail)


@dataclass(frozen=True)
class SafeCommand:
    """What to publish this tick: a position for every joint plus the filter's state."""

    stamp: float  # s, the ``now`` of the step
    names: tuple[str, ...]
    positions: tuple[float, ...]  # rad, within the margins
    velocities: tuple[float, ...]  # rad/s, (y − y₋)/dt of this step (0 when reseeded or e-stopped)
    targets: tuple[float, ...] = ()  # rad, what each joint is heading for (commanded, clipped; or the hold)
    estopped: bool = False
    holding: bool = False  # watchdog hold: the target is the measured position latched at the hold
    command_stale: bool = False  # no accepted command within the watchdog timeout (or none yet)
    measured_stale: bool = False  # no measured state within the watchdog timeout
    reseeded: bool = False  # this output restarts from the measured position (no motion bound applies)
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
        self._load: tuple[float, float] | None = None  # (fraction of max effort, stamp) from the gripper's effort
        # command state
        self._target = [_NAN] * n  # clipped targets; NaN = take the measured position
        self._clipped = [False] * n
        self._command_time: float | None = None
        # output state
        self._y: list[float] | None = None
        self._v = [0.0] * n
        self._t: float | None = None
        self._smoothed: list[float] | None = None
        self._last: SafeCommand | None = None
        self._holding = False
        self._commanded_in_hold = False  # a command arrived after the hold latched
        self._check_reseed = False  # the next step restarts from the measured position if it is far
        # leaving a watchdog hold checks for a restart; leaving the hold a reset started does not: the
        # reset's own check ran at its first step, and a second one would drop a command's rate limits
        self._reseed_on_release = False
        self._gripper_limited = False
        self._estop_reason: str | None = None
        self._estop_hold: list[float] | None = None

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
            self._enter_hold()  # the stream had stalled: joints this command leaves out keep the hold
        clipped = []
        for i, value in parsed:
            lim = self._limits[i]
            self._target[i] = lim.clip(value)
            self._clipped[i] = not lim.lower <= value <= lim.upper
            if self._clipped[i]:
                clipped.append(self.names[i])
        self._command_time = stamp_s if self._command_time is None else max(stamp_s, self._command_time)
        self._commanded_in_hold = self._holding
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
        """Latch the e-stop: the output freezes where it is until :meth:`reset`."""
        if not self.estopped:
            self.stats.estops += 1
            self._estop_reason = str(reason) or "e-stop"
            self._estop_hold = list(self._y) if self._y is not None else None

    def reset(self) -> bool:
        """Release a latched e-stop; returns False (and changes nothing) when none was latched.

        Targets fall back to the measured position and the filter holds there until a new command
        arrives; the output restarts from the measured position if that is further than
        ``reseed_tolerance`` from where it was held."""
        if not self.estopped:
            return False
        self._estop_reason = None
        self._estop_hold = None
        self._target = [_NAN] * len(self.names)
        self._clipped = [False] * len(self.names)
        self._command_time = None
        self._holding = True
        self._commanded_in_hold = False
        self._check_reseed = True
        self._reseed_on_release = False
        self.stats.resets += 1
        return True

    # ------------------------------------------------------------------ output

    def tick_due(self, now: float, period: float) -> bool:
        """Whether a timer tick at ``now`` should :meth:`step` (and publish): the node steps on every
        accepted command at its arrival and ticks only for what no command brings.

        Due when nothing was output yet, or when no output went out within ``period`` *and* the output
        has something to do on its own: the e-stop or the watchdog hold is on (or due now: the command
        or the measured state went stale), or the output has not reached its target (rate limited,
        smoothing, a gripper limit) and no command came within ``2·period`` (the commands carry it
        while they flow). A tick never lands just before a command of a live stream and cuts that
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
            return True
        if now - self._t < period:
            return False
        timeout = self.config.watchdog_timeout
        command_stale = self._command_time is None or abs(now - self._command_time) > timeout
        measured_stale = any(abs(now - t) > timeout for t in self._measured_time)
        if self.estopped or self._holding or command_stale or measured_stale:
            return True
        between_commands = self._command_time is None or abs(now - self._command_time) >= 2.0 * period
        return bool(last.rate_limited) and between_commands

    def step(self, now: object) -> SafeCommand | None:
        """The command to publish at ``now``, a real number of any type (None before a measured state is
        known or for a bad ``now``: one that is not a finite real number, counted in ``stats.bad_step_times``)."""
        t = _to_float(now)
        if t is None or not math.isfinite(t):
            self.stats.bad_step_times += 1
            return None
        now = t
        if not self.measured_known:
            return None
        if self.estopped:
            return self._step_estopped(now)
        if self._t is not None and now - self._t < MIN_DT and self._last is not None:
            return self._last  # no time has passed (or it went backwards): repeat, change nothing
        self.stats.steps += 1
        measured = [lim.clip(q) for lim, q in zip(self._limits, self._measured, strict=True)]
        command_stale = self._command_time is None or abs(now - self._command_time) > self.config.watchdog_timeout
        measured_stale = any(abs(now - t) > self.config.watchdog_timeout for t in self._measured_time)
        if command_stale or measured_stale:
            if not self._holding or self._commanded_in_hold:
                self._enter_hold()  # (again, if a command came in but is stale already: hold means hold)
        elif self._holding:
            self._holding = False
            self._check_reseed = self._check_reseed or (self._reseed_on_release and all(abs(v) <= _REST for v in self._v))
        self._target = [m if math.isnan(x) else x for x, m in zip(self._target, measured, strict=True)]
        reseed = self._y is None or self._t is None
        if self._check_reseed and self._y is not None:
            reseed = reseed or max(abs(m - y) for m, y in zip(measured, self._y, strict=True)) > self.config.reseed_tolerance
            self._check_reseed = False
        self._update_gripper_limit(now)
        if reseed:
            y, v = measured, [0.0] * len(measured)
            self._smoothed = list(measured)
        else:
            y, v = self._advance(now - self._t)  # type: ignore[operator]
        self._y, self._v, self._t = y, v, now
        self._last = self._command(now, command_stale, measured_stale, reseed)
        return self._last

    # ------------------------------------------------------------------ internals

    def _advance(self, dt: float) -> tuple[list[float], list[float]]:
        assert self._y is not None
        target = list(self._target)
        cutoff = self.config.smoothing_cutoff_hz
        if cutoff > 0:
            smoothed = self._smoothed if self._smoothed is not None else list(self._y)
            alpha = 1.0 - math.exp(-2.0 * math.pi * cutoff * dt)
            target = [s + alpha * (x - s) for s, x in zip(smoothed, target, strict=True)]
            self._smoothed = target
        if self._gripper_limited and self._gripper is not None:
            g = self._gripper  # closing = decreasing angle: never aim below where the gripper is now
            target[g] = max(target[g], self._y[g])
        ys, vs = [], []
        for lim, y_prev, v_prev, x in zip(self._limits, self._y, self._v, target, strict=True):
            y, v = limit_step(y_prev, v_prev, x, dt, lim.lower, lim.upper, lim.max_velocity, lim.max_acceleration)
            ys.append(y)
            vs.append(v)
        if self._gripper_limited and self._gripper is not None and ys[self._gripper] < self._y[self._gripper]:
            ys[self._gripper], vs[self._gripper] = self._y[self._gripper], 0.0  # stop closing at once
        return ys, vs

    def _step_estopped(self, now: float) -> SafeCommand:
        if self._estop_hold is None:
            self._estop_hold = list(self._y) if self._y is not None else [
                lim.clip(q) for lim, q in zip(self._limits, self._measured, strict=True)]
        self._y, self._v, self._t = list(self._estop_hold), [0.0] * len(self.names), now
        self._smoothed = None
        self.stats.steps += 1
        self._last = self._command(now, False, False, False)
        return self._last

    def _enter_hold(self) -> None:
        """Watchdog: every target becomes the measured position (clipped) of this moment."""
        self._holding = True
        self._commanded_in_hold = False
        self._reseed_on_release = True
        self._target = [lim.clip(q) if math.isfinite(q) else _NAN for lim, q in zip(self._limits, self._measured, strict=True)]
        self._clipped = [False] * len(self.names)

    def _update_gripper_limit(self, now: float) -> None:
        limit = self.config.gripper_load_limit
        if limit <= 0 or self._gripper is None:
            self._gripper_limited = False
            return
        timeout = self.config.gripper_load_timeout
        load = self._load[0] if self._load is not None and abs(now - self._load[1]) <= timeout else None
        if load is not None and load > limit:
            self._gripper_limited = True
        elif load is None or load < limit - self.config.gripper_load_hysteresis:
            self._gripper_limited = False

    def _command(self, now: float, command_stale: bool, measured_stale: bool, reseed: bool) -> SafeCommand:
        assert self._y is not None
        estopped = self.estopped
        reasons = []
        clipped = tuple(n for n, c in zip(self.names, self._clipped, strict=True) if c) if not estopped else ()
        limited = () if estopped else tuple(
            n for n, y, x in zip(self.names, self._y, self._target, strict=True) if abs(y - x) > 1e-9)
        if estopped:
            reasons.append(f"e-stop: {self._estop_reason}")
        else:
            if command_stale:
                reasons.append("watchdog: no command yet" if self._command_time is None else
                               f"watchdog: no command for {now - self._command_time:.3f} s")
            if measured_stale:
                reasons.append("watchdog: measured state stale")
            if reseed:
                reasons.append("restarted from the measured position")
            if clipped:
                reasons.append(f"clipped to position limits: {', '.join(clipped)}")
            if self._gripper_limited:
                reasons.append(f"gripper load above {self.config.gripper_load_limit:.2f}: not closing further")
        return SafeCommand(
            stamp=now, names=self.names, positions=tuple(self._y), velocities=tuple(self._v),
            targets=tuple(self._y) if estopped else tuple(self._target),
            estopped=estopped, holding=self._holding and not estopped, command_stale=command_stale,
            measured_stale=measured_stale, reseeded=reseed, clipped=clipped, rate_limited=limited,
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
            return Verdict.reject(RejectReason.MALFORMED, f"joint names must be strings: {names!r}"[:200]), []
        if len(set(names)) != len(names):
            duplicates = sorted(n for n, count in Counter(names).items() if count > 1)
            return Verdict.reject(RejectReason.DUPLICATE_NAME, f"joints named more than once: {duplicates}"), []
        unknown = [n for n in names if n not in self._index]
        if unknown:
            return Verdict.reject(RejectReason.UNKNOWN_JOINT,
                                  f"unknown joints {unknown!r}"[:200] + f"; expected some of {list(self.names)}"), []
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
            names, positions, efforts = list(names), list(positions), list(efforts)
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
                self._measured[i] = q
                self._measured_time[i] = t
                used += 1
            if i == self._gripper and efforts:
                effort = _as_float(efforts[k])
                if math.isfinite(effort):
                    self._load = (abs(effort) / self._limits[i].max_effort, t)
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
