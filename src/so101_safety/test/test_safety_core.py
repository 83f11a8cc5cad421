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


def run(f: SafetyFilter, t0: float, seconds: float, command: tuple[Sequence[str], Sequence[float]] | None = None,
        measured: Sequence[float] | None = None) -> list[Any]:
    """Step at 100 Hz for ``seconds``; optionally re-send a command and a measured state every tick."""
    out = []
    for k in range(1, round(seconds / DT) + 1):
        t = t0 + k * DT
        if command is not None:
            f.on_command(*command, t)
        if measured is not None:
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
    assert first is not None and first.reseeded
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
    out = run(f, 0.0, 1.0, command=(["elbow_flex"], [0.5]), measured=ZERO)
    assert out[-1].positions[2] == pytest.approx(0.5)


def test_partial_command_moves_only_its_joints():
    f = make(measured=[0.1, -0.2, 0.3, 0.0, 0.0, 0.5])
    out = run(f, 0.0, 1.0, command=(["elbow_flex"], [1.0]), measured=[0.1, -0.2, 0.3, 0.0, 0.0, 0.5])
    assert out[-1].positions == pytest.approx([0.1, -0.2, 1.0, 0.0, 0.0, 0.5])
    assert not out[-1].holding and out[-1].reasons == ()


def test_out_of_limit_command_is_clipped_and_flagged():
    f = make()
    limit = f.config.limits[0].upper
    verdict = f.on_command(["shoulder_pan"], [10.0], 0.0)
    assert verdict and "clipped" in verdict.detail
    out = run(f, 0.0, 2.0, command=(["shoulder_pan"], [10.0]), measured=ZERO)
    assert max(c.positions[0] for c in out) == pytest.approx(limit)
    assert all(c.positions[0] <= limit for c in out)
    assert out[-1].clipped == ("shoulder_pan",)
    assert any("clipped" in r for r in out[-1].reasons)


def test_velocity_is_bounded():
    f = make(SafetyConfig(max_velocity=1.0, max_acceleration=1000.0))
    out = run(f, 0.0, 0.5, command=(["elbow_flex"], [1.5]))
    steps = [b.positions[2] - a.positions[2] for a, b in zip(out, out[1:], strict=False)]
    assert max(steps) == pytest.approx(1.0 * DT)
    assert out[-1].rate_limited == ("elbow_flex",)


def test_watchdog_holds_the_measured_position_then_resumes():
    f = make(SafetyConfig(watchdog_timeout=0.2))
    moving = run(f, 0.0, 0.5, command=(["wrist_flex"], [1.0]), measured=ZERO)
    assert not moving[-1].holding and moving[-1].positions[3] > 0.1
    arm = [0.0, 0.0, 0.0, 0.4, 0.0, 0.0]  # where the arm really is when the stream stalls
    stalled = run(f, 0.5, 1.5, measured=arm)
    assert not stalled[0].holding
    assert stalled[-1].holding and stalled[-1].command_stale
    assert any("watchdog" in r for r in stalled[-1].reasons)
    assert stalled[-1].positions == pytest.approx(arm)
    resumed = run(f, 2.0, 1.0, command=(["gripper"], [0.3]), measured=arm)
    assert not resumed[-1].holding
    assert resumed[-1].positions == pytest.approx([0.0, 0.0, 0.0, 0.4, 0.0, 0.3])  # other joints keep the hold


def test_stale_measured_state_also_holds():
    f = make(SafetyConfig(watchdog_timeout=0.2))
    out = run(f, 0.0, 0.5, command=(["gripper"], [1.0]))
    assert out[-1].holding and out[-1].measured_stale and not out[-1].command_stale


def test_estop_freezes_the_output_until_reset():
    f = make()
    moving = run(f, 0.0, 0.3, command=(["shoulder_lift"], [1.0]), measured=ZERO)
    f.estop("button")
    held = run(f, 0.3, 1.0, command=(["shoulder_lift"], [-1.0]), measured=[0.0, 0.2, 0, 0, 0, 0])
    assert all(c.estopped and c.positions == moving[-1].positions for c in held)
    assert held[-1].estop_reason == "button" and held[-1].state == "estopped"
    f.estop("again")
    assert f.estop_reason == "button" and f.stats.estops == 1
    assert f.reset() and not f.reset()
    after = run(f, 1.3, 1.0, measured=[0.0, 0.2, 0, 0, 0, 0])
    assert not after[0].estopped and after[-1].holding
    assert after[-1].positions == pytest.approx([0.0, 0.2, 0, 0, 0, 0])


def test_reset_restarts_from_the_measured_position_when_far():
    f = make()
    run(f, 0.0, 0.1)
    f.estop("test")
    run(f, 0.1, 0.1)
    pushed = [0.0, 0.0, 1.0, 0.0, 0.0, 0.0]  # someone moved the arm during the e-stop
    f.on_measured(JOINT_NAMES, pushed, [], [], 0.2)
    f.reset()
    first = f.step(0.21)
    assert first.reseeded and first.positions == pytest.approx(pushed)


