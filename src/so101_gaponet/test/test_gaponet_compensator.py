"""Compensator core: warm-up, bounds, NaN safety, passthrough, enable/disable, history layout."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from so101_common.joints import JOINT_NAMES, JOINTS
from so101_gaponet.compensator import Compensator, CompensatorConfig, CompensatorError
from so101_gaponet.metadata import ModelFileError
from so101_gaponet.model_file import load_model, save_onnx
from so101_gaponet.runtime import GapModel

SHIPPED_MODEL = Path(__file__).resolve().parents[3] / "models" / "gaponet_so101_default.onnx"  # the workspace's models/: tests run from the source tree

CONFIG = CompensatorConfig(joints=JOINT_NAMES)


def _run(comp: Compensator, steps: int, command: np.ndarray) -> list:
    results = []
    for i in range(steps):
        comp.update_measured(command * 0.9, np.zeros(6), stamp=i * 0.02)
        results.append(comp.compensate(command, now=i * 0.02))
    return results


def test_passthrough_without_model() -> None:
    comp = Compensator(CONFIG)
    command = np.linspace(-0.3, 0.3, 6)
    for result in _run(comp, 5, command):
        np.testing.assert_array_equal(result.command, command)
        assert not result.compensated
    assert comp.status()["mode"] == "passthrough (no model)"


def test_warm_up_then_bounded_compensation(tiny) -> None:
    model = load_model(tiny[1])
    comp = Compensator(CompensatorConfig(joints=JOINT_NAMES, delta_bounds=(0.01,) * 6), model)
    command = np.full(6, 0.5)
    results = _run(comp, model.metadata.history + 3, command)
    warm_up = results[: model.metadata.history - 1]
    assert all(not r.compensated and np.array_equal(r.command, command) for r in warm_up)
    active = results[model.metadata.history - 1:]
    assert all(r.compensated for r in active)
    for r in active:
        assert np.all(np.abs(r.delta) <= 0.01 + 1e-12)
        np.testing.assert_allclose(r.command, command + r.delta)
    assert any(np.abs(r.delta).max() > 0 for r in active)
    assert comp.status()["latency_p99_us"] != "n/a"


def test_history_holds_measured_state_and_previous_outputs(tiny) -> None:
    comp = Compensator(CONFIG, load_model(tiny[1]))
    outputs = []
    for i in range(5):
        comp.update_measured(np.full(6, 0.1 * i), np.full(6, -0.01 * i))
        outputs.append(comp.compensate(np.full(6, 0.2)).command)
    window = comp.history()  # last 3 rows, oldest first
    np.testing.assert_allclose(window[:, 0], [0.2, 0.3, 0.4])
    np.testing.assert_allclose(window[:, 6], [-0.02, -0.03, -0.04])
    np.testing.assert_allclose(window[:, 12:], np.vstack(outputs[1:4]))


def test_history_rows_hold_the_arm_where_it_was_at_each_step_not_where_the_newest_sample_was(tiny) -> None:
    """A sample reaches the compensator a bus round trip after the servos took it (15 ms here, stamped when taken).
    Each row is the arm at its step's instant, between the samples around it, beside the output of the step
    before: the rows a recording's frames make, which the model was trained on."""
    comp = Compensator(CONFIG, load_model(tiny[1]))
    outputs = []
    for k in range(6):
        sampled = 0.02 * k - 0.015
        comp.update_measured(np.full(6, sampled), np.ones(6), stamp=sampled)  # the arm at q(t) = t
        outputs.append(comp.compensate(np.full(6, 0.2), now=0.02 * k).command)
    window = comp.history()  # the steps the newest sample (taken at 0.085 s) has reached: 2, 3, 4
    np.testing.assert_allclose(window[:, 0], [0.04, 0.06, 0.08])
    np.testing.assert_allclose(window[:, 6], 1.0)
    np.testing.assert_allclose(window[:, 12:], np.vstack(outputs[1:4]))


def test_history_rows_keep_coming_when_the_samples_stop(tiny) -> None:
    from so101_gaponet.compensator import MAX_UNCOVERED_STEPS

    comp = Compensator(CONFIG, load_model(tiny[1]))
    comp.update_measured(np.full(6, 0.1), np.zeros(6), stamp=0.0)
    for k in range(MAX_UNCOVERED_STEPS + 3):
        comp.compensate(np.full(6, 0.2), now=0.02 * (k + 1))
    np.testing.assert_allclose(comp.history()[:, 0], 0.1)
    assert comp.warm


