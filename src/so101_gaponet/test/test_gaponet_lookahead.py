"""Compensator core with a look-ahead model: the upcoming command rows and the integral feedback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from so101_common.joints import JOINT_NAMES
from so101_gaponet.compensator import Compensator, CompensatorConfig, CompensatorError
from so101_gaponet.metadata import GapModelMetadata, Normalisation
from so101_gaponet.runtime import GapModel


class RecordingModel(GapModel):
    """Δ = 0 always (identity normalisation); keeps every command-rows input it was given."""

    format_name = "test"

    def __init__(self, template: GapModelMetadata, future_steps: int, feedback_gain: float | None,
                 direction_play: float = 0.0) -> None:
        columns, joints = template.history_columns, template.num_joints
        norm = Normalisation(history_mean=(0.0,) * columns, history_std=(1.0,) * columns, command_mean=(0.0,) * joints,
                             command_std=(1.0,) * joints, delta_mean=(0.0,) * joints, delta_std=(1.0,) * joints)
        gains = None if feedback_gain is None else (feedback_gain,) * joints
        super().__init__(Path("recording"), template.model_copy(update={
            "normalisation": norm, "future_steps": future_steps, "feedback_gain": gains,
            "direction_play": direction_play,
            "delta_bounds": (0.05,) * joints, "delta_slew_limit": None, "delta_smoothing_s": 0.0}))
        self.rows: list[np.ndarray] = []

    def run_normalised(self, history: np.ndarray, commands: np.ndarray) -> np.ndarray:
        self.rows.append(commands[0].copy())
        return np.zeros((1, self.metadata.num_joints), dtype=np.float32)


def _step(comp: Compensator, k: int, measured: np.ndarray, command: np.ndarray, upcoming: np.ndarray | None = None,
          velocity: np.ndarray | None = None):
    comp.update_measured(measured, np.zeros(6) if velocity is None else velocity, stamp=k * 0.02)
    return comp.compensate(command, now=k * 0.02, upcoming=upcoming)


def _warm(comp: Compensator, model: RecordingModel, command: np.ndarray) -> int:
    k = 0
    while not comp.warm:
        _step(comp, k, command, command)
        k += 1
    model.rows.clear()
    return k


@pytest.mark.parametrize("given, expected_rows", [
    (3, [0.0, 1.0, 2.0, 3.0]),  # current, then the first three upcoming
    (1, [0.0, 1.0, 1.0, 1.0]),  # fewer than needed: the last one held
    (0, [0.0, 0.0, 0.0, 0.0]),  # none (a policy without chunks): the current command held
])
def test_upcoming_commands_become_the_model_rows(tiny, given: int, expected_rows: list[float]) -> None:
    model = RecordingModel(tiny[0].metadata, future_steps=4, feedback_gain=None)
    comp = Compensator(CompensatorConfig(joints=JOINT_NAMES), model)
    k = _warm(comp, model, np.zeros(6))
    upcoming = np.arange(1.0, 6.0)[:given, None] * np.ones((given, 6)) if given else None
    _step(comp, k, np.zeros(6), np.zeros(6), upcoming)
    np.testing.assert_array_equal(model.rows[-1][:, 0], expected_rows)


def test_non_finite_upcoming_commands_are_refused(tiny) -> None:
    model = RecordingModel(tiny[0].metadata, future_steps=3, feedback_gain=None)
    comp = Compensator(CompensatorConfig(joints=JOINT_NAMES), model)
    k = _warm(comp, model, np.zeros(6))
    with pytest.raises(CompensatorError, match="upcoming"):
        _step(comp, k, np.zeros(6), np.zeros(6), np.full((2, 6), np.nan))


def test_integral_feedback_integrates_the_tracking_error_up_to_the_bound(tiny) -> None:
    gain = 0.25
    model = RecordingModel(tiny[0].metadata, future_steps=1, feedback_gain=gain)
    comp = Compensator(CompensatorConfig(joints=JOINT_NAMES), model)
    k = _warm(comp, model, np.zeros(6))
    command = np.full(6, 0.04)  # the arm stays at 0: an error of 0.04 rad (within the 0.05 bound) once the
    deltas = [_step(comp, k + i, np.zeros(6), command).delta[0] for i in range(12)]  # command is the previous one
    # the first step's previous command was 0 (no error); then 0.01 rad per step until the 0.05 bound
    np.testing.assert_allclose(deltas, [0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05],
                               atol=1e-12)
    # the error reverses: the correction unwinds at once (no wind-up beyond the bound)
    back = [_step(comp, k + 12 + i, np.full(6, 0.08), command).delta[0] for i in range(3)]
    np.testing.assert_allclose(back, [0.04, 0.03, 0.02], atol=1e-12)
    # an error beyond the bound (the arm still travelling to a far command) is not integrated
    far = [_step(comp, k + 15 + i, np.full(6, -0.5), command).delta[0] for i in range(3)]
    np.testing.assert_allclose(far, [0.02, 0.02, 0.02], atol=1e-12)


def test_disabling_clears_the_integral_and_the_configuration_overrides_the_file(tiny) -> None:
    model = RecordingModel(tiny[0].metadata, future_steps=1, feedback_gain=0.25)
    comp = Compensator(CompensatorConfig(joints=JOINT_NAMES), model)
    k = _warm(comp, model, np.zeros(6))
    for i in range(4):
        _step(comp, k + i, np.zeros(6), np.full(6, 0.04))
    comp.enabled = False
    assert not _step(comp, k + 4, np.zeros(6), np.full(6, 0.04)).compensated
    comp.enabled = True
    assert _step(comp, k + 5, np.zeros(6), np.full(6, 0.04)).delta[0] == pytest.approx(0.01)  # from 0 again
    off = Compensator(CompensatorConfig(joints=JOINT_NAMES, feedback_gain=(0.0,) * 6), model)
    k = _warm(off, model, np.zeros(6))
    assert all(_step(off, k + i, np.zeros(6), np.full(6, 0.04)).delta[0] == 0.0 for i in range(5))


def _reversing_run(comp: Compensator, model: RecordingModel) -> list[float]:
    """Δ per step on joint 0: the reference rises 10 steps (the arm 0.01 behind), holds 20 (the arm stuck
    0.01 short: dry friction), falls 10, holds 20 (stuck 0.01 above), rises again."""
    k = _warm(comp, model, np.zeros(6))
    rise, fall = np.arange(1, 11) * 0.01, np.arange(9, -1, -1) * 0.01
    reference = np.concatenate([rise, np.full(20, 0.1), fall, np.full(20, 0.0), rise[:3]])
    # where the arm is against the previous command (where the sim is): behind the motion by 0.01
    behind = np.concatenate([np.full(30, -0.01), np.full(30, 0.01), np.full(3, -0.01)])
    measured = np.concatenate([[0.0], reference[:-1]]) + behind
    return [_step(comp, k + i, np.full(6, q), np.full(6, c)).delta[0]
            for i, (c, q) in enumerate(zip(reference, measured, strict=True))]


def test_the_integral_keeps_one_correction_per_direction_of_the_reference(tiny) -> None:
    # one correction (play 0): +0.001 per step rising and stuck below, −0.001 falling and stuck above
    one = RecordingModel(tiny[0].metadata, 1, feedback_gain=0.1)
    single = _reversing_run(Compensator(CompensatorConfig(joints=JOINT_NAMES), one), one)
    np.testing.assert_allclose([single[9], single[29], single[39], single[59], single[60]],
                               [0.010, 0.030, 0.020, 0.0, 0.001], atol=1e-9)
    # one per direction: while moving both sides learn alike (lag is no friction); while the reference
    # holds and the arm is stuck, only the side in force; at the next rise the rising side's comes back
    two = RecordingModel(tiny[0].metadata, 1, feedback_gain=0.1, direction_play=0.003)
    split = _reversing_run(Compensator(CompensatorConfig(joints=JOINT_NAMES), two), two)
    np.testing.assert_allclose([split[9], split[29], split[39], split[59], split[60]],
                               [0.010, 0.030, 0.000, -0.020, 0.021], atol=1e-9)


@pytest.mark.parametrize("new_episode, falling", [(False, 0.009), (True, 0.029)])
def test_a_new_episode_starts_with_one_correction_for_both_directions(tiny, new_episode: bool, falling: float) -> None:
    """A hold before an episode (the arm brought to the start pose and left there) teaches the side in force
    alone; without a new episode the other side starts the motion that much apart (here 0.02), and both sides
    learning alike while the arm moves keeps it so. At a new episode the side not in force takes the side in
    force's correction: the first falling step goes on from it."""
    model = RecordingModel(tiny[0].metadata, 1, feedback_gain=0.1, direction_play=0.003)
    comp = Compensator(CompensatorConfig(joints=JOINT_NAMES), model)
    k = _warm(comp, model, np.zeros(6))
    rise = np.arange(1, 11) * 0.01
    reference = np.concatenate([rise, np.full(20, 0.1)])
    behind = np.full(30, -0.01)  # behind the rise, then stuck 0.01 short at the hold
    measured = np.concatenate([[0.0], reference[:-1]]) + behind
    deltas = [_step(comp, k + i, np.full(6, q), np.full(6, c)).delta[0]
              for i, (c, q) in enumerate(zip(reference, measured, strict=True))]
    assert deltas[-1] == pytest.approx(0.030)  # the rising side: 0.010 while moving, 0.020 more at the hold
    if new_episode:
        comp.new_episode()
    # the episode starts falling, the arm 0.01 above the previous command
    assert _step(comp, k + 30, np.full(6, 0.11), np.full(6, 0.09)).delta[0] == pytest.approx(falling)


