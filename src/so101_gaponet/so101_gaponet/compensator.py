"""The compensator core (no rclpy): history window, model step, bounded and NaN-safe output.

One call of :meth:`Compensator.compensate` is one control step: it appends a history row
(latest measured position and velocity, and the command sent to the arm on the previous step),
then asks the model for Δ given the policy's command and, for a look-ahead model
(``future_steps > 1``), the upcoming commands (held at the last one given, so a policy without
action chunks gets the current command held), adds the integral feedback (``feedback_gain`` per
joint and step, on the error between the previous step's policy command and the measured position,
where the sim would be; bounded like Δ, frozen while Δ is clipped and while that error is beyond
the bound; with ``direction_play`` > 0 one correction per direction of the reference's motion, since
dry friction flips with it), and returns ``command + Δ`` with Δ
shaped in three stages: clipped to the per-joint bounds (and, where the safety filter holds a joint's goal back,
so that the output stays within the commands ahead: :meth:`Compensator.goal_reached`), low-passed (first order, time constant
``delta_smoothing_s``) and slew-limited (at most ``delta_slew_limit`` rad change per step). The last two keep a model that feeds back on its own previous commands from
turning the compensator into a high-gain loop around the arm: a constant command on a settled arm
gives a constant output. The bounds and the slew limit never exceed the deployment's caps
(``max_delta``, ``max_delta_rate``): a model asking for more is refused (:mod:`so101_gaponet.bounds`),
one without a slew limit gets the rate cap. Without a model, while disabled, or until the window holds
``history`` rows (warm-up) the command passes through unchanged (Δ = 0) — but the history keeps
filling, so enabling mid-run is safe at once.

The **guard** (:class:`DeltaGuard`) watches, per joint, whether compensation makes the tracking error
larger than it would be without, and shrinks that joint's Δ towards zero when it does; it judges the Δ that
reached the servos when told the goals the arm got (:meth:`Compensator.goal_reached`: the safety filter's output).
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import numpy as np

from so101_common.diagnostics import Level
from so101_common.joints import LEROBOT_STEPS_PER_TURN, OVERLOAD_PROTECTION_S
from so101_common.joints import joint as joint_spec
from so101_gaponet.bounds import (
    COMPENSATOR_MAX_DELTA,
    COMPENSATOR_MAX_DELTA_RATE,
    RELATIVE_TOLERANCE,
    check_model_within_caps,
    per_joint,
)
from so101_gaponet.runtime import GapModel

__all__ = ["CompensatorConfig", "CompensatorError", "Compensator", "DeltaGuard", "GuardSettings", "StepResult"]

_log = logging.getLogger(__name__)

# When the integral stops pushing a joint harder: its load (fraction of max effort) the way the correction pushes,
# held for a time, under the servo's overload protection (so101_common.joints: a joint's ``overload``, held for
# OVERLOAD_PROTECTION_S, switches its torque off).
# - The gripper (LeRobot: 25 %): at once, 0.05 under it. Measured without it: on a held-out arm the integral pushed a
#   gripper that stiction held one count from its target for 16 s, to 34 % load, and it tripped (8 of 30 real SAGE
#   motions).
# - The arm joints (80 %): 0.02 under it for half the protection time (an easing correction brings the load under
#   the threshold, which restarts the servo's timer). Gravity needs loads near it: a limit at once at 0.6 cost
#   heavy_payload's shoulder_lift 86 → 43 %, at 0.75 population~2003's elbow_flex 80 → 47 % (measured); one held only
#   past half the protection time acts where the servo would trip.
GRIPPER_LOAD_MARGIN = 0.05
SERVO_LOAD_MARGIN = 0.02
SERVO_LOAD_HOLD_S = OVERLOAD_PROTECTION_S / 2
# Steps a history row may wait for a sample taken at or after its instant; a row older than this is written with
# the newest sample (the driver stalled, or its clock is not this one's): 160 ms at 50 Hz, beyond any bus round trip.
MAX_UNCOVERED_STEPS = 8
# Half an encoder step in the driver's units (LeRobot's mapping: 2π/4095 rad a step; the gripper's, span over its
# calibrated range, is within 0.1 % of it on the virtual arm), plus the float rounding of that map. The driver's
# positions are steps through the calibration's affine map, and a target need not be a step (LeRobot calibrates
# wrist_roll over the full turn: its zero lies between two), so a servo at its goal reads up to half a step off the
# command: an error the integral leaves alone.
ENCODER_ROUNDING = math.pi / LEROBOT_STEPS_PER_TURN * (1.0 + 1e-6)
# The safety filter holds a joint's goal back (its speed and acceleration bounds at work) where the goal it gave the
# arm lies further than FILTER_HOLD (rad) from the output sent and has moved more than an encoder step towards it
# since its previous goal; a goal that stays put that far from the output is the filter's leash around an arm that
# does not follow (a stuck, gravity-loaded lift), whose correction must stay. Chosen on the validation arms (without
# the test of the goal's motion, a stuck lift lost 22 points there); counting any hold (half an encoder step) took
# lift and elbow from 62 / 55 to 27 / 24 % on the arm it was developed on (research notes).
FILTER_HOLD = 0.05
ENCODER_STEP = 2.0 * math.pi / LEROBOT_STEPS_PER_TURN
# The model's Δ per joint is scaled by how much lead the arm it drives needs (Compensator._adapt_lead): a model trained
# on one arm leads some arms too much (they overshoot the reference: the shipped model on an arm whose servos' D gain
# is 0.42 of the default's) and others too little. A normalised LMS on the tracking error against the model's Δ of
# LEAD_DELAY_STEPS before (the servo's response to a goal comes a few steps later; both placed by the sample's stamp:
# Compensator._lead_alignment), both less their 1 s means (the integral's offsets are not the lead's), while the
# reference moves and the safety filter passes the goal. Chosen on the validation arms (population~1000…1007, the
# four evaluation motions): rate 0.004 per step (~5 s to adapt), 3 steps of delay; 0.002, 0.008 and 5 steps were
# level or worse there (research notes, "A lead adapted in context").
LEAD_ADAPTATION_RATE = 0.004
LEAD_DELAY_STEPS = 3
LEAD_SCALE_RANGE = (0.3, 1.5)
# (rad²) the power of Δ's variation under which the normalisation holds the rate down: (5 mrad)², so a Δ that barely
# varies (a joint nearly at rest) does not move the scale by its noise
LEAD_POWER_FLOOR = 2.5e-5
LEAD_MEAN_S = 1.0  # the running means' time constant (s)
# Steps of (time, command, Δ) kept to place a sample among them: the oldest sample a history row waits for, and the
# lead's delay before it
LEAD_LOG_STEPS = MAX_UNCOVERED_STEPS + LEAD_DELAY_STEPS + 1
# Where a joint is after the policy's reference last reversed (Compensator._overshoots: who learns a reversal's overshoot).
SETTLED = 0  # nothing to watch: before any reversal, or once the reversal's transient is over
REVERSED = 1  # the reference reversed and is still at its turning point
FOLLOWING = 2  # the reference moves the new way
OVERSHOOTING = 3  # the arm went past the reference the new way, moving that way: the jump of the correction was too large


def _at(log: deque[tuple[float, list[float], list[float]]], when: float, field: Literal[1, 2]) -> list[float]:
    """``field`` (1: the command, 2: the model's Δ) of the steps in ``log`` at time ``when``, linear between the two
    steps around it; the oldest or newest step's outside them."""
    later = log[-1]
    if when >= later[0]:
        return later[field]
    for index in range(len(log) - 2, -1, -1):
        earlier = log[index]
        if earlier[0] <= when:
            share = (when - earlier[0]) / (later[0] - earlier[0]) if later[0] > earlier[0] else 1.0
            return [a + share * (b - a) for a, b in zip(earlier[field], later[field], strict=True)]
        later = earlier
    return later[field]


def default_load_limit(name: str) -> tuple[float, float]:
    """``(load, hold s)`` above which the integral eases joint ``name``'s correction (see above)."""
    spec = joint_spec(name)
    if spec.is_gripper:
        return spec.overload - GRIPPER_LOAD_MARGIN, 0.0
    return spec.overload - SERVO_LOAD_MARGIN, SERVO_LOAD_HOLD_S


class CompensatorError(ValueError):
    """Bad input to the compensator (wrong vector length, bad bounds)."""


@dataclass(frozen=True)
class GuardSettings:
    """How the guard judges a joint's Δ (see :class:`DeltaGuard`)."""

    window_s: float = 1.0  # s of measurements per judgement
    response_s: float = 0.1  # s: the arm's response to a change of its goal (first-order time constant)
    margin: float = 0.1  # a window counts against Δ by how far its RMS error ratio (with / without) exceeds 1 + margin
    evidence: float = 1.5  # ... and Δ is shrunk once those excesses multiply to this ratio (a cumulative sum of logs)
    floor: float = 0.0005  # rad: Δ's RMS effect below this is not judged (nothing to tell apart)
    shrink: float = 0.25  # the scale's factor after Δ is judged worse (below 0.1: 0)

    def __post_init__(self) -> None:
        values = (self.window_s, self.response_s, self.margin, self.floor, self.shrink)
        if not all(math.isfinite(v) and v > 0 for v in values) or self.shrink >= 1 or not self.evidence > 1:
            raise CompensatorError(f"guard settings must be finite and > 0 (shrink < 1, evidence > 1), got {self}")


class DeltaGuard:
    """Per joint: is compensation making the tracking error worse? If so, shrink that joint's Δ towards zero.

    The expected response is the feed-forward's own prediction: the arm follows the policy's commands one
    step behind, as the sim does, so the tracking error is ``previous command − measured position``. What
    the error would be without compensation is estimated from what Δ did to the arm: a goal offset moves a
    position servo by the same offset after its response time, so the arm's position less the first-order
    response (``response_s``) to the Δ sent is the uncompensated arm. Over each window of ``window_s`` of
    measurements (in which Δ moved the arm by at least ``floor``) the ratio of the RMS error with Δ to that
    estimate without it is judged: how far it exceeds ``1 + margin`` adds to the evidence against the joint's Δ
    (a cumulative sum of log ratios, floored at 0, so a single noisy window does not decide); once the evidence
    reaches ``evidence`` the joint's scale is multiplied by ``shrink`` (below 0.1: zero) and the event is
    counted. A shrunk scale comes back the same way, judged on the Δ it holds back (the Δ the core would send at
    scale 1, whose estimated effect the guard tracks beside the applied one: a joint at scale 0 has no effect of its
    own to judge, and judged by it would stay at 0 for good): evidence for that Δ (how far the ratio of the error it
    would leave to the error without Δ falls below ``1 − margin``) adds up, floored at 0, and once it reaches
    ``evidence`` the scale doubles (from 0: to 0.1), up to 1 (one window
    that seems to favour Δ does not undo a shrink: on an arm behind a safety filter that bounds the goals' speed
    and acceleration the first-order estimate is off in single windows, either way). Told the goals the arm got
    (:meth:`reached`), the estimate follows the Δ that reached the servos: the goal less the policy's command,
    which is Δ as the filter let it through while the policy's own command is within the filter's bounds.
    The core multiplies the joint's Δ by the scale before its slew limit (no jump) and holds the joint's
    integral correction while the scale is below 1.
    """

    def __init__(self, joints: tuple[str, ...], settings: GuardSettings, step_s: float) -> None:
        self.joints, self.settings = joints, settings
        count = len(joints)
        self.scale = [1.0] * count
        self.events = 0
        self.last_event = ""
        self._keep = math.exp(-step_s / settings.response_s) if step_s > 0 else 0.0
        self._window = max(1, round(settings.window_s / step_s)) if step_s > 0 else 1
        self._effect = [0.0] * count  # the estimated effect of Δ on the measured position (rad)
        self._before = [0.0] * count  # the effect before this step's Δ (to redo the step with the Δ that reached the arm)
        self._full = [0.0] * count  # the estimated effect of the Δ the core would send unshrunk (= _effect at scale 1)
        # error² with, error² without, effect², count, error² with the unshrunk Δ, its effect²
        self._sums = [[0.0, 0.0, 0.0, 0, 0.0, 0.0] for _ in range(count)]
        self._against = [0.0] * count  # the evidence against Δ so far: Σ log(ratio / (1 + margin)), floored at 0
        self._for = [0.0] * count  # the evidence for a shrunk Δ: Σ log((1 − margin) / ratio), floored at 0

    def observe(self, joint: int, error: float) -> None:
        """A fresh tracking error (``previous command − measured position``) of ``joint``."""
        sums = self._sums[joint]
        effect, full = self._effect[joint], self._full[joint]
        without = error + effect
        unshrunk = without - full
        sums[0] += error * error
        sums[1] += without * without
        sums[2] += effect * effect
        sums[3] += 1
        sums[4] += unshrunk * unshrunk
        sums[5] += full * full
        if sums[3] >= self._window:
            self._judge(joint, sums)

    def sent(self, joint: int, delta: float, unshrunk: float | None = None) -> None:
        """The Δ sent to ``joint`` this step (its effect on the arm follows with the response time); ``unshrunk``:
        the Δ the core would have sent at scale 1 (default: ``delta``), what a shrunk joint is judged to come back by."""
        self._before[joint] = self._effect[joint]
        self._effect[joint] = delta + self._keep * (self._effect[joint] - delta)
        full = delta if unshrunk is None else unshrunk
        self._full[joint] = full + self._keep * (self._full[joint] - full)

    def reached(self, joint: int, delta: float) -> None:
        """The Δ that reached ``joint``'s servo this step, where the chain bounds the goal after the compensator
        (the safety filter's speed and acceleration bounds): it replaces the Δ sent in this step's effect."""
        self._effect[joint] = delta + self._keep * (self._before[joint] - delta)

    def clear(self) -> None:
        """A passthrough step: Δ is 0 and the windows start again (the scales are kept)."""
        self._effect = [0.0] * len(self._effect)
        self._before = [0.0] * len(self._before)
        self._full = [0.0] * len(self._full)
        self._sums = [[0.0, 0.0, 0.0, 0, 0.0, 0.0] for _ in self._sums]

    def _judge(self, joint: int, sums: list[float]) -> None:
        with_delta, without, effect, count, unshrunk, full = sums
        sums[:] = [0.0, 0.0, 0.0, 0, 0.0, 0.0]
        settings = self.settings
        if self.scale[joint] < 1.0 and self._judge_return(joint, unshrunk, without, full / count):
            return
        if effect / count < settings.floor ** 2:
            return
        ratio = math.sqrt(with_delta / max(without, 1e-18))
        self._against[joint] = max(0.0, self._against[joint] + math.log(max(ratio, 1e-9) / (1.0 + settings.margin)))
        if self._against[joint] > math.log(settings.evidence) and self.scale[joint] > 0.0:
            self._against[joint] = self._for[joint] = 0.0
            scale = self.scale[joint] * settings.shrink
            self.scale[joint] = scale if scale >= 0.1 else 0.0
            self.events += 1
            self.last_event = (f"{self.joints[joint]}: RMS tracking error {math.sqrt(with_delta / count):.4f} rad with Δ, "
                               f"about {math.sqrt(without / count):.4f} without: Δ scaled to {self.scale[joint]:g}")
            _log.warning("compensation guard: %s", self.last_event)

    def _judge_return(self, joint: int, unshrunk: float, without: float, full: float) -> bool:
        """A shrunk joint's way back, judged on the Δ it holds back: the error the unshrunk Δ would leave against the
        error without Δ (a joint at scale 0 has no Δ of its own to judge). True when the scale grew."""
        settings = self.settings
        if full < settings.floor ** 2:
            return False
        ratio = math.sqrt(unshrunk / max(without, 1e-18))
        self._for[joint] = max(0.0, self._for[joint] + math.log((1.0 - settings.margin) / max(ratio, 1e-9)))
        if self._for[joint] > math.log(settings.evidence):
            self._for[joint] = 0.0
            self.scale[joint] = min(1.0, max(self.scale[joint], 0.05) * 2.0)
            return True
        return False


@dataclass(frozen=True)
class CompensatorConfig:
    """Run-time settings of the compensator core."""

    joints: tuple[str, ...]  # order of every vector passed in and out
    enabled: bool = True  # False: passthrough (Δ = 0) while the history keeps filling
    delta_bounds: tuple[float, ...] | None = None  # |Δ| limit per joint (rad); None: the model's own bounds
    # Largest change of Δ per step per joint (rad/step); None: the model's (no limit if it has none).
    delta_slew_limit: tuple[float, ...] | None = None
    delta_smoothing_s: float | None = None  # time constant of the low-pass on Δ (s, 0 = off); None: the model's
    # Integral feedback per joint (1/step, 0 = off); None: the model's (none if it has none).
    feedback_gain: tuple[float, ...] | None = None
    # Width (rad) of the play operator that tells which way the policy's reference moves; the integral
    # keeps one correction per direction (see Compensator._integrate). None: the model's; 0: one correction.
    direction_play: float | None = None
    # Per joint, the load (fraction of max effort, from the measured effort) above which, held for load_hold_s
    # (s), the integral eases that joint's correction instead of pushing further the way the servo already pushes
    # (inf: no limit); None: default_load_limit (under the servo's overload protection: 0.2 at once on the
    # gripper, 0.78 held for 1 s on the arm joints).
    load_limits: tuple[float, ...] | None = None
    load_hold_s: tuple[float, ...] | None = None
    latency_window: int = 1000  # steps kept for the latency percentiles
    # The deployment's caps (one value or one per joint): |Δ| (rad) and its rate of change (rad/s). A model's
    # metadata and the overrides above may narrow them, never widen them (so101_gaponet.bounds).
    max_delta: float | tuple[float, ...] = COMPENSATOR_MAX_DELTA
    max_delta_rate: float | tuple[float, ...] = COMPENSATOR_MAX_DELTA_RATE
    # None (default): no guard, Δ as the model and the feedback give it. Measured on held-out arms with the shipped
    # model, the guard also shrinks Δ where compensation helps (it judges 1 s windows, some of which compensation
    # does make worse, and recovers by doubling): opt-in, for a model that is not trusted.
    guard: GuardSettings | None = None

    def __post_init__(self) -> None:
        if not self.joints:
            raise CompensatorError("joints must not be empty")
        try:
            object.__setattr__(self, "max_delta", per_joint(self.max_delta, self.joints, "max_delta"))
            object.__setattr__(self, "max_delta_rate", per_joint(self.max_delta_rate, self.joints, "max_delta_rate"))
        except ValueError as err:
            raise CompensatorError(str(err)) from None
        if self.delta_bounds is not None:
            if len(self.delta_bounds) != len(self.joints):
                raise CompensatorError(f"delta_bounds has {len(self.delta_bounds)} values for {len(self.joints)} joints")
            if not all(math.isfinite(b) and b >= 0 for b in self.delta_bounds):
                raise CompensatorError(f"delta_bounds must be finite and ≥ 0, got {self.delta_bounds}")
            for joint, bound, cap in zip(self.joints, self.delta_bounds, self.caps[0], strict=True):
                if bound > cap * (1 + RELATIVE_TOLERANCE):
                    raise CompensatorError(f"delta_bounds: {joint} {bound:g} rad is above the deployment's cap "
                                           f"max_delta {cap:g} rad")
        if self.delta_slew_limit is not None:
            if len(self.delta_slew_limit) != len(self.joints):
                raise CompensatorError(f"delta_slew_limit has {len(self.delta_slew_limit)} values for {len(self.joints)} joints")
            if not all(math.isfinite(b) and b > 0 for b in self.delta_slew_limit):
                raise CompensatorError(f"delta_slew_limit must be finite and > 0 (rad/step), got {self.delta_slew_limit}")
        if self.feedback_gain is not None:
            if len(self.feedback_gain) != len(self.joints):
                raise CompensatorError(f"feedback_gain has {len(self.feedback_gain)} values for {len(self.joints)} joints")
            if not all(math.isfinite(g) and 0 <= g < 0.5 for g in self.feedback_gain):
                raise CompensatorError(f"feedback_gain must be in [0, 0.5) per step, got {self.feedback_gain}")
        if self.direction_play is not None and not (math.isfinite(self.direction_play) and self.direction_play >= 0):
            raise CompensatorError(f"direction_play must be finite and ≥ 0 (rad), got {self.direction_play}")
        if self.load_limits is not None and (len(self.load_limits) != len(self.joints) or
                                             not all(x > 0 for x in self.load_limits)):
            raise CompensatorError(f"load_limits needs one value > 0 (or inf) per joint, got {self.load_limits}")
        if self.load_hold_s is not None and (len(self.load_hold_s) != len(self.joints) or
                                             not all(math.isfinite(x) and x >= 0 for x in self.load_hold_s)):
            raise CompensatorError(f"load_hold_s needs one finite value ≥ 0 (s) per joint, got {self.load_hold_s}")
        if self.delta_smoothing_s is not None and not (math.isfinite(self.delta_smoothing_s) and self.delta_smoothing_s >= 0):
            raise CompensatorError(f"delta_smoothing_s must be finite and ≥ 0 (s), got {self.delta_smoothing_s}")
        if self.latency_window < 1:
            raise CompensatorError("latency_window must be ≥ 1")

    @property
    def caps(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """``(max_delta, max_delta_rate)`` per joint (rad, rad/s)."""
        return cast("tuple[float, ...]", self.max_delta), cast("tuple[float, ...]", self.max_delta_rate)


@dataclass
class StepResult:
    """What one control step produced."""

    command: np.ndarray  # compensated command (rad)
    delta: np.ndarray  # applied Δ (rad, after clipping)
    compensated: bool  # False on passthrough (no model, disabled, warming up, fault)
    fault: bool = False  # the model returned NaN/inf on this step
    latency_s: float = 0.0


@dataclass
class _Stats:
    steps: int = 0
    compensated_steps: int = 0
    faults: int = 0
    clipped_steps: int = 0
    slew_limited_steps: int = 0
    out_of_bounds_steps: int = 0  # steps where the model asked for a Δ beyond the bounds in force (then clipped)
    last_fault: str = ""
    latencies: list[float] = field(default_factory=list)


class Compensator:
    """History ring buffer + model + output assembly; one instance per command stream."""

    def __init__(self, config: CompensatorConfig, model: GapModel | None = None) -> None:
        self.config = config
        self.model = model
        self.enabled = config.enabled
        joints = len(config.joints)
        max_delta, max_delta_rate = config.caps
        if model is not None:
            model.metadata.check_against(config.joints, role="compensator")
            check_model_within_caps(model.metadata, model.path, max_delta, max_delta_rate)
        self._history_len = model.metadata.history if model is not None else 1
        # rows measured before the model runs (a long window starts filled with the first measurement)
        self._warmup_rows = (model.metadata.warmup_rows or self._history_len) if model is not None else 1
        self.future_steps = model.metadata.future_steps if model is not None else 1
        bounds = config.delta_bounds if config.delta_bounds is not None else (
            model.metadata.delta_bounds if model is not None else (0.0,) * joints)
        self.delta_bounds = np.asarray(bounds, dtype=np.float64)
        meta = model.metadata if model is not None else None
        # Δ's slew limit (rad/step): the override, else the model's, else the deployment's rate cap at the
        # model's rate; none without a model (Δ is 0 then).
        slew = config.delta_slew_limit if config.delta_slew_limit is not None else (
            meta.delta_slew_limit if meta is not None else None)
        if meta is not None:
            step_caps = [cap / meta.rate_hz for cap in max_delta_rate]
            if slew is None:
                slew = tuple(step_caps)
            for joint, value, cap in zip(config.joints, config.delta_slew_limit or (), step_caps, strict=False):
                if value > cap * (1 + RELATIVE_TOLERANCE):
                    raise CompensatorError(f"delta_slew_limit: {joint} {value:g} rad/step ({value * meta.rate_hz:g} "
                                           f"rad/s at {meta.rate_hz:g} Hz) is above the deployment's cap "
                                           f"max_delta_rate {cap * meta.rate_hz:g} rad/s")
        self.delta_slew_limit = None if slew is None else np.asarray(slew, dtype=np.float64)
        self.delta_smoothing_s = float(config.delta_smoothing_s if config.delta_smoothing_s is not None else (
            meta.delta_smoothing_s if meta is not None else 0.0))
        gain = config.feedback_gain if config.feedback_gain is not None else (
            meta.feedback_gain if meta is not None else None)
        self.feedback_gain = np.zeros(joints) if gain is None else np.asarray(gain, dtype=np.float64)
        play = config.direction_play if config.direction_play is not None else (
            meta.direction_play if meta is not None else 0.0)
        self.direction_play = float(play or 0.0)
        # The per-joint state of the step after the model, as plain floats (_feedback_and_shape). The feedback's
        # corrections (rad): row 0 while the reference moves down (or for both directions when direction_play
        # is 0), row 1 while it moves up; _side picks the row per joint.
        self._integrals = [[0.0] * joints, [0.0] * joints]
        self._side = [0] * joints
        self._episode_starts = False  # new_episode() was called: the sides are made one at the next step
        self._play: list[float | None] = [None] * joints  # the play operator's output: the reference less its play
        self._slow = [False] * joints  # reference and arm both (nearly) still this step
        self._reversal = [SETTLED] * joints  # where each joint is after the reference's last reversal
        # the lead's scale per joint and its estimator's running means: the tracking error, the model's Δ, and the
        # power of Δ's variation (_adapt_lead)
        self._lead_scale = [1.0] * joints
        self._lead_means = [[0.0, 0.0, 0.0] for _ in range(joints)]
        # (the step's time, NaN where the caller gave none; the policy's command; the model's Δ) of the recent
        # compensated steps, oldest first: where the newest sample's instant lies among them (_lead_alignment)
        self._steps_log: deque[tuple[float, list[float], list[float]]] = deque(maxlen=LEAD_LOG_STEPS)
        self._bounds = self.delta_bounds.tolist()
        self._gains = self.feedback_gain.tolist()
        self._feedback_on = bool(self.feedback_gain.any())
        self._step_s = 1.0 / meta.rate_hz if meta is not None else 0.0  # a model step (s)
        self.guard = DeltaGuard(config.joints, config.guard, self._step_s) \
            if config.guard is not None and model is not None else None
        self._slew = None if self.delta_slew_limit is None else self.delta_slew_limit.tolist()
        self._previous_command: np.ndarray | None = None  # the policy command of the previous step
        self._rows_in = np.zeros((self.future_steps, joints))  # scratch: the command rows fed to the model
        # Share of the previous Δ kept per step by the low-pass (steps come at the model's rate).
        self._keep = math.exp(-1.0 / (meta.rate_hz * self.delta_smoothing_s)) if meta is not None and self.delta_smoothing_s > 0 else 0.0
        # Ring buffer twice as long as the window, each row written at slot and slot + H, so the
        # last H rows are always the contiguous slice [head, head + H) (no copy, no roll per step).
        self._ring = np.zeros((2 * self._history_len, 3 * joints), dtype=np.float64)
        self._head = 0
        self._rows = 0
        self._position = np.full(joints, np.nan)
        self._measured = False  # every joint read at least once (has_measurement)
        self._velocity = np.full(joints, np.nan)
        self._measured_stamp: float | None = None
        # the sample before the newest (stamp, position, velocity): a row's instant lies between the two
        self._sample_before: tuple[float, np.ndarray, np.ndarray] | None = None
        # steps no sample has reached yet: (the step's time, the output of the step before it)
        self._uncovered: deque[tuple[float, np.ndarray | None]] = deque()
        self._fresh = np.zeros(joints, dtype=bool)  # joints measured since the previous step
        # signed load per joint (fraction of max effort; 0 until an effort is measured) and the limit on it
        self._load = [0.0] * joints
        self._max_effort = [joint_spec(name).max_effort for name in config.joints]
        defaults = [default_load_limit(name) for name in config.joints]
        self._load_limits = list(config.load_limits) if config.load_limits is not None else [d[0] for d in defaults]
        self._load_holds = list(config.load_hold_s) if config.load_hold_s is not None else [d[1] for d in defaults]
        self._loaded_s = [0.0] * joints  # how long each joint's load has been over its limit the way it pushes
        # which way the safety filter holds each joint's goal back from the output (+1: the goal below it, -1: above,
        # 0: not held; goal_reached) and the span of this step's command rows (the output's limits while held)
        self._held = [0] * joints
        self._span: tuple[list[float], list[float]] = ([0.0] * joints, [0.0] * joints)
        self._output_before: np.ndarray | None = None  # the output of the step before the latest
        self._last_goal: list[float] | None = None  # the latest goal the safety filter gave the arm
        self._last_output: np.ndarray | None = None
        self._delta = np.zeros(joints)  # Δ applied on the latest step (0 on passthrough steps)
        self._output = np.zeros(joints)
        self._latencies = np.zeros(config.latency_window)
        self._stats = _Stats()

    # -- inputs ---------------------------------------------------------------------------------
    def update_measured(self, position: np.ndarray | list[float], velocity: np.ndarray | list[float] | None = None,
                        stamp: float | None = None, effort: np.ndarray | list[float] | None = None) -> None:
        """Latest measured state; velocity missing or NaN is estimated from the previous position; effort (N·m,
        signed along the joint axis as the driver publishes it; missing or NaN: the previous load) tells how hard
        each servo already pushes (``load_limits``). ``stamp``: when the servos sampled it (the joint state's
        header stamp), on the clock of :meth:`compensate`'s ``now``; the history rows are placed by it (:meth:`_cover`).

        A joint whose position is NaN or inf (the driver's reading of a servo that did not answer) keeps
        its previous measurement, as in the safety filter, and counts as not measured: the integral
        feedback would otherwise take the NaN in for good and every later output would be NaN."""
        position = self._vector(position, "position")
        unread = ~np.isfinite(position)
        if unread.any():
            position = np.where(unread, self._position, position)
        self._fresh |= ~unread
        if velocity is not None:
            velocity = self._vector(velocity, "velocity")
        else:
            velocity = np.full(position.shape, np.nan)
        if np.isnan(velocity).any():
            estimate = np.zeros_like(position)
            if self._measured_stamp is not None and stamp is not None and stamp > self._measured_stamp:
                estimate = (position - self._position) / (stamp - self._measured_stamp)
            velocity = np.where(np.isnan(velocity), np.nan_to_num(estimate), velocity)
        if effort is not None:
            for j, value in enumerate(self._vector(effort, "effort").tolist()):
                if math.isfinite(value):
                    self._load[j] = value / self._max_effort[j]
        self._sample_before = (self._measured_stamp, self._position.copy(), self._velocity.copy()) \
            if self._measured_stamp is not None and stamp is not None and stamp > self._measured_stamp else None
        self._position[:] = position
        self._velocity[:] = velocity
        self._measured_stamp = stamp
        self._cover()

    def goal_reached(self, goal: np.ndarray | list[float]) -> None:
        """The goal the arm got for the last step's command (the safety filter's output).

        Where the filter holds a joint's goal back (:data:`FILTER_HOLD`: the goal far from both of the last two
        outputs, as it may arrive after the next step, and moving towards them), the next steps' output stays
        within the commands ahead (:meth:`_feedback_and_shape`). The guard judges Δ by what reached the servos
        (``goal − command``), not by what it sent."""
        goal = self._vector(goal, "goal")
        values = goal.tolist()
        output, before, last = self._last_output, self._output_before, self._last_goal
        self._last_goal = values
        if output is not None:
            for j, (g, o) in enumerate(zip(values, output.tolist(), strict=True)):
                sent = abs(g - o) <= FILTER_HOLD or (before is not None and abs(g - before[j]) <= FILTER_HOLD)
                way = 0 if sent or not math.isfinite(g) else (1 if o > g else -1)
                self._held[j] = way if last is not None and (g - last[j]) * way > ENCODER_STEP else 0
        if self.guard is None or self._previous_command is None or not self._delta.any():
            return
        reached = goal - self._previous_command
        for j, delta in enumerate(reached.tolist()):
            if math.isfinite(delta):
                self.guard.reached(j, delta)

    @property
    def has_measurement(self) -> bool:
        if not self._measured:  # a joint once read keeps its last reading (update_measured): so until reset
            self._measured = not np.isnan(self._position).any()
        return self._measured

    @property
    def warm(self) -> bool:
        """True once the model's warm-up rows are measured (the whole window, unless the model says fewer)."""
        return self._rows >= self._warmup_rows

    def history(self) -> np.ndarray:
        """The current window, oldest row first (a view; shape ``(H, 3·J)``)."""
        start = self._head
        return self._ring[start:start + self._history_len]

    # -- the step -------------------------------------------------------------------------------
    def compensate(self, command: np.ndarray | list[float], now: float | None = None,
                   upcoming: np.ndarray | None = None) -> StepResult:
        """One control step: ``(command + Δ, Δ)`` with Δ bounded per joint; never NaN from the model.

        ``upcoming`` (K, J) rad: the policy's next commands at the model's rate (an action chunk, a
        motion's future); a look-ahead model reads the first ``future_steps − 1`` of them, the last
        one held where fewer are given (none: the current command held).
        """
        start = time.perf_counter()
        if self._episode_starts:
            self._start_episode()
        command = self._vector(command, "command")
        if np.isnan(command).any():
            raise CompensatorError("command contains NaN")
        if self.has_measurement:
            if now is None or self._measured_stamp is None:
                self._push_row(self._position, self._velocity, self._last_output)
            else:
                self._uncovered.append((now, self._last_output))
                self._cover()
        compensated = fault = False
        if self.model is not None and self.enabled and self.warm:
            rows = self._command_rows(command, upcoming)
            raw = self.model.delta(self.history(), rows)
            if any(self._held):
                self._span = (rows.min(axis=0).tolist(), rows.max(axis=0).tolist())
            if np.isfinite(raw).all():
                self._feedback_and_shape(raw, command, now)
                compensated = True
            else:
                fault = True
                self._stats.faults += 1
                self._stats.last_fault = f"model returned non-finite Δ {raw.tolist()} at t={now}"
                _log.warning("%s; passing the command through", self._stats.last_fault)
        if not compensated:
            self._delta[:] = 0.0  # passthrough; compensation resumes from 0 under the slew limit
            self._clear_integrals()
        self._fresh[:] = False
        self._previous_command = command
        np.add(command, self._delta, out=self._output)
        self._output_before = self._last_output
        self._last_output = self._output.copy()
        latency = time.perf_counter() - start
        self._latencies[self._stats.steps % self.config.latency_window] = latency
        self._stats.steps += 1
        self._stats.compensated_steps += compensated
        return StepResult(self._last_output, self._delta.copy(), compensated, fault, latency)

    def _command_rows(self, command: np.ndarray, upcoming: np.ndarray | None) -> np.ndarray:
        rows = self._rows_in
        rows[:] = command
        if upcoming is not None and self.future_steps > 1:
            ahead = np.asarray(upcoming, dtype=np.float64).reshape(-1, len(command))[:self.future_steps - 1]
            if not np.isfinite(ahead).all():
                raise CompensatorError("upcoming commands contain NaN or inf")
            if len(ahead):
                rows[1:1 + len(ahead)] = ahead
                rows[1 + len(ahead):] = ahead[-1]
        return rows

    def _feedback_and_shape(self, raw: np.ndarray, command: np.ndarray, now: float | None = None) -> None:
        """The step after the model, per joint: which way the reference moves, the integral feedback, and
        Δ's shaping (bound, low-pass, slew limit) into ``self._delta``.

        Plain floats over the joints: a step is six joints of a few dozen scalar operations, where numpy's
        per-call cost on 6-element arrays made this the largest part of a step (measured, package README).

        **Direction.** A play operator of width ``direction_play`` on the policy's reference: a reversal
        counts once the command has come back by more than the play, so jitter below it does not switch.

        **Integral feedback** (the previous command is where the sim is now: it follows one step behind);
        one correction per direction of the reference. Why: what the feed-forward leaves is mostly dry
        friction (and backlash), which pulls against the motion and so flips sign when the reference
        reverses. One integral must unwind through zero at its slow gain while the joint sticks (measured:
        ~0.5 s and 0.015 rad on shoulder_pan at every reversal); two switch at once. What tells friction from
        lag (continuous through a reversal, 0 where the velocity is): friction is what is left while the
        joint is stuck. So only while the reference moves less than ``direction_play`` per step and the arm
        at most twice that does the current side learn alone; otherwise both sides learn the same step,
        which keeps their difference (the jump at a reversal). Measured, why not more: a side that learns
        alone whenever it is in force takes a fast motion's lag for friction (the gripper on a multisine grew
        an oscillation, 5 % worse than no compensation; the synthetic ``stiff_delayed`` arm's elbow tracked
        50 % worse).

        **A reversal's overshoot, and the split's sign.** Both sides learning the same step keep their difference, which
        only a side learning alone at a turning point changes. On a long periodic motion that ratcheted (measured on
        `default`, SAGE's coupled_joints: a 4 s sine on every joint for 120 s): at each turning point friction held the
        arm a few mrad short and the side in force learnt that; at the reversal the jump to the other side's correction
        made the arm overshoot; both sides learnt the overshoot back, so the difference survived and grew by a few mrad
        a reversal, to 0.1–0.25 rad, and the last third tracked worse than without compensation (shoulder_lift 77
        against 52 mrad). So an overshoot after a reversal (the arm past the reference the new way and moving that way,
        until it is behind the reference again or at the next turning point: :meth:`_overshoots`) is learnt by the side
        in force alone, and the split never pushes against the motion: the rising side's correction is at least the
        falling side's (dry friction and backlash pull against the motion; a split the other way swung `weak_gains`'
        pan further at each reversal: 55 mrad from the replay in coupled_joints' last third, 37 without
        compensation). An arm still ahead of the reference when it turns again, but not moving that way (a
        multisine's quick reversals), is lag, and both sides learn it.

        **Overdrive while the safety filter holds the goal back.** A look-ahead model leads a step in the reference
        with an output past the new target (the inverse of a lagging arm: up to Δ's bound). Where the reference
        steps faster than the filter lets through, the filter's goal heads for that output at its speed bound and
        cannot brake in time when the output comes back: the arm overshot the target by 80–90 mrad at each of SAGE's
        prbs_excitation steps behind a 12 ms adapter, and friction held it there (wrist roll, through ROS and in the
        harness). So while the filter holds a joint's goal back (:meth:`goal_reached`), the output stays within
        the commands ahead (the current one and the upcoming ones the model read), shaped like any Δ (slew limit).

        Each measurement counts once: a joint not measured since the previous step keeps its correction
        rather than adding the same, stale, error again. Joint states come at twice the model's rate, so
        this changes nothing on a healthy chain; on a starved one (measured through ROS: joint states at
        15–25 Hz for seconds) re-integrating each stale error multiplied the loop's gain and it swung to Δ's
        bound (0.1–0.18 rad tracking error on shoulder_pan).

        An error within half an encoder step (``ENCODER_ROUNDING``) is the encoder's rounding of a servo at its goal,
        not a gap, and is not integrated (measured: a held wrist roll whose target lay between two steps hunted ±5 mrad
        on an arm with 80 mrad of play, the integral winding against the half step and back).

        Conditional integration: an error beyond Δ's bound (the arm still travelling to a far command, held
        back by the safety filter's bounds) is no friction or gravity offset; integrated, it winds the
        correction up to its bound and the arm overshoots by as much when it arrives. Anti-windup: the
        correction does not grow past the bound, nor while the total is clipped, nor the way the safety filter holds
        the goal back (the arm's lag then is the filter's bound at work; measured, that wound the correction by up to
        40 mrad on held-out arms; not winding it: the lift 0.1–0.7 points better on 11 of 12 held-out arms, nothing
        worse by more than 0.1).

        **Guard** (:class:`DeltaGuard`): each joint's tracking error is judged against the estimate without Δ;
        the joint's Δ is multiplied by its scale before the low-pass and the slew limit, and its correction is
        held while the scale is below 1 (it would wind up behind a Δ that is not applied).
        """
        play_width = self.direction_play
        previous: list[float] = [] if self._previous_command is None else self._previous_command.tolist()
        feedback = bool(previous) and self._feedback_on
        step_s = self._step_s
        play, side, slow, integrals, reversal = self._play, self._side, self._slow, self._integrals, self._reversal
        loads, load_limits, load_holds, loaded_s = self._load, self._load_limits, self._load_holds, self._loaded_s
        fresh, position, velocity = self._fresh.tolist(), self._position.tolist(), self._velocity.tolist()
        shaped = self._delta.tolist()
        clipped = slew_limited = out_of_bounds = False
        keep, slew, guard, held, (lowest, highest) = self._keep, self._slew, self.guard, self._held, self._span
        raws, targets = raw.tolist(), command.tolist()
        self._steps_log.append((math.nan if now is None else now, targets, raws))
        aligned = self._lead_alignment(previous) if previous and any(fresh) else None
        lead_scale, share = self._lead_scale, min(1.0, step_s / LEAD_MEAN_S)
        for j, (wanted, target, bound, gain) in enumerate(zip(raws, targets, self._bounds, self._gains, strict=True)):
            if aligned is not None and fresh[j] and not held[j] and abs(target - previous[j]) > ENCODER_ROUNDING:
                self._adapt_lead(j, position[j] - aligned[0][j], aligned[1][j], share)
            wanted *= lead_scale[j]
            out_of_bounds |= abs(wanted) > bound
            scale = 1.0
            if guard is not None:
                if previous and fresh[j]:
                    guard.observe(j, previous[j] - position[j])
                scale = guard.scale[j]
            if play_width > 0:
                if play[j] is None:
                    play[j] = target
                if target - play[j] > play_width:  # rising
                    if side[j] != 1:
                        reversal[j] = REVERSED
                    play[j], side[j] = target - play_width, 1
                elif play[j] - target > play_width:  # falling
                    if side[j] != 0:
                        reversal[j] = REVERSED
                    play[j], side[j] = target + play_width, 0
                if previous:  # (this runs only with a model)
                    slow[j] = abs(target - previous[j]) <= play_width and abs(velocity[j]) * step_s <= 2 * play_width
            current = integrals[side[j]][j]
            if feedback:
                error = previous[j] - position[j] if fresh[j] else 0.0
                if abs(error) <= ENCODER_ROUNDING:  # the encoder's rounding, not a gap
                    error = 0.0
                step = gain * error if abs(error) <= bound and scale == 1.0 else 0.0
                if step * held[j] > 0:  # the filter holds the goal back that way: the lag is its bound's, not a gap
                    step = 0.0
                if abs(loads[j]) >= load_limits[j] and current * loads[j] > 0:
                    loaded_s[j] += step_s
                    if loaded_s[j] >= load_holds[j]:
                        # its servo already pushes the way the correction does, near its overload protection
                        # for long enough: the correction eases (at the integral's own rate) until the load is
                        # back under the limit
                        step = -gain * current
                else:
                    loaded_s[j] = 0.0
                total = wanted + current
                if abs(total) >= bound and (step > 0) - (step < 0) == (total > 0) - (total < 0):
                    step = 0.0
                # an overshoot after a reversal is the side in force's doing: it learns it alone
                alone = play_width > 0 and reversal[j] != SETTLED and self._overshoots(j, error, velocity[j])
                if play_width > 0 and not slow[j] and not alone:  # both sides learn
                    other = integrals[1 - side[j]]
                    other[j] = min(max(other[j] + step, -bound), bound)
                current = min(max(current + step, -bound), bound)
                integrals[side[j]][j] = current
                if play_width > 0 and integrals[1][j] < integrals[0][j]:
                    # the split never pushes against the motion: the side not in force follows the one in force
                    integrals[1 - side[j]][j] = current
            total = wanted + current
            wanted = min(max(total, -bound), bound)
            clipped |= wanted != total
            if held[j]:  # the filter holds the goal back: no output past the commands it heads for
                wanted = min(max(target + wanted, lowest[j]), highest[j]) - target
            unscaled = wanted
            wanted *= scale
            if keep > 0:
                wanted += keep * (shaped[j] - wanted)
            if slew is not None:
                change = wanted - shaped[j]
                slew_limited |= abs(change) > slew[j]
                shaped[j] += min(max(change, -slew[j]), slew[j])
            else:
                shaped[j] = wanted
            if guard is not None:
                guard.sent(j, shaped[j], unscaled)
        self._delta[:] = shaped
        self._stats.clipped_steps += clipped
        self._stats.slew_limited_steps += slew_limited
        self._stats.out_of_bounds_steps += out_of_bounds

    def _lead_alignment(self, previous: list[float]) -> tuple[list[float], list[float]] | None:
        """What the newest sample's tracking error is judged against in :meth:`_adapt_lead`: the policy's command at
        the instant the servos sampled it, and the model's Δ ``LEAD_DELAY_STEPS − 1`` steps before that instant, each
        linear between the steps around it (from :attr:`_steps_log`).

        Why by the sample's stamp: a sample reaches the core a bus round trip and the chain's hops after it was taken.
        Judged against the previous step's command, the arm looks further behind the older its newest sample is, and
        that lag's variation is Δ's own (a lead), so the LMS took it for too little lead: through ROS, behind a 9 ms
        adapter (samples 17–20 ms old on arrival, about 5 ms more than in the harness), the scale ran to its bound of 1.5 and
        the arm overshot the reference by 10–38 %. Where the sample is one step old this is the previous command and
        the Δ of ``LEAD_DELAY_STEPS`` steps before, as the constants were chosen. Without step times or a stamp:
        those. None (nothing to judge) while the steps logged do not reach back to that Δ: the first steps of
        compensation, whose samples were taken before Δ was sent."""
        stamp, log = self._measured_stamp, self._steps_log
        if stamp is None or math.isnan(log[-1][0]):
            return previous, log[max(0, len(log) - 1 - LEAD_DELAY_STEPS)][2]
        driven = stamp - (LEAD_DELAY_STEPS - 1) * self._step_s
        if driven < log[0][0]:
            return None
        return _at(log, stamp, 1), _at(log, driven, 2)

    def _adapt_lead(self, j: int, error: float, delta: float, share: float) -> None:
        """One normalised LMS step of joint ``j``'s lead scale (:data:`LEAD_ADAPTATION_RATE`): ``error`` is the arm
        less where the sim is (the command in force when it was sampled), ``delta`` the model's Δ that drove it (unscaled), ``share``
        the running means' weight per step. An arm ahead of the reference where Δ leads (their variations alike)
        takes less of Δ, one behind it more, within :data:`LEAD_SCALE_RANGE`."""
        means = self._lead_means[j]
        means[0] += share * (error - means[0])
        means[1] += share * (delta - means[1])
        varying = delta - means[1]
        means[2] += share * (varying * varying - means[2])
        scale = self._lead_scale[j] - LEAD_ADAPTATION_RATE * (error - means[0]) * varying / (means[2] + LEAD_POWER_FLOOR)
        self._lead_scale[j] = min(max(scale, LEAD_SCALE_RANGE[0]), LEAD_SCALE_RANGE[1])

    def _overshoots(self, j: int, error: float, velocity: float) -> bool:
        """Whether joint ``j``'s error this step is the overshoot of the reference's last reversal (the side in force
        then learns it alone), stepping the joint's :data:`REVERSED` … :data:`OVERSHOOTING` state on. ``error``: the
        fresh error beyond the encoder's rounding (0 otherwise), ``velocity``: the arm's (rad/s)."""
        state = self._reversal[j]
        if state == SETTLED:
            return False
        way = 1 if self._side[j] else -1
        ahead = error * way < 0  # the arm past the reference the way it now moves
        if self._slow[j]:
            if state == FOLLOWING:  # the next turning point: the reversal's transient is over
                self._reversal[j] = SETTLED
        elif ahead and (state == OVERSHOOTING or velocity * way > 0):
            self._reversal[j] = OVERSHOOTING
        elif state == OVERSHOOTING:
            if error != 0.0:  # back behind the reference: the overshoot is over
                self._reversal[j] = SETTLED
        elif state == REVERSED:
            self._reversal[j] = FOLLOWING
        return ahead and self._reversal[j] == OVERSHOOTING

    def _cover(self) -> None:
        """Write the rows of the steps the newest sample has reached: each row is the arm at the step's instant,
        linear between the two samples around it, beside the output of the step before (as a recording pairs the
        stamped joint states with its frames, which is what the model was trained on). A sample arrives a bus round
        trip after it was taken, so the window ends a step or two behind the present. A step left waiting longer
        than ``MAX_UNCOVERED_STEPS`` gets the newest sample."""
        newest = self._measured_stamp
        uncovered = self._uncovered
        while uncovered and newest is not None and (uncovered[0][0] <= newest or len(uncovered) > MAX_UNCOVERED_STEPS):
            when, previous = uncovered.popleft()
            position, velocity = self._position, self._velocity
            before = self._sample_before
            if before is not None and before[0] < when < newest:
                share = (when - before[0]) / (newest - before[0])
                position = before[1] + share * (position - before[1])
                velocity = before[2] + share * (velocity - before[2])
            elif before is not None and when <= before[0]:
                position, velocity = before[1], before[2]
            self._push_row(position, velocity, previous)

    def _push_row(self, position: np.ndarray, velocity: np.ndarray, previous: np.ndarray | None) -> None:
        size = self._history_len
        row = np.concatenate((position, velocity, position if previous is None else previous))
        slot = self._rows % size
        if self._rows:
            self._ring[slot] = row
            self._ring[slot + size] = row
        else:  # the first row fills the whole window: the arm at rest where it was first measured, until rows replace it
            self._ring[:] = row
        self._rows += 1
        self._head = (slot + 1) % size

    def new_episode(self) -> None:
        """A new episode starts (a policy rollout, a recorded motion, from a pose the arm was brought to and held):
        the integral's side not in force takes the correction of the side in force, and the episode starts with
        one correction for both directions, as a fresh compensator does.

        Why (measured through ROS, ``make demo``): while the arm is brought to an episode's start pose and held
        there, the reference is still, so the side in force learns alone whatever error is left (the end of the
        approach, the pose's sag); the other side keeps what it had. Both sides learning alike while the arm moves
        then keeps that difference for the whole episode: on multisine it stayed 40–65 mrad on lift, elbow and
        wrist flex for 30 s in the runs that fell below the harness's figures, pushing each direction of motion
        by a different amount. The correction in force is kept (no step of the output at the episode's start).

        Taken at the next step: another thread may call it (the demo's session, beside the node's executor)."""
        self._episode_starts = True

    def _start_episode(self) -> None:
        self._episode_starts = False
        for j, side in enumerate(self._side):
            self._integrals[1 - side][j] = self._integrals[side][j]
        self._reversal[:] = [SETTLED] * len(self._reversal)

    def reset(self) -> None:
        """Forget the history (e.g. after the arm was re-enabled or the stream restarted)."""
        self._head = self._rows = 0
        self._last_output = self._output_before = None
        self._last_goal = None
        self._held[:] = [0] * len(self._held)
        self._previous_command = None
        self._position[:] = np.nan
        self._measured = False
        self._measured_stamp = None
        self._sample_before = None
        self._uncovered.clear()
        self._fresh[:] = False
        self._delta[:] = 0.0
        self._clear_integrals()
        joints = len(self.config.joints)
        self._play = [None] * joints
        self._side = [0] * joints
        self._slow = [False] * joints
        self._lead_scale = [1.0] * joints
        self._lead_means = [[0.0, 0.0, 0.0] for _ in range(joints)]
        self._steps_log.clear()

    def _clear_integrals(self) -> None:
        for row in self._integrals:
            row[:] = [0.0] * len(row)
        self._reversal[:] = [SETTLED] * len(self._reversal)
        self._loaded_s[:] = [0.0] * len(self._loaded_s)
        if self.guard is not None:
            self.guard.clear()

    # -- reporting ------------------------------------------------------------------------------
    def latency_percentiles(self) -> tuple[float, float]:
        """(p50, p99) step latency in seconds over the recent window (NaN before the first step)."""
        count = min(self._stats.steps, self.config.latency_window)
        if count == 0:
            return math.nan, math.nan
        p50, p99 = np.percentile(self._latencies[:count], [50, 99])
        return float(p50), float(p99)

    def status(self) -> dict[str, Any]:
        """Flat key/values for diagnostics."""
        p50, p99 = self.latency_percentiles()
        info: dict[str, Any] = {
            "mode": "passthrough (no model)" if self.model is None else ("compensating" if self.enabled else "disabled"),
            "enabled": self.enabled,
            "warm": self.warm,
            "steps": self._stats.steps,
            "compensated_steps": self._stats.compensated_steps,
            "clipped_steps": self._stats.clipped_steps,
            "model_out_of_bounds_steps": self._stats.out_of_bounds_steps,
            "faults": self._stats.faults,
            "last_fault": self._stats.last_fault,
            "latency_p50_us": round(p50 * 1e6, 1) if math.isfinite(p50) else "n/a",
            "latency_p99_us": round(p99 * 1e6, 1) if math.isfinite(p99) else "n/a",
            "slew_limited_steps": self._stats.slew_limited_steps,
            "delta_bounds": [round(float(b), 4) for b in self.delta_bounds],
            "max_delta": list(self.config.caps[0]),
            "max_delta_rate": list(self.config.caps[1]),
            "delta_slew_limit": "none" if self.delta_slew_limit is None else [round(float(b), 5) for b in self.delta_slew_limit],
            "delta_smoothing_s": self.delta_smoothing_s,
            "future_steps": self.future_steps,
            "feedback_gain": [round(float(g), 4) for g in self.feedback_gain],
            "feedback_correction": [round(self._integrals[side][j], 5) for j, side in enumerate(self._side)],
            "direction_play": self.direction_play,
            "lead_scale": [round(scale, 3) for scale in self._lead_scale],
            "last_delta": [round(float(d), 5) for d in self._delta],
            "guard": "off" if self.guard is None else "on",
        }
        if self.guard is not None:
            info.update({"guard_scale": [round(g, 3) for g in self.guard.scale], "guard_events": self.guard.events,
                         "guard_last_event": self.guard.last_event})
        if self.model is not None:
            info.update(self.model.describe())
        return info

    def health(self, info: dict[str, Any] | None = None) -> tuple[Level, str]:
        """The level and one-line message of the core's diagnostics (``info``: its :meth:`status`, if already taken):
        WARN on a model fault, a model whose Δ leaves its bounds at the load probe, or a joint the guard shrank."""
        info = self.status() if info is None else info
        probe = self.model.probe if self.model is not None else None
        beyond = probe is not None and not probe.within_bounds
        shrunk = [j for j, scale in zip(self.config.joints, info.get("guard_scale", ()), strict=False) if scale < 1.0]
        level = Level.WARN if info["faults"] or beyond or shrunk else Level.OK
        message = info["mode"] + ("" if info["warm"] or self.model is None else " (warming up)") + (
            "; the model's Δ leaves its bounds (clipped): see load_probe" if beyond else "")
        if shrunk:
            message += f"; guard: compensation made {', '.join(shrunk)} track worse, Δ shrunk there"
        return level, message

    def _vector(self, values: np.ndarray | list[float], what: str) -> np.ndarray:
        array = np.asarray(values, dtype=np.float64)
        if array.shape != (len(self.config.joints),):
            raise CompensatorError(f"{what} must have {len(self.config.joints)} values ({list(self.config.joints)}), got shape {array.shape}")
        return array