def test_disable_switches_to_passthrough_and_back(tiny) -> None:
    comp = Compensator(CONFIG, load_model(tiny[1]))
    command = np.full(6, 0.4)
    _run(comp, 4, command)
    comp.enabled = False
    off = _run(comp, 2, command)
    assert all(np.array_equal(r.command, command) and not r.compensated for r in off)
    assert comp.status()["mode"] == "disabled"
    comp.enabled = True
    assert _run(comp, 1, command)[0].compensated  # history kept filling: no new warm-up


def test_velocity_estimated_when_missing(tiny) -> None:
    comp = Compensator(CONFIG, load_model(tiny[1]))
    comp.update_measured(np.zeros(6), None, stamp=1.0)
    comp.update_measured(np.full(6, 0.02), [np.nan] * 6, stamp=1.02)
    comp.compensate(np.zeros(6))
    np.testing.assert_allclose(comp.history()[-1, 6:12], 1.0)


def test_model_nan_output_is_refused_at_load_and_a_fault_at_run_time(tiny, feedback_model, tmp_path: Path) -> None:
    result = tiny[0]
    broken = copy.deepcopy(result.module)
    with torch.no_grad():
        next(broken.parameters()).fill_(float("nan"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = save_onnx(broken, result.metadata, tmp_path / "nan.onnx")
    with pytest.raises(ModelFileError, match=r"nan\.onnx: the model returns non-finite Δ on an arm at rest"):
        load_model(path)
    # a model that turns NaN only while running (here on every step): Δ = 0 and a fault, never a NaN command
    comp = Compensator(CONFIG, feedback_model(float("nan")))
    command = np.full(6, 0.3)
    results = _run(comp, 4, command)
    assert results[-1].fault and not results[-1].compensated
    np.testing.assert_array_equal(results[-1].command, command)
    assert np.isfinite(results[-1].command).all()
    assert comp.status()["faults"] == 2 and "non-finite" in comp.status()["last_fault"]


def test_bad_inputs_are_refused(tiny) -> None:
    comp = Compensator(CONFIG, load_model(tiny[1]))
    with pytest.raises(CompensatorError, match="must have 6 values"):
        comp.compensate(np.zeros(5))
    with pytest.raises(CompensatorError, match="NaN"):
        comp.compensate(np.full(6, np.nan))
    with pytest.raises(CompensatorError, match="delta_bounds has 2 values"):
        CompensatorConfig(joints=JOINT_NAMES, delta_bounds=(0.1, 0.1))


def test_slew_limit_bounds_the_change_of_delta_and_ramps_in_after_passthrough(feedback_model) -> None:
    model = feedback_model(gain=10.0, sign_flip=True)
    comp = Compensator(CompensatorConfig(joints=JOINT_NAMES, delta_bounds=(0.1,) * 6, delta_slew_limit=(0.01,) * 6,
                                         delta_smoothing_s=0.0), model)
    command = np.full(6, 0.5)
    results = _run(comp, 30, command)  # measured 0.45: the model asks for ±0.5, clipped to ±0.1
    deltas = np.array([r.delta for r in results])
    steps = np.abs(np.diff(np.vstack([np.zeros(6), deltas]), axis=0))
    assert steps.max() <= 0.01 + 1e-12 and np.abs(deltas).max() <= 0.1 + 1e-12
    active = [r.delta for r in results if r.compensated]
    np.testing.assert_allclose(active[0], np.full(6, 0.01) * np.sign(active[0]))  # from 0, one slew step
    assert comp.status()["slew_limited_steps"] > 0
    comp.enabled = False
    assert np.array_equal(_run(comp, 1, command)[0].delta, np.zeros(6))
    comp.enabled = True
    assert np.abs(_run(comp, 1, command)[0].delta).max() == pytest.approx(0.01)  # no jump back to the old Δ


def test_no_overdrive_past_the_commands_while_the_safety_filter_holds_the_goal_back(feedback_model) -> None:
    """A model that leads a lagging arm asks for an output past the command. Where the safety filter's goal heads for
    that output at its bounds (far from it, moving towards it), the output stays within the commands ahead: the
    filter could not brake the overdrive in time and the arm overshot the target (80–90 mrad at each step of SAGE's
    prbs_excitation behind a 12 ms adapter). A goal that stays put far from the output (the filter's leash around an
    arm that does not follow) leaves the overdrive alone."""
    comp = Compensator(CompensatorConfig(joints=JOINT_NAMES, delta_bounds=(0.3,) * 6, delta_slew_limit=(0.1,) * 6,
                                         delta_smoothing_s=0.0), feedback_model(gain=2.0))
    command = np.full(6, 0.5)

    def steps(count: int, start: int, goals: Callable[[int], np.ndarray]) -> np.ndarray:
        for i in range(start, start + count):
            comp.update_measured(np.zeros(6), np.zeros(6), stamp=0.02 * i)  # the arm still 0.5 rad behind
            output = comp.compensate(command, now=0.02 * i).command
            comp.goal_reached(goals(i))
        return output

    overdriven = steps(10, 0, lambda i: np.full(6, 0.2))  # the goal stays 0.2 rad from the arm (the leash)
    np.testing.assert_allclose(overdriven, command + 0.3)  # Δ's bound past the command
    held = steps(5, 10, lambda i: np.full(6, 0.2 + 0.06 * (i - 10)))  # the goal heads for the output at 3 rad/s
    np.testing.assert_allclose(held, command)  # back within the command, one slew step (0.1) at a time
    np.testing.assert_allclose(steps(4, 15, lambda i: np.full(6, 0.3)), command + 0.3)  # stays put: leashed again


def test_the_integral_does_not_wind_while_the_safety_filter_holds_the_goal_back(feedback_model) -> None:
    """Anti-windup: while the filter holds a joint's goal back (the goal far from the output and heading for it at the
    filter's bounds), the arm's lag behind the command is the bound's, not a gap, and the correction does not grow
    that way; once the goal is the output, the same lag is integrated."""
    comp = Compensator(CompensatorConfig(joints=JOINT_NAMES, delta_bounds=(0.3,) * 6, delta_slew_limit=(0.1,) * 6,
                                         delta_smoothing_s=0.0, feedback_gain=(0.1,) * 6), feedback_model(gain=0.0))
    command = np.full(6, 0.5)

    def steps(count: int, start: int, goal: Callable[[int, np.ndarray], np.ndarray]) -> float:
        for i in range(start, start + count):
            comp.update_measured(np.full(6, 0.46), np.zeros(6), stamp=0.02 * i)  # 40 mrad behind the command
            output = comp.compensate(command, now=0.02 * i).command
            comp.goal_reached(goal(i, output))
        return max(comp.status()["feedback_correction"])

    assert steps(20, 0, lambda i, output: np.full(6, 0.1 + 0.01 * i)) == 0.0  # held back: nothing wound
    assert steps(5, 20, lambda i, output: output) > 0.01  # passed: the lag is integrated


def test_smoothing_is_a_first_order_low_pass_on_delta(feedback_model) -> None:
    model = feedback_model(gain=1.0)
    tau, dt = 0.1, 1.0 / model.metadata.rate_hz
    comp = Compensator(CompensatorConfig(joints=JOINT_NAMES, delta_bounds=(1.0,) * 6, delta_slew_limit=(1.0,) * 6,
                                         delta_smoothing_s=tau, max_delta=1.0, max_delta_rate=model.metadata.rate_hz),
                       model)
    command = np.full(6, 0.5)
    results = [r for r in _run(comp, 40, command) if r.compensated]  # raw Δ = 0.05 on every step
    n = np.arange(1, len(results) + 1)
    np.testing.assert_allclose([r.delta[0] for r in results], 0.05 * (1 - np.exp(-n * dt / tau)), atol=1e-6)  # float32 model inputs


def test_constant_command_on_a_settled_arm_gives_a_constant_output() -> None:
    comp = Compensator(CONFIG, load_model(SHIPPED_MODEL))
    command = np.array([0.3, -0.6, 0.7, 0.5, 0.4, 0.6])
    outputs = []
    for i in range(150):
        comp.update_measured(command, np.zeros(6), stamp=i * 0.02)
        outputs.append(comp.compensate(command, now=i * 0.02).command)
    assert np.ptp(np.array(outputs[-50:]), axis=0).max() < 1e-6


def test_slew_and_smoothing_settings_are_checked() -> None:
    with pytest.raises(CompensatorError, match="delta_slew_limit has 1 values"):
        CompensatorConfig(joints=JOINT_NAMES, delta_slew_limit=(0.1,))
    with pytest.raises(CompensatorError, match="delta_slew_limit must be finite and > 0"):
        CompensatorConfig(joints=JOINT_NAMES, delta_slew_limit=(0.0,) * 6)
    with pytest.raises(CompensatorError, match="delta_smoothing_s must be"):
        CompensatorConfig(joints=JOINT_NAMES, delta_smoothing_s=-1.0)


def test_a_joint_that_does_not_answer_keeps_its_previous_measurement_and_its_correction() -> None:
    """The driver reports a faulted servo's joint as NaN: the output stays finite (the integral feedback
    took the NaN in for good before, which made the safety filter refuse every later command and hold the
    arm); that joint's feedback correction waits for its next reading, the other joints' go on."""
    model = load_model(SHIPPED_MODEL)
    assert model.metadata.feedback_gain is not None and min(model.metadata.feedback_gain) > 0
    comp = Compensator(CONFIG, model)
    corrections = []
    for i in range(60):
        t = i * 0.02
        command = np.array([0.3, -0.6, 0.7, 0.5, 0.4, 0.6]) + 0.2 * np.sin(2.0 * t)
        measured = command - 0.03
        if 30 <= i < 35:  # elbow and gripper servos do not answer for five cycles
            measured[[2, 5]] = np.nan
        comp.update_measured(measured, np.where(np.isnan(measured), np.nan, 0.0), stamp=t)
        out = comp.compensate(command, now=t)
        assert np.isfinite(out.command).all(), f"step {i}: {out.command}"
        corrections.append(comp.status()["feedback_correction"])
    during = np.diff(np.array(corrections[29:35]), axis=0)  # the five steps without a reading
    assert np.all(during[:, [2, 5]] == 0.0) and np.all(during[:, [0, 1, 3, 4]] != 0.0)
    assert np.all(np.diff(np.array(corrections[34:38]), axis=0) != 0.0)  # answering again: corrected again


def test_the_feedback_integrates_each_measurement_once() -> None:
    """A step that follows no new measured state (a starved driver: joint states at 15-25 Hz through ROS)
    does not add the same tracking error to the correction again; re-adding it multiplied the loop's gain
    and the correction swung to Δ's bound."""
    comp = Compensator(CONFIG, load_model(SHIPPED_MODEL))
    command = np.array([0.3, -0.6, 0.7, 0.5, 0.4, 0.6])
    for i in range(20):
        comp.update_measured(command - 0.03, np.zeros(6), stamp=i * 0.02)
        comp.compensate(command, now=i * 0.02)
    before = comp.status()["feedback_correction"]
    comp.compensate(command, now=0.4)
    assert comp.status()["feedback_correction"] == before
    comp.update_measured(command - 0.03, np.zeros(6), stamp=0.42)
    comp.compensate(command, now=0.42)
    assert comp.status()["feedback_correction"] != before


def test_a_servo_at_its_goal_between_two_encoder_steps_is_left_alone_and_one_a_step_off_is_corrected() -> None:
    """LeRobot calibrates wrist_roll over the full turn (range 0..4095, mid 2047.5: ``rad = (raw − 2047.5)·2π/4095``),
    so its zero lies between two steps and a servo holding 0 reads half a step off whatever it does. The integral
    wound against that half step (1.9 mrad/s), moved the goal a step, wound back: on an arm with 80 mrad of wrist
    play the held joint hunted ±5 mrad where it held within 2 mrad uncompensated (through ROS). An error within half
    a step is the encoder's rounding; one beyond it is corrected."""
    comp = Compensator(CONFIG, load_model(SHIPPED_MODEL))
    step = 2 * np.pi / 4095
    command = np.array([0.3, -0.6, 0.7, 0.5, 0.0, 0.6])
    roll = JOINT_NAMES.index("wrist_roll")

    def hold(raw: float, steps: int, start: int) -> float:
        measured = command.copy()
        measured[roll] = (raw - 2047.5) * step
        for i in range(start, start + steps):
            comp.update_measured(measured, np.zeros(6), stamp=i * 0.02)
            comp.compensate(command, now=i * 0.02)
        return comp.status()["feedback_correction"][roll]

    assert hold(2048, 200, 0) == 0.0  # 4 s at the goal's step, half a step off: nothing integrated
    assert hold(2049, 20, 200) < -0.01 * step  # a step and a half off: corrected


def test_the_correction_does_not_wind_up_while_the_arm_travels_to_a_far_command() -> None:
    """An arm still on its way to a command further than Δ's bound (a start pose, the safety filter's ramp):
    that error is no friction or gravity offset, and integrating it wound the correction up to its bound;
    the arm then overshot the pose by as much (through ROS, 0.27 rad on shoulder_lift at the demo's start).
    The correction waits until the error is within the bound, then removes the offset that is left."""
    comp = Compensator(CONFIG, load_model(SHIPPED_MODEL))
    command = np.array([0.3, -0.6, 0.7, 0.5, 0.4, 0.6])
    start = command - (comp.delta_bounds + 0.2)
    for i in range(50):  # travelling: the error shrinks from bound + 0.2 to bound + 0.01
        t = i * 0.02
        comp.update_measured(start + (0.19 * i / 49) * np.ones(6), np.zeros(6), stamp=t)
        comp.compensate(command, now=t)
        assert comp.status()["feedback_correction"] == [0.0] * 6, i
    for i in range(50, 100):  # arrived, 0.02 rad short of the command (sag): the correction takes it up
        comp.update_measured(command - 0.02, np.zeros(6), stamp=i * 0.02)
        comp.compensate(command, now=i * 0.02)
    assert all(c > 0.01 for c in comp.status()["feedback_correction"])


def test_a_long_window_model_runs_after_its_warm_up_rows_with_the_window_filled_by_the_first_measurement(
        tmp_path: Path) -> None:
    from so101_gaponet.context import ContextCompensator
    from so101_gaponet.metadata import GapModelMetadata, Normalisation

    columns, rows = 18, 12
    norm = Normalisation(history_mean=(0.0,) * columns, history_std=(1.0,) * columns, command_mean=(0.0,) * 6,
                         command_std=(1.0,) * 6, delta_mean=(0.0,) * 6, delta_std=(0.01,) * 6)
    torch.manual_seed(0)
    module = ContextCompensator(norm, JOINT_NAMES, 2, rows, np.full(6, 0.05), np.full(6, 0.05), np.full(6, 0.2),
                                hidden=8, encoder_hidden=4, latent=2)
    meta = GapModelMetadata(role="compensator", model_kind="context_mlp", joints=JOINT_NAMES, history=rows,
                            warmup_rows=3, future_steps=2, rate_hz=50.0, horizon=2, normalisation=norm,
                            delta_bounds=(0.1,) * 6, architecture=module.record())
    comp = Compensator(CONFIG, load_model(save_onnx(module, meta, tmp_path / "m.onnx")))
    first = np.linspace(-0.2, 0.3, 6)
    results = []
    for i in range(4):
        comp.update_measured(first + 0.01 * i, np.zeros(6), stamp=0.02 * i)
        results.append(comp.compensate(first + 0.05, now=0.02 * i))
        if i == 0:  # the whole window is the first measurement: the arm at rest where it was first seen
            np.testing.assert_array_equal(comp.history()[:, :6], np.tile(first, (rows, 1)))
    assert [r.compensated for r in results] == [False, False, True, True]
    np.testing.assert_allclose(comp.history()[-4:, 0], first[0] + 0.01 * np.arange(4))
    np.testing.assert_allclose(comp.history()[:-4, 0], first[0])


def test_the_guard_shrinks_a_delta_that_makes_the_error_larger_and_keeps_one_that_removes_it() -> None:
    """Known answers on one joint at 50 Hz: a constant Δ of 0.01 rad whose whole effect shows up as tracking error
    (the arm was on the reference without it) is shrunk to 0.25 after one 1 s window and to 0 after the next;
    the same Δ whose effect cancels an error the arm had is left alone."""
    from so101_gaponet.compensator import DeltaGuard, GuardSettings

    def run(sign: float) -> DeltaGuard:
        guard = DeltaGuard(("shoulder_pan",), GuardSettings(), step_s=0.02)
        effect = 0.0
        for _ in range(100):
            delta = 0.01 * guard.scale[0]
            guard.observe(0, -effect if sign < 0 else 0.0)  # error = error without Δ − Δ's effect
            guard.sent(0, delta)
            effect = delta + np.exp(-0.02 / 0.1) * (effect - delta)
        return guard

    harmful = run(-1.0)
    assert harmful.scale == [0.0] and harmful.events == 2
    assert harmful.last_event.startswith("shoulder_pan: RMS tracking error")
    helpful = run(+1.0)
    assert helpful.scale == [1.0] and helpful.events == 0


def test_a_joint_the_guard_shrank_to_zero_comes_back_once_the_delta_it_holds_back_would_help() -> None:
    """Known answers on one joint at 50 Hz: Δ = 0.01 rad first shows up whole as tracking error (shrunk to 0 after two
    1 s windows, as above); then the arm gets an error of 0.01 rad that the same Δ would cancel. At scale 0 there is no
    Δ to judge by its own effect, so the guard judges the Δ it holds back, and the scale doubles back to 1."""
    from so101_gaponet.compensator import DeltaGuard, GuardSettings

    guard = DeltaGuard(("shoulder_pan",), GuardSettings(), step_s=0.02)
    applied = 0.0  # the estimated effect of the Δ sent
    keep = np.exp(-0.02 / 0.1)
    scales = []
    for step in range(600):
        without = 0.0 if step < 100 else 0.01  # the arm's error without Δ
        guard.observe(0, without - applied)
        delta = 0.01 * guard.scale[0]
        guard.sent(0, delta, 0.01)
        applied = delta + keep * (applied - delta)
        scales.append(guard.scale[0])
    assert scales[99] == 0.0 and guard.events == 2
    assert scales[-1] == 1.0
    assert sorted(set(scales[100:])) == [0.0, 0.1, 0.2, 0.4, 0.8, 1.0]


def test_the_guard_judges_the_delta_that_reached_the_arm_not_the_one_it_sent() -> None:
    """A harmful Δ of which a bounding stage after the compensator (the safety filter) passes a quarter: the arm
    was on the reference without it, so its whole error is the quarter's effect. Judged by the Δ sent, the
    estimated error without Δ is three times the error (Δ looks helpful) and nothing is shrunk; told what reached
    the servos, the guard sees the harm and shrinks it."""
    from so101_gaponet.compensator import DeltaGuard, GuardSettings

    def run(told: bool) -> DeltaGuard:
        guard = DeltaGuard(("shoulder_pan",), GuardSettings(), step_s=0.02)
        effect = 0.0
        for _ in range(100):
            sent = 0.04 * guard.scale[0]
            guard.observe(0, -effect)
            guard.sent(0, sent)
            if told:
                guard.reached(0, sent / 4)
            effect = sent / 4 + np.exp(-0.02 / 0.1) * (effect - sent / 4)
        return guard

    assert run(told=False).scale == [1.0]
    assert run(told=True).scale == [0.0]


def test_the_correction_eases_off_a_servo_that_already_pushes_near_its_overload_protection() -> None:
    """A joint held short of its target (stiction, gravity) keeps an integral pushing; its servo's load climbs with
    the push, and the servo's overload protection trips once the load stays above its threshold for 2 s, which
    switches its torque off: the gripper's (LeRobot: 25 %) at 34 % after 16 s on a held-out arm, an elbow's (80 %)
    on a slow real motion (measured). The gripper's correction eases as soon as its load in the push's direction
    reaches 0.2; an arm joint's only once its load has stayed above 0.78 for 1 s: gravity needs loads near the
    threshold, and under it nothing trips."""
    comp = Compensator(CONFIG, load_model(SHIPPED_MODEL))
    command = np.array([0.3, -0.6, 0.7, 0.5, 0.4, 0.6])
    max_effort = np.array([spec.max_effort for spec in JOINTS])
    step_s = 1.0 / comp.model.metadata.rate_hz
    steps = 0

    def hold(seconds: float, load: np.ndarray) -> np.ndarray:
        nonlocal steps
        for _ in range(round(seconds / step_s)):
            steps += 1
            comp.update_measured(command - 0.01, np.zeros(6), stamp=steps * step_s, effort=load * max_effort)
            comp.compensate(command, now=steps * step_s)
        return np.array(comp.status()["feedback_correction"])

    free = hold(0.8, np.full(6, 0.1))  # light load: every correction grows towards the offset
    assert np.all(free > 0.005)
    near = hold(2.0, np.array([0.75, 0.75, 0.75, 0.75, 0.75, 0.3]))  # the gripper past its 0.2; the arm joints near 0.78
    assert near[5] < 0.5 * free[5]  # the gripper's correction eases off at once ...
    assert np.all(near[:5] > free[:5])  # ... the arm joints' go on growing under their threshold, however long
    over = hold(0.8, np.full(6, 0.9))  # the arm joints over it, for less than 1 s: still growing
    assert np.all(over[:5] > near[:5])
    eased = hold(0.6, np.full(6, 0.9))  # ... past 1 s: easing
    assert np.all(eased[:5] < over[:5])
    against = hold(0.8, np.array([0.3, 0.3, 0.3, 0.3, 0.3, -0.3]))  # the gripper pushing the other way: no limit to it
    assert against[5] > eased[5]


def test_a_loaded_servo_does_not_stop_a_correction_that_would_relieve_it() -> None:
    """The load limit eases a correction that pushes the way its servo already pushes hard; from zero, a correction
    pushes no way yet, so it may start, whichever the servo's load (it froze at zero while the load was past the
    limit the other way: a gripper pushing closed at 30 % could not get an opening correction)."""
    comp = Compensator(CONFIG, load_model(SHIPPED_MODEL))
    command = np.array([0.3, -0.6, 0.7, 0.5, 0.4, 0.6])
    max_effort = np.array([spec.max_effort for spec in JOINTS])
    step_s = 1.0 / comp.model.metadata.rate_hz
    for i in range(100):  # 2 s: past every hold time
        comp.update_measured(command - 0.01, np.zeros(6), stamp=i * step_s, effort=-0.9 * max_effort)
        comp.compensate(command, now=i * step_s)
    assert np.all(np.array(comp.status()["feedback_correction"]) > 0.005)


class _LeadModel(GapModel):
    """A look-ahead model with a known law: Δ = half the reference's change over the look-ahead (a lead, in phase
    with the reference's velocity). The shipped model's file gives the layout (50 Hz, 8 command rows)."""

    def delta(self, history: np.ndarray, commands: np.ndarray) -> np.ndarray:
        return 0.5 * np.asarray(commands[-1] - commands[0], dtype=np.float64)

    def run_normalised(self, history: np.ndarray, commands: np.ndarray) -> np.ndarray:
        raise AssertionError("the core asks for delta()")


def test_the_lead_is_judged_by_where_the_arm_was_when_sampled_however_late_the_sample_arrives() -> None:
    """The lead's scale adapts to the arm, not to how late its samples reach the compensator. Through ROS behind a
    9 ms adapter a sample is 17–20 ms old when it arrives, a few ms more than in the harness; judged against the
    previous step's command, that age looked like an arm needing more lead and the scale ran to its bound (1.5):
    the arm overshot the reference. Here an arm exactly where the reference was at each sample's instant keeps the
    scale at 1 whether its samples arrive 20, 35 or 50 ms late (judged against the previous step's command: 1.0, then
    1.5, the bound, at 35 and 50 ms), and an arm 40 ms behind the reference gets more lead at every age."""
    shipped = load_model(SHIPPED_MODEL)
    step = 1.0 / shipped.metadata.rate_hz
    ahead = shipped.metadata.future_steps - 1

    def reference(t: float) -> np.ndarray:  # a 0.5 Hz sine on every joint, around the middle of its range
        return np.array([(j.lower + j.upper) / 2 for j in JOINTS]) + 0.3 * np.sin(np.pi * t)

    def lead_scale(age: float, behind: float) -> np.ndarray:
        comp = Compensator(CompensatorConfig(JOINT_NAMES, feedback_gain=(0.0,) * 6),
                           _LeadModel(Path("lead"), shipped.metadata))
        for k in range(500):  # 10 s
            now = k * step
            sampled = now - age
            comp.update_measured(reference(sampled - behind), stamp=sampled)
            comp.compensate(reference(now), now=now, upcoming=np.array([reference(now + i * step) for i in range(1, ahead + 1)]))
        return np.array(comp.status()["lead_scale"])

    for age in (0.02, 0.035, 0.05):
        np.testing.assert_allclose(lead_scale(age, 0.0), 1.0, atol=0.01, err_msg=f"samples {age * 1e3:g} ms old")
        assert np.all(lead_scale(age, 0.04) > 1.2), age