def test_reset_continues_from_the_held_output_when_close():
    f = make()
    run(f, 0.0, 0.1)
    f.estop("test")
    run(f, 0.1, 0.1)
    f.on_measured(JOINT_NAMES, [0.0, 0.0, 0.02, 0.0, 0.0, 0.0], [], [], 0.2)
    f.reset()
    first = f.step(0.21)
    assert not first.reseeded and abs(first.positions[2]) < 0.02


def test_reset_reseeds_once_and_the_first_command_after_it_is_rate_limited():
    f = make()
    run(f, 0.0, 0.1)
    f.estop("test")
    run(f, 0.1, 0.1)
    f.on_measured(JOINT_NAMES, [0.0, 0.0, 1.0, 0.0, 0.0, 0.0], [], [], 0.2)
    f.reset()
    assert f.step(0.21).reseeded  # the reset's restart from the measured position (far from the held one)
    f.on_measured(JOINT_NAMES, [0.0, 0.0, 1.3, 0.0, 0.0, 0.0], [], [], 0.22)  # the arm still coasting
    f.on_command(["elbow_flex"], [2.0], 0.22)
    first = f.step(0.22)  # leaving the reset's hold: no second restart, the command is rate limited
    assert not first.reseeded
    assert abs(first.positions[2] - 1.0) <= f.config.max_velocity * 0.01 + 1e-12


def test_a_watchdog_hold_still_restarts_from_a_far_measured_position_on_the_next_command():
    f = make()
    f.on_command(["elbow_flex"], [0.0], 0.0)
    f.step(0.0)
    timeout = f.config.watchdog_timeout
    held = f.step(timeout + 0.1)
    assert held.holding
    f.on_measured(JOINT_NAMES, [0.0, 0.0, 1.0, 0.0, 0.0, 0.0], [], [], timeout + 0.2)  # moved by hand
    f.on_command(["elbow_flex"], [1.0], timeout + 0.2)
    assert f.step(timeout + 0.2).reseeded


def test_estop_before_any_output_holds_the_clipped_measured_position():
    f = SafetyFilter()
    f.estop("early")
    assert f.step(0.0) is None
    f.on_measured(JOINT_NAMES, [5.0, 0, 0, 0, 0, 0], [], [], 0.0)
    c = f.step(0.01)
    assert c.estopped and c.positions[0] == f.config.limits[0].upper


ARM = [0, 0, 0, 0, 0, 1.0]


def _gripper_load(f: SafetyFilter, fraction: float, t: float) -> None:
    """A joint state whose gripper effort (N·m, signed: closing pushes negative) is ``fraction`` of its max."""
    effort = -fraction * f.config.limits[5].max_effort
    assert f.on_measured(JOINT_NAMES, ARM, [], [0.0] * 5 + [effort], t)


def test_gripper_stops_closing_above_the_load_limit_and_may_open():
    f = make(SafetyConfig(gripper_load_limit=0.5, gripper_load_hysteresis=0.1), measured=ARM)
    run(f, 0.0, 0.2, command=(["gripper"], [1.0]), measured=ARM)
    closing = run(f, 0.2, 0.2, command=(["gripper"], [-0.1]), measured=ARM)
    g_before = closing[-1].positions[5]
    assert g_before < 1.0
    _gripper_load(f, 0.8, 0.4)  # squeezing hard
    squeezed = run(f, 0.4, 0.5, command=(["gripper"], [-0.1]), measured=ARM)
    assert squeezed[-1].gripper_limited
    assert squeezed[0].velocities[5] == 0.0  # stops closing at once
    assert all(c.positions[5] == g_before for c in squeezed)
    opening = run(f, 0.9, 0.3, command=(["gripper"], [1.2]), measured=ARM)
    assert opening[-1].positions[5] > squeezed[-1].positions[5]  # opening is always allowed
    _gripper_load(f, 0.45, 1.2)  # inside the hysteresis band: still limited
    assert f.step(1.21).gripper_limited
    _gripper_load(f, 0.3, 1.22)
    assert not f.step(1.23).gripper_limited


def test_gripper_load_from_measured_effort_and_staleness():
    config = SafetyConfig(gripper_load_limit=0.5, gripper_load_timeout=0.5)
    f = make(config)
    effort = 0.9 * config.limits[5].max_effort
    f.on_measured(JOINT_NAMES, ZERO, [], [0, 0, 0, 0, 0, -effort], 0.0)
    assert f.step(0.01).gripper_limited
    f.on_measured(JOINT_NAMES, ZERO, [], [], 0.9)  # no effort field: the old reading ages out
    assert not f.step(1.0).gripper_limited


def test_smoothing_slows_the_approach():
    plain = run(make(), 0.0, 0.3, command=(["elbow_flex"], [1.0]))
    smooth = run(make(SafetyConfig(smoothing_cutoff_hz=1.0)), 0.0, 0.3, command=(["elbow_flex"], [1.0]))
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


def test_a_restarted_output_at_rest_short_of_its_target_still_ticks():
    f = make()
    f.on_command(["elbow_flex"], [1.0], 0.0)
    c = f.step(0.0)  # the first output restarts from the arm's position (at rest), not at the target
    assert c.reseeded and c.velocities == (0.0,) * 6 and c.rate_limited == ("elbow_flex",)
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
