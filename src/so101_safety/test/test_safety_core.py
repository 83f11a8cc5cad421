"""SafetyFilter behaviour, one scenario at a time (the properties over random inputs are in
test_safety_properties.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from so101_common.joints import JOINT_NAMES
from so101_safety.config import SafetyConfig
from so101_safety.core import RejectReason, SafetyFilter

ZERO = [0.0] * 6
DT = 0.01


def make(config: SafetyConfig | None = None, measured=ZERO, t: float = 0.0) -> SafetyFilter:
    f = SafetyFilter(config or SafetyConfig())
    assert f.on_measured(JOINT_NAMES, measured, [], [], t)
    return f


FOLLOW = "follow"  # an arm that is where the previous output sent it, moving as it did


def run(f: SafetyFilter, t0: float, seconds: float, command: tuple[Sequence[str], Sequence[float]] | None = None,
        measured: Sequence[float] | str | None = None) -> list[Any]:
    """Step at 100 Hz for ``seconds``; optionally re-send a command and a measured state every tick
    (``FOLLOW``: the arm reports the previous output's positions, an arm that follows the filter)."""
    out = []
    for k in range(1, round(seconds / DT) + 1):
        t = t0 + k * DT
        if command is not None:
            f.on_command(*command, t)
        if measured == FOLLOW:
            if f.last is not None:
                f.on_measured(JOINT_NAMES, f.last.positions, f.last.velocities, [], t)
        elif measured is not None:
            f.on_measured(JOINT_NAMES, measured, [], [], t)
        out.append(f.step(t))
    return out


def test_no_output_until_every_joint_is_measured():
    f = SafetyFilter()
    assert f.step(0.0) is None
    f.on_measured(["shoulder_pan"], [0.1], [], [], 0.0)
    assert f.step(0.01) is None
    f.on_measured(JOINT_NAMES, [0.1, 0.2, 0.3, 0.4, 0.5, math.nan], [], [], 0.02)
    assert f.step(0.03) is None
    f.on_measured(["gripper"], [0.6], [], [], 0.04)
    first = f.step(0.05)
    assert first is not None and first.restarted
    assert first.positions == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    assert first.holding and first.command_stale  # no command yet: hold where the arm is


@pytest.mark.parametrize("names, positions, reason", [
    ([], [], RejectReason.EMPTY),
    (["shoulder_pan"], [], RejectReason.LENGTH_MISMATCH),
    ([], [0.1], RejectReason.LENGTH_MISMATCH),
    (["shoulder_pan", "elbow_flex"], [0.1], RejectReason.LENGTH_MISMATCH),
    (["elbow_flex", "elbow_flex"], [0.1, 0.2], RejectReason.DUPLICATE_NAME),
    (["elbow"], [0.1], RejectReason.UNKNOWN_JOINT),
    (["shoulder_pan", "Gripper"], [0.1, 0.2], RejectReason.UNKNOWN_JOINT),
    (["shoulder_pan"], [math.nan], RejectReason.NON_FINITE),
    (["shoulder_pan"], [math.inf], RejectReason.NON_FINITE),
    (["shoulder_pan", "gripper"], [0.0, -math.inf], RejectReason.NON_FINITE),
    ([3], [0.1], RejectReason.MALFORMED),
    (["shoulder_pan"], ["a lot"], RejectReason.MALFORMED),
    (None, [0.1], RejectReason.MALFORMED),
])
def test_each_rejection_reason(names, positions, reason):
    f = make()
    verdict = f.on_command(names, positions, 0.0)
    assert not verdict and verdict.reason is reason and verdict.detail
    assert f.stats.rejected[reason.value] == 1 and f.stats.accepted == 0


@pytest.mark.parametrize("stamp", [math.nan, math.inf, "soon"])
def test_bad_stamp_is_rejected(stamp):
    verdict = make().on_command(["gripper"], [0.5], stamp)
    assert verdict.reason is RejectReason.BAD_STAMP


def test_commands_are_rejected_while_estopped_and_counted():
    f = make()
    f.estop("test")
    verdict = f.on_command(["gripper"], [0.5], 0.0)
    assert verdict.reason is RejectReason.ESTOPPED
    assert f.on_command(["gripper"], [math.nan], 0.0).reason is RejectReason.NON_FINITE  # validation first
    assert f.stats.rejected_total == 2


def test_rejected_commands_change_nothing():
    f = make()
    f.on_command(["elbow_flex"], [0.5], 0.0)
    f.on_command(["elbow_flex", "bogus"], [-1.0, 0.0], 0.005)
    out = run(f, 0.0, 1.0, command=(["elbow_flex"], [0.5]), measured=FOLLOW)
    assert out[-1].positions[2] == pytest.approx(0.5)


def test_partial_command_moves_only_its_joints():
    f = make(measured=[0.1, -0.2, 0.3, 0.0, 0.0, 0.5])
    out = run(f, 0.0, 1.0, command=(["elbow_flex"], [1.0]), measured=FOLLOW)
    assert out[-1].positions == pytest.approx([0.1, -0.2, 1.0, 0.0, 0.0, 0.5])
    assert not out[-1].holding and out[-1].reasons == ()


def test_out_of_limit_command_is_clipped_and_flagged():
    f = make()
    limit = f.config.limits[0].upper
    verdict = f.on_command(["shoulder_pan"], [10.0], 0.0)
    assert verdict and "clipped" in verdict.detail
    out = run(f, 0.0, 2.0, command=(["shoulder_pan"], [10.0]), measured=FOLLOW)
    assert max(c.positions[0] for c in out) == pytest.approx(limit)
    assert all(c.positions[0] <= limit for c in out)
    assert out[-1].clipped == ("shoulder_pan",)
    assert any("clipped" in r for r in out[-1].reasons)


def test_velocity_is_bounded():
    f = make(SafetyConfig(max_velocity=1.0, max_acceleration=1000.0))
    out = run(f, 0.0, 0.5, command=(["elbow_flex"], [1.5]), measured=FOLLOW)
    steps = [b.positions[2] - a.positions[2] for a, b in zip(out, out[1:], strict=False)]
    assert max(steps) == pytest.approx(1.0 * DT)
    assert out[-1].rate_limited == ("elbow_flex",)


def test_watchdog_holds_the_measured_position_then_resumes():
    f = make(SafetyConfig(watchdog_timeout=0.2))
    moving = run(f, 0.0, 0.5, command=(["wrist_flex"], [1.0]), measured=FOLLOW)
    assert not moving[-1].holding and moving[-1].positions[3] > 0.1
    arm = [0.0, 0.0, 0.0, 0.4, 0.0, 0.0]  # where the arm really is when the stream stalls
    stalled = run(f, 0.5, 1.5, measured=arm)
    assert not stalled[0].holding
    assert stalled[-1].holding and stalled[-1].command_stale
    assert any("watchdog" in r for r in stalled[-1].reasons)
    assert stalled[-1].positions == pytest.approx(arm)
    resumed = run(f, 2.0, 1.0, command=(["gripper"], [0.3]), measured=FOLLOW)
    assert not resumed[-1].holding
    assert resumed[-1].positions == pytest.approx([0.0, 0.0, 0.0, 0.4, 0.0, 0.3])  # other joints keep the hold


def test_stale_measured_state_also_holds():
    f = make(SafetyConfig(watchdog_timeout=0.2))
    out = run(f, 0.0, 0.5, command=(["gripper"], [1.0]))
    assert out[-1].holding and out[-1].measured_stale and not out[-1].command_stale


def test_estop_brakes_to_a_stop_within_the_bounds_and_holds_until_reset():
    f = make()
    moving = run(f, 0.0, 0.3, command=(["shoulder_lift"], [1.0]), measured=FOLLOW)
    y, v = moving[-1].positions[1], moving[-1].velocities[1]
    a = f.config.limits[1].max_acceleration
    assert v > 1.0  # moving fast when the e-stop comes
    f.estop("button")
    held = run(f, 0.3, 1.0, command=(["shoulder_lift"], [-1.0]), measured=FOLLOW)
    assert all(c.estopped and not c.restarted for c in held)
    lift = [moving[-1].positions[1]] + [c.positions[1] for c in held]
    speeds = [(b - c) / DT for b, c in zip(lift[1:], lift, strict=False)]
    assert all(abs(s1 - s0) <= a * DT + 1e-9 for s0, s1 in zip([v, *speeds], speeds, strict=False))  # braking at ≤ a
    assert all(s >= -1e-12 for s in speeds)  # never turning back towards the rejected command
    assert held[-1].positions[1] == pytest.approx(y + v * v / (2 * a), abs=0.01)  # stopped where braking ends
    assert held[-1].velocities == (0.0,) * 6 and held[-30].positions == held[-1].positions  # and stays there
    assert held[-1].estop_reason == "button" and held[-1].state == "estopped"
    assert f.stats.rejected["estopped"] == len(held)
    f.estop("again")
    assert f.estop_reason == "button" and f.stats.estops == 1
    assert f.reset() and not f.reset()
    after = run(f, 1.3, 1.0, measured=FOLLOW)
    assert not after[0].estopped and after[-1].holding
    assert after[-1].positions == held[-1].positions


def test_an_arm_moved_during_the_estop_is_held_where_it_now_is():
    f = make()
    run(f, 0.0, 0.2, measured=FOLLOW)
    f.estop("test")
    pushed = [0.0, 0.0, 1.0, 0.0, 0.0, 0.0]  # someone moved the arm (and holds it there)
    held = run(f, 0.2, 1.0, measured=pushed)
    leash = [0.0, 0.0, 1.0 - f.config.reseed_tolerance, 0.0, 0.0, 0.0]
    assert held[0].restarted == ("elbow_flex",) and held[0].positions == pytest.approx(leash)
    assert all(c.estopped for c in held) and held[-1].positions == pytest.approx(pushed)  # then ramps to the arm
    assert f.stats.restarts == 1


def test_reset_restarts_at_the_leash_when_the_arm_was_moved_far():
    f = make()
    run(f, 0.0, 0.1)
    f.estop("test")
    run(f, 0.1, 0.1)
    pushed = [0.0, 0.0, 1.0, 0.0, 0.0, 0.0]  # someone moved the arm during the e-stop
    f.on_measured(JOINT_NAMES, pushed, [], [], 0.2)
    f.reset()
    first = f.step(0.21)
    assert first.restarted == ("elbow_flex",) and first.positions[2] == pytest.approx(1.0 - f.config.reseed_tolerance)
    after = run(f, 0.21, 1.0, measured=pushed)  # then holds the measured position: ramps there
    assert after[-1].positions == pytest.approx(pushed) and not any(c.restarted for c in after)


def test_reset_continues_from_the_held_output_when_close():
    f = make()
    run(f, 0.0, 0.1)
    f.estop("test")
    run(f, 0.1, 0.1)
    f.on_measured(JOINT_NAMES, [0.0, 0.0, 0.02, 0.0, 0.0, 0.0], [], [], 0.2)
    f.reset()
    first = f.step(0.21)
    assert not first.restarted and abs(first.positions[2]) < 0.02


def test_the_first_command_after_a_restart_is_rate_limited_from_the_measured_position():
    f = make()
    run(f, 0.0, 0.1)
    f.estop("test")
    run(f, 0.1, 0.1)
    f.on_measured(JOINT_NAMES, [0.0, 0.0, 1.0, 0.0, 0.0, 0.0], [], [], 0.2)
    f.reset()
    leash = f.step(0.21).positions[2]  # restarted at the leash (far from the held output)
    assert leash == pytest.approx(1.0 - f.config.reseed_tolerance)
    f.on_measured(JOINT_NAMES, [0.0, 0.0, 0.9, 0.0, 0.0, 0.0], [], [], 0.22)  # the arm comes back towards it
    f.on_command(["elbow_flex"], [2.0], 0.22)
    first = f.step(0.22)  # no second restart: the command is rate limited from where the output restarted
    assert not first.restarted and first.velocities[2] > 0.0
    assert abs(first.positions[2] - leash) <= f.config.max_acceleration * 0.01 ** 2 + 1e-12


def test_a_watchdog_hold_still_restarts_from_a_far_measured_position_on_the_next_command():
    f = make()
    f.on_command(["elbow_flex"], [0.0], 0.0)
    f.step(0.0)
    timeout = f.config.watchdog_timeout
    held = f.step(timeout + 0.1)
    assert held.holding
    f.on_measured(JOINT_NAMES, [0.0, 0.0, 1.0, 0.0, 0.0, 0.0], [], [], timeout + 0.2)  # moved by hand
    f.on_command(["elbow_flex"], [1.0], timeout + 0.2)
    assert f.step(timeout + 0.2).restarted


def test_estop_before_any_output_holds_the_clipped_measured_position():
    f = SafetyFilter()
    f.estop("early")
    assert f.step(0.0) is None
    f.on_measured(JOINT_NAMES, [5.0, 0, 0, 0, 0, 0], [], [], 0.0)
    c = f.step(0.01)
    assert c.estopped and c.positions[0] == f.config.limits[0].upper


ARM = [0, 0, 0, 0, 0, 1.0]


def _gripper_measured(f: SafetyFilter, gripper: float, fraction: float, t: float) -> None:
    """A joint state: the arm where the filter sent it, the gripper at ``gripper`` with an effort (N·m, signed:
    closing pushes negative) of ``fraction`` of its max."""
    effort = -fraction * f.config.limits[5].max_effort
    arm = list(f.last.positions if f.last is not None else ARM)
    arm[5] = gripper
    assert f.on_measured(JOINT_NAMES, arm, [], [0.0] * 5 + [effort], t)


def test_a_grasp_stops_the_gripper_closing_eases_its_squeeze_and_may_open():
    """Fingers on an object: the gripper stays where the object is while the output closes on past it and the
    load climbs to the servo's torque cap. Once the load has stayed above the limit for the hold time with the
    gripper still, the output stops closing, eases back to the squeeze below the gripper (the load falls under
    the servo's overload protection, which trips after 2 s) and may open; the grasp is released below the limit
    less the hysteresis."""
    config = SafetyConfig()
    f = make(config, measured=ARM)
    run(f, 0.0, 0.2, command=(["gripper"], [0.6]), measured=FOLLOW)
    t = 0.2
    outputs = []
    while t < 1.2:  # the object is at 0.6; the policy closes on to -0.1
        t = round(t + DT, 6)
        f.on_command(["gripper"], [-0.1], t)
        _gripper_measured(f, 0.6, 0.5, t)
        outputs.append(f.step(t))
    loaded = [c for c in outputs if c.stamp < 0.2 + config.gripper_load_hold]
    assert not any(c.gripper_limited for c in loaded) and loaded[-1].positions[5] < 0.6 - config.gripper_grasp_squeeze
    grasping = [c for c in outputs if c.gripper_limited]
    assert grasping and grasping[0].stamp <= 0.2 + config.gripper_load_hold + 2 * DT
    assert grasping[-1].positions[5] == pytest.approx(0.6 - config.gripper_grasp_squeeze)
    assert all(b.positions[5] >= a.positions[5] for a, b in zip(grasping, grasping[1:], strict=False))  # no closing
    opening = run(f, t, 0.3, command=(["gripper"], [1.2]))
    assert opening[-1].positions[5] > 0.6  # opening is always allowed
    _gripper_measured(f, 0.6, 0.1, t + 0.31)  # an object held at the squeeze: still grasping
    assert f.step(t + 0.32).gripper_limited
    _gripper_measured(f, 0.6, 0.03, t + 0.33)
    assert not f.step(t + 0.34).gripper_limited


def test_a_free_gripper_under_the_same_load_is_no_grasp():
    """A gripper closing freely and fast loads its servo as much as a grasp does (measured: above 0.2 for up
    to 0.31 s); it is moving, so the filter lets it close."""
    f = make(measured=ARM)
    t = 0.0
    for _ in range(60):  # 0.6 s at full load, the gripper where the output sends it (it closes in 0.4 s)
        t = round(t + DT, 6)
        f.on_command(["gripper"], [-0.1], t)
        _gripper_measured(f, f.last.positions[5] if f.last is not None else 1.0, 0.5, t)
        out = f.step(t)
        assert not out.gripper_limited, t
    assert out.positions[5] == pytest.approx(-0.1)  # where the policy sent it


def test_a_gripper_pushed_open_and_held_is_no_grasp_and_may_close():
    """A sticky gripper the output pushes open: it stays put while its servo's load climbs the other way (the
    opening way, its effort positive). That is no grasp, which not closing would not relieve: the output closes
    again when the policy closes (measured on a held-out arm: counted as a grasp, the gripper stayed stuck open
    for the rest of the motion)."""
    config = SafetyConfig()
    f = make(config, measured=ARM)
    run(f, 0.0, 0.2, command=(["gripper"], [0.6]), measured=FOLLOW)
    t = 0.2
    while t < 1.2:  # stuck at 0.6 while the policy opens to 1.2: the servo pushes open at half its torque
        t = round(t + DT, 6)
        f.on_command(["gripper"], [1.2], t)
        _gripper_measured(f, 0.6, -0.5, t)
        assert not f.step(t).gripper_limited, t
    while t < 1.6:  # the policy closes; the gripper, still stuck, is pushed closed but not yet for the hold time
        t = round(t + DT, 6)
        f.on_command(["gripper"], [0.2], t)
        _gripper_measured(f, 0.6, 0.1, t)
        out = f.step(t)
    # it closes past where a grasp would keep it (no further closed than 0.6 − the squeeze), to the leash's bound
    assert not out.gripper_limited and out.positions[5] < 0.25


def test_gripper_load_from_measured_effort_and_staleness():
    config = SafetyConfig(gripper_load_limit=0.5, gripper_load_timeout=0.5, gripper_load_hold=0.0)
    f = make(config)
    effort = 0.9 * config.limits[5].max_effort
    f.on_measured(JOINT_NAMES, ZERO, [], [0, 0, 0, 0, 0, -effort], 0.0)
    assert f.step(0.01).gripper_limited
    f.on_measured(JOINT_NAMES, ZERO, [], [], 0.9)  # no effort field: the old reading ages out
    assert not f.step(1.0).gripper_limited


def test_smoothing_slows_the_approach():
    plain = run(make(), 0.0, 0.3, command=(["elbow_flex"], [1.0]), measured=FOLLOW)
    smooth = run(make(SafetyConfig(smoothing_cutoff_hz=1.0)), 0.0, 0.3, command=(["elbow_flex"], [1.0]), measured=FOLLOW)
    assert smooth[-1].positions[2] < plain[-1].positions[2]


def test_time_that_does_not_advance_repeats_the_last_output():
    f = make()
    f.on_command(["elbow_flex"], [1.0], 0.0)
    a = f.step(0.1)
    assert f.step(0.1) is a and f.step(0.05) is a
    assert f.step(math.nan) is None and f.step("later") is None  # malformed on purpose
    b = f.step(0.11)
    assert b.stamp == 0.11 and b is not a


def test_measured_state_validation():
    f = SafetyFilter()
    assert f.on_measured([], [], [], [], 0.0).reason is RejectReason.EMPTY
    assert f.on_measured(["gripper"], [0.1, 0.2], [], [], 0.0).reason is RejectReason.LENGTH_MISMATCH
    assert f.on_measured(["gripper"], [0.1], [1.0, 2.0], [], 0.0).reason is RejectReason.LENGTH_MISMATCH
    assert f.on_measured(["gripper", "gripper"], [0.1, 0.2], [], [], 0.0).reason is RejectReason.DUPLICATE_NAME
    assert f.on_measured(["camera_pan"], [0.1], [], [], 0.0).reason is RejectReason.UNKNOWN_JOINT
    assert f.on_measured(["gripper"], [math.nan], [], [], 0.0).reason is RejectReason.NON_FINITE
    assert f.on_measured(["gripper"], [0.1], [], [], math.inf).reason is RejectReason.BAD_STAMP
    assert f.on_measured(["gripper", "camera_pan"], [0.1, 0.0], [], [], 0.0)  # other joints are ignored
    assert sum(f.stats.measured_rejected.values()) == 7 and f.stats.measured_accepted == 1


def test_tick_is_due_for_the_first_output_and_not_before_the_arm_is_known():
    f = SafetyFilter()
    assert not f.tick_due(0.0, DT)  # no measured state: nothing to publish
    f.on_measured(JOINT_NAMES, ZERO, [], [], 0.0)
    assert f.tick_due(0.0, DT)


def test_commands_carry_the_output_while_they_flow_and_ticks_between_them():
    f = make()
    f.step(0.0)  # the first output: the arm's own position
    f.on_command(["elbow_flex"], [1.0], DT)
    c = f.step(DT)  # at the command's arrival
    assert c.positions[2] > 0.0 and c.rate_limited == ("elbow_flex",)
    assert not f.tick_due(DT + DT / 2, DT)  # an output went out within the period
    assert not f.tick_due(2.5 * DT, DT)  # a command came within two periods: the next one carries on
    assert f.tick_due(3.01 * DT, DT)  # the commands paused: the timer takes the output on to its target
    f.on_command(["elbow_flex"], [c.positions[2]], 3 * DT)  # a command the output has reached...
    f.step(3 * DT)
    f.on_command(["elbow_flex"], [c.positions[2]], 4 * DT)
    f.step(4 * DT)
    assert not f.tick_due(6 * DT, DT)  # ...at rest on it with fresh commands: nothing for the timer


def test_a_tick_waits_for_a_live_streams_next_command_for_the_streams_own_period():
    """A 50 Hz stream (the compensator's) beside the 100 Hz timer: a tick 20.5 ms after a command lands before the
    next command, a little late, and does not step first (through ROS, with two ticks as the only wait, up to 400
    extra outputs in 30 s in some runs, and the compensated gripper 30 mrad RMS off the multisine instead of 23)."""
    f = make()
    c = f.step(0.0)
    period, target = 0.02, 0.0
    for k in range(1, 11):
        target += 0.05  # faster than the rate bound: the output stays rate limited
        f.on_measured(JOINT_NAMES, list(c.positions), [], [], k * period)  # the arm where the outputs sent it
        f.on_command(["elbow_flex"], [target], k * period)
        c = f.step(k * period)
    assert c.rate_limited == ("elbow_flex",)
    last = 10 * period
    assert not f.tick_due(last + 0.0205, DT)  # its next command a little late: the command carries the output on
    assert f.tick_due(last + 0.0305, DT)  # 1.5 of its period late: the stream paused, the timer carries it on


def test_a_restarted_output_at_rest_short_of_its_target_still_ticks():
    f = make()
    f.on_command(["elbow_flex"], [1.0], 0.0)
    c = f.step(0.0)  # the first output restarts from the arm's position (at rest), not at the target
    assert c.restarted and c.velocities == (0.0,) * 6 and c.rate_limited == ("elbow_flex",)
    assert f.tick_due(3.01 * DT, DT)  # the commands paused: the timer takes the output on to its target


def test_ticks_carry_the_watchdog_hold_and_the_estop():
    f = make()
    f.on_command(["elbow_flex"], [1e-4], 0.0)
    f.step(0.02)
    timeout = f.config.watchdog_timeout
    assert f.tick_due(0.02 + timeout + DT, DT)  # the command stream went stale: the hold needs the timer
    g = make()
    g.on_command(["elbow_flex"], [1e-4], 0.0)
    g.step(0.02)
    g.estop("test")
    assert g.tick_due(0.04, DT)


def test_numbers_of_any_type_and_size_are_used_or_rejected_with_a_reason():
    f = SafetyFilter()
    assert f.step(10**400) is None and f.stats.bad_step_times == 1  # was: OverflowError
    assert f.step(Decimal("NaN")) is None and f.step("1.0") is None and f.stats.bad_step_times == 3
    measured = f.on_measured(JOINT_NAMES, [0.0] * 6, [], [], 10**400)
    assert measured.reason is RejectReason.BAD_STAMP and "is not a finite time" in measured.detail
    assert f.on_measured(JOINT_NAMES, [Fraction(1, 10), Decimal("0.2"), np.float32(0.3), np.int64(0), 0, 0.0],
                         [], [10**400] * 6, Fraction(3, 5))
    huge = f.on_command(["elbow_flex"], [10**400], 1.0)
    assert huge.reason is RejectReason.NON_FINITE and "beyond the float range" in huge.detail
    assert f.on_command(["elbow_flex"], [0.1], 10**400).reason is RejectReason.BAD_STAMP
    assert f.on_command(["elbow_flex"], [True], 1.0).reason is RejectReason.MALFORMED
    assert f.on_command(["elbow_flex"], [1 + 2j], 1.0).reason is RejectReason.MALFORMED
    assert f.on_command(["elbow_flex", "wrist_flex"], [Fraction(1, 5), Decimal("-0.1")], Decimal("0.6"))
    out = f.step(np.float64(0.6))
    assert out is not None and out.positions[1] == pytest.approx(0.2) and out.targets[2] == pytest.approx(0.2)
    assert out.targets[3] == pytest.approx(-0.1)


# ---------------------------------------------------------------- relative to the arm (issue 19)

def test_torque_off_in_a_hold_then_on_never_sends_the_arm_back_to_the_stale_hold():
    """The policy stops (hold), torque goes off and the arm falls, torque comes back on: the output
    follows the arm down and holds where it lies; nothing ever commands the old pose again."""
    f = make(SafetyConfig(watchdog_timeout=0.2))
    run(f, 0.0, 0.5, command=(["shoulder_lift"], [0.01]), measured=FOLLOW)
    held = run(f, 0.5, 0.5, measured=FOLLOW)
    assert held[-1].holding and held[-1].positions[1] == pytest.approx(0.01)
    config, lift = f.config, f.config.limits[1]
    arm = list(held[-1].positions)
    outputs = []
    for k in range(1, 101):  # torque off (no load): the shoulder falls to 1.749 rad in 0.5 s, then lies there
        t = 1.0 + k * DT
        arm[1] = min(1.749, 0.01 + 7.0 * (k * DT) ** 2)
        speed = 14.0 * k * DT if arm[1] < 1.749 else 0.0
        f.on_measured(JOINT_NAMES, arm, [0.0, speed, 0, 0, 0, 0], [0.0] * 6, t)
        outputs.append(f.step(t))
        # no load since the first reading: limp from limp_hold on, never further from it; before, the leash of an
        # arm that follows
        limp = t - (1.0 + DT) >= config.limp_hold
        leash = config.limp_tolerance if limp else config.reseed_tolerance + config.tracking_lag * speed
        assert abs(outputs[-1].positions[1] - lift.clip(arm[1])) <= leash + 1e-9
    assert outputs[-1].holding and outputs[-1].targets[1] == outputs[-1].positions[1]
    # torque on (load again): the arm holds where it lies; the output is already there and stays
    after = run(f, 2.0, 1.0, measured=FOLLOW)
    assert all(abs(c.positions[1] - lift.clip(1.749)) <= config.limp_tolerance + 1e-9 for c in after)
    assert f.stats.restarts >= 1


def test_a_servo_that_has_not_yet_heard_its_new_goal_is_not_taken_for_limp():
    """On a slow bus the arm rests at a reversal, in its dead band (no load), a round trip after the outputs
    turned: the outputs go on at their bounds; the joint is limp only after limp_hold of no load."""
    f = make()
    run(f, 0.0, 0.3, command=(["shoulder_pan"], [0.0]), measured=FOLLOW)
    sent: list[Any] = []
    for k in range(1, 31):  # the outputs head for 0.4 rad; the arm stays at 0 and reports no load
        t = 0.3 + k * DT
        f.on_command(["shoulder_pan"], [0.4], t)
        f.on_measured(JOINT_NAMES, ZERO, ZERO, ZERO, t)
        sent.append(f.step(t))
    unloaded = 0.3 + DT  # the first reading of no load
    hold = f.config.limp_hold
    before = [c for c in sent if c.stamp - unloaded < hold - DT / 2]
    assert not any(c.restarted for c in before)
    assert max(c.positions[0] for c in before) > f.config.limp_tolerance + 0.1  # the outputs went on
    restarted = next(c for c in sent if c.restarted)  # then limp: caught at its leash around the arm
    assert restarted.stamp - unloaded == pytest.approx(hold, abs=DT / 2)
    assert restarted.positions[0] == pytest.approx(f.config.limp_tolerance)


def test_a_blocked_arm_is_never_pushed_further_than_the_tolerance_plus_the_lag():
    config = SafetyConfig()
    f = make(config)
    bound = config.reseed_tolerance + config.max_velocity * config.tracking_lag
    for k in range(1, 301):  # the command is 2 rad away; the arm is stuck at 0.3
        t = k * DT
        f.on_command(["elbow_flex"], [2.0], t)
        f.on_measured(JOINT_NAMES, [0.0, 0.0, min(0.3, f.last.positions[2] if f.last else 0.0), 0.0, 0.0, 0.0],
                      [], [], t)
        c = f.step(t)
        assert c.positions[2] - 0.3 <= bound + 1e-9
    stuck = [0.0, 0.0, 0.3, 0.0, 0.0, 0.0]
    pulls = [c.positions[2] - 0.3 for c in run(f, 3.0, 1.0, command=(["elbow_flex"], [2.0]), measured=stuck)]
    assert f.stats.restarts == 1  # caught once, the output stays on its leash...
    assert min(pulls) >= config.reseed_tolerance - 1e-9  # ...and never lets go of the push (no drop to zero)


def test_a_lagging_arm_that_follows_is_not_restarted():
    """A servo follows its goal some 80 ms late at speed: within the tracking lag, no restart."""
    f = make()
    lag = round(0.08 / DT)
    outputs: list[Any] = []
    for k in range(1, 301):
        t = k * DT
        f.on_command(["wrist_roll"], [2.5 * math.sin(2.0 * t)], t)
        behind = outputs[-lag].positions if len(outputs) >= lag else ZERO
        f.on_measured(JOINT_NAMES, behind, [], [], t)
        outputs.append(f.step(t))
    assert f.stats.restarts == 0 and max(abs(c.velocities[4]) for c in outputs) > 2.0


def test_stale_measured_state_is_never_acted_on():
    f = make(SafetyConfig(watchdog_timeout=0.2))
    run(f, 0.0, 0.2, command=(["elbow_flex"], [1.5]), measured=FOLLOW)
    # joint_states stop while the commands go on: the output moves on until the last measurement is stale,
    # then brakes to a stop where it is; it never goes back to that last measurement
    quiet = run(f, 0.2, 1.0, command=(["elbow_flex"], [1.5]))
    first_hold = next(k for k, c in enumerate(quiet) if c.holding)
    before = quiet[first_hold - 1]
    y, v = before.positions[2], before.velocities[2]
    assert v > 1.0 and quiet[first_hold].measured_stale
    a = f.config.limits[2].max_acceleration
    assert quiet[first_hold].targets[2] == pytest.approx(y + v * v / (2 * a))
    assert quiet[-1].positions[2] == pytest.approx(y + v * v / (2 * a), abs=0.01)
    assert not any(c.restarted for c in quiet)  # an old measurement never moves the output


def test_no_first_output_from_an_old_measurement():
    f = make(SafetyConfig(watchdog_timeout=0.2))
    assert f.step(0.5) is None and not f.tick_due(0.5, DT)  # measured at 0.0: too old at 0.5
    f.on_measured(JOINT_NAMES, ZERO, [], [], 0.6)
    assert f.tick_due(0.6, DT) and f.step(0.6).restarted == JOINT_NAMES


def test_a_pushed_joint_restarts_alone_at_its_leash():
    f = make()
    run(f, 0.0, 0.5, command=(["elbow_flex", "wrist_flex"], [0.5, 0.5]), measured=FOLLOW)
    pushed = list(f.last.positions)
    pushed[3] += 0.6
    f.on_measured(JOINT_NAMES, pushed, [], [], 0.505)
    assert f.tick_due(0.51, DT)  # between commands, the timer leashes it at once
    c = f.step(0.51)
    assert c.restarted == ("wrist_flex",) and c.positions[3] == pytest.approx(pushed[3] - f.config.reseed_tolerance)
    assert "restarted at its leash around the measured position: wrist_flex" in c.reasons


# ---------------------------------------------------------------- pacing (command floods)

def test_commands_faster_than_max_rate_are_coalesced_the_latest_wins():
    f = make(SafetyConfig(max_rate_hz=100.0))
    f.step(0.0)
    forwarded = 0
    for k in range(1, 1001):  # 1 kHz for one second
        t = k * 0.001
        f.on_measured(JOINT_NAMES, f.last.positions, [], [], t)
        f.on_command(["elbow_flex"], [k * 1e-4], t)
        if f.forward_due(t):
            f.step(t)
            forwarded += 1
        elif f.tick_due(t, DT):  # the node's timer (its ticks land anywhere: every step is checked)
            f.step(t)
            forwarded += 1
    assert forwarded <= 100 + 2  # the rate, plus the burst a jittery stream needs
    assert f.stats.coalesced >= 1000 - forwarded - 1 and f.stats.accepted == 1000
    assert f.step(1.02).targets[2] == pytest.approx(0.1) and not f.pending  # the latest command is the target


def test_a_command_that_waits_for_its_turn_is_output_at_the_next_tick():
    f = make(SafetyConfig(max_rate_hz=100.0))
    for k in range(3):  # the burst: three outputs within a millisecond use up the tokens
        f.step(k * 1e-4 + 1e-3)
    f.on_command(["elbow_flex"], [0.1], 0.0015)
    assert not f.forward_due(0.0015) and f.pending and not f.tick_due(0.005, DT)
    assert f.tick_due(0.0125, DT)  # a token is back: the waiting command goes out
    assert f.step(0.0125).targets[2] == pytest.approx(0.1) and not f.pending


def test_a_stream_at_the_rate_is_forwarded_at_each_arrival_despite_jitter():
    f = make(SafetyConfig(max_rate_hz=100.0))
    f.step(0.0)
    t = 0.0
    for k in range(200):
        t += 0.006 if k % 2 else 0.014  # 100 Hz on average, jittered
        f.on_command(["elbow_flex"], [0.0], t)
        assert f.forward_due(t)
        f.step(t)
    assert f.stats.coalesced == 0


def test_a_servo_that_stops_answering_and_rejoins_moves_nothing_blind():
    """One servo silent (the driver reports NaN for it), then back where someone moved it meanwhile."""
    f = make(SafetyConfig(watchdog_timeout=0.2))
    run(f, 0.0, 0.3, command=(["wrist_flex"], [0.5]), measured=FOLLOW)
    silent = run(f, 0.3, 0.5, command=(["wrist_flex"], [0.5]),
                 measured=[0.0, 0.0, 0.0, math.nan, 0.0, 0.0])  # wrist_flex does not answer
    assert silent[-1].holding and silent[-1].measured_stale
    stopped = silent[-1].positions[3]
    assert all(c.positions[3] == stopped for c in silent[-10:])  # braked to a stop where it was, and stays
    back = [0.0, 0.0, 0.0, stopped + 1.0, 0.0, 0.0]  # it answers again, 1 rad away (moved while it was out)
    rejoined = run(f, 0.8, 0.5, command=(["wrist_flex"], [0.5]), measured=back)
    assert rejoined[0].restarted == ("wrist_flex",)
    assert abs(rejoined[0].positions[3] - back[3]) == pytest.approx(f.config.reseed_tolerance)  # on its leash
    assert not rejoined[-1].holding  # fresh again: the commands carry on from there, within the bounds