def _run_with_speed(comp: Compensator, k: int, reference: np.ndarray, measured: np.ndarray) -> list[float]:
    """Δ per step on joint 0, the arm's velocity measured from its positions (as the servos report it)."""
    speed = np.diff(measured, prepend=measured[0]) / 0.02
    return [_step(comp, k + i, np.full(6, q), np.full(6, c), velocity=np.full(6, v)).delta[0]
            for i, (c, q, v) in enumerate(zip(reference, measured, speed, strict=True))]


def test_an_overshoot_after_a_reversal_is_learnt_by_the_side_in_force_alone(tiny) -> None:
    """The reference rises 10 steps (the arm 0.01 behind) and holds 20 (the arm stuck 0.01 short): the rising side
    ends the hold at 0.030, the falling side at 0.011. It falls, and the arm overshoots at once: 0.02 below the
    previous command, moving down, for 5 steps, then follows. That is the falling side's jump, not an offset common to
    both directions: the falling side learns it alone (+0.010), and when the reference rises again the rising side's
    correction is back as it was (0.030; both sides learning it: 0.040)."""
    model = RecordingModel(tiny[0].metadata, 1, feedback_gain=0.1, direction_play=0.003)
    comp = Compensator(CompensatorConfig(joints=JOINT_NAMES), model)
    k = _warm(comp, model, np.zeros(6))
    rise, fall = np.arange(1, 11) * 0.01, np.arange(9, -1, -1) * 0.01
    reference = np.concatenate([rise, np.full(20, 0.1), fall, [0.01]])
    previous = np.concatenate([[0.0], reference[:-1]])
    offset = np.concatenate([np.full(30, -0.01), np.full(5, -0.02), np.zeros(6)])  # behind, short, past the fall
    deltas = _run_with_speed(comp, k, reference, previous + offset)
    assert deltas[29] == pytest.approx(0.030)  # the rising side at the end of the hold
    assert deltas[39] == pytest.approx(0.021)  # the falling side and the overshoot it learnt
    assert deltas[40] == pytest.approx(0.030)  # the rising side again, untouched by the falling side's overshoot


def test_the_rising_side_s_correction_never_falls_below_the_falling_side_s(tiny) -> None:
    """Dry friction and backlash pull against the motion, so the rising side pushes up at least as much as the falling
    side. The reference rises 10 steps (the arm 0.01 behind: both sides 0.010) and holds 20 with the arm 0.01 past it
    (the rising side learns −0.020 alone, to −0.010): the falling side follows it down, and the fall starts from
    −0.010, not from the 0.010 that would push against the motion."""
    model = RecordingModel(tiny[0].metadata, 1, feedback_gain=0.1, direction_play=0.003)
    comp = Compensator(CompensatorConfig(joints=JOINT_NAMES), model)
    k = _warm(comp, model, np.zeros(6))
    reference = np.concatenate([np.arange(1, 11) * 0.01, np.full(20, 0.1), [0.09]])
    previous = np.concatenate([[0.0], reference[:-1]])
    offset = np.concatenate([np.full(10, -0.01), np.full(20, 0.01), [0.0]])
    deltas = _run_with_speed(comp, k, reference, previous + offset)
    assert deltas[29] == pytest.approx(-0.010)
    assert deltas[30] == pytest.approx(-0.010)  # the falling side's first step, the arm on the reference
