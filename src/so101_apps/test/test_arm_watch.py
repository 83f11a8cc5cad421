"""The motion supervisor's view of the arm, without ROS: rest at the command, joint-state count, fault times."""

from __future__ import annotations

import numpy as np
import pytest

from so101_apps.arm_watch import ArmWatch, StateGap
from so101_common.joints import JOINT_NAMES
from so101_common.servo_faults import ServoFault, ServoFaultKind

POSE = [0.1, -0.2, 0.3, 0.0, 0.0, 0.5]


def test_settled_needs_the_arm_near_its_command_and_still_for_the_hold_time() -> None:
    watch = ArmWatch(now=0.0)
    watch.on_command(JOINT_NAMES, POSE)
    assert not watch.settled(now=1.0)  # nothing measured yet
    watch.on_state(JOINT_NAMES, [p + 0.1 for p in POSE], now=1.0)  # within 0.25 rad: sag, still travelling
    watch.on_state(JOINT_NAMES, [p + 0.1 + 0.004 for p in POSE], now=1.2)  # moved < 5 mrad: at rest since 1.0
    assert not watch.settled(now=1.25) and watch.settled(now=1.3)
    watch.on_state(JOINT_NAMES, [p + 0.12 for p in POSE], now=1.4)  # moved again
    assert not watch.settled(now=1.6) and watch.settled(now=1.7)
    watch.on_state(JOINT_NAMES, [p + 0.3 for p in POSE], now=2.0)
    assert not watch.settled(now=9.0)  # still, but 0.3 rad from its command


def test_fault_spans_and_joint_states_count_from_the_motion_start() -> None:
    watch = ArmWatch(now=0.0)
    watch.on_state(JOINT_NAMES, POSE, now=5.0)
    watch.on_faults([ServoFault("elbow_flex", (ServoFaultKind.OVERHEAT,), "hot")], now=9.0)
    watch.mark(now=10.0)  # a new motion: earlier spans and counts are the last motion's
    assert watch.states == 0 and not watch.faults.active
    watch.on_state(JOINT_NAMES, POSE, now=10.5)
    watch.on_faults([], now=11.0)  # a status report without servos changes nothing
    watch.on_faults([ServoFault("elbow_flex", (ServoFaultKind.OVERHEAT,), "hot")], now=12.5)
    (span,) = watch.faults.spans()
    assert (span.joint, span.fault, span.start, span.end) == ("elbow_flex", "overheat", 2.5, None)
    assert watch.states == 1


STEP = 2 * np.pi / 4096  # one encoder step (rad)


def _noisy_states(watch: ArmWatch, pose: np.ndarray, start: float, seconds: float, velocity: float | np.ndarray = 0.0,
                  seed: int = 0) -> float:
    """Joint states of a noisy real encoder (1.5 steps σ, quantised to steps) on a jittery adapter (5–15 ms apart)."""
    rng = np.random.default_rng(seed)
    now = start
    while now < start + seconds:
        true = pose + velocity * (now - start)
        watch.on_state(JOINT_NAMES, list(np.round((true + rng.normal(0.0, 1.5 * STEP, len(pose))) / STEP) * STEP), now)
        now += rng.uniform(0.005, 0.015)
    return now


def test_an_arm_at_rest_with_noisy_encoders_is_settled() -> None:
    watch = ArmWatch(now=0.0)
    watch.on_command(JOINT_NAMES, POSE)
    end = _noisy_states(watch, np.array(POSE) + 0.02, start=0.0, seconds=1.0)  # sagging 20 mrad, at rest
    assert watch.waiting_for(end) is None and watch.settled(end)


def test_a_slowly_moving_arm_is_not_settled_and_the_wait_names_the_joint() -> None:
    watch = ArmWatch(now=0.0)
    watch.on_command(JOINT_NAMES, POSE)
    velocity = np.zeros(len(POSE))
    velocity[JOINT_NAMES.index("wrist_flex")] = 0.1  # rad/s: still creeping towards its command
    end = _noisy_states(watch, np.array(POSE) - 0.2 * np.sign(velocity), start=0.0, seconds=1.0, velocity=velocity)
    reason = watch.waiting_for(end)
    assert reason is not None and reason.startswith("the arm to come to rest: wrist_flex moved")
    assert "elbow_flex" not in reason


def test_the_wait_says_which_joint_is_far_from_its_command() -> None:
    watch = ArmWatch(now=0.0)
    assert watch.waiting_for(0.0) == "the first command"
    watch.on_command(JOINT_NAMES, POSE)
    assert watch.waiting_for(0.0) == "the first joint state"
    far = list(POSE)
    far[1] += 0.4
    watch.on_state(JOINT_NAMES, far, now=0.0)
    assert watch.waiting_for(1.0) == "shoulder_lift 0.400 rad from its command (tolerance 0.25 rad)"


def test_the_twin_is_live_while_its_states_keep_coming() -> None:
    watch = ArmWatch(now=0.0)
    assert not watch.twin_live(0.0)
    watch.on_twin(1.0)
    assert watch.twin_live(1.1) and not watch.twin_live(1.5)


def test_a_new_motion_waits_for_its_start_pose_to_be_commanded_and_held() -> None:
    watch = ArmWatch(now=0.0)
    previous_end = [p + 0.2 for p in POSE]  # the last motion ended within the rest tolerance of the next start
    watch.on_command(JOINT_NAMES, previous_end)
    for k in range(10):
        watch.on_state(JOINT_NAMES, previous_end, now=0.1 * k)
    assert watch.settled(now=0.9)
    watch.expect_command(JOINT_NAMES, POSE)
    assert watch.waiting_for(now=0.9) == "the motion's start pose to be commanded"
    watch.on_command(JOINT_NAMES, previous_end)  # the player's last message of the previous pose, still in flight
    assert not watch.settled(now=1.0)
    watch.on_command(JOINT_NAMES, POSE)
    watch.on_state(JOINT_NAMES, previous_end, now=1.0)
    assert watch.waiting_for(now=1.0) == "0.3 s of joint states"  # rest is judged on states after the new command
    watch.on_state(JOINT_NAMES, [p + 0.1 for p in POSE], now=1.2)
    watch.on_state(JOINT_NAMES, POSE, now=1.4)
    assert not watch.settled(now=1.4)  # still travelling
    for k in range(5):
        watch.on_state(JOINT_NAMES, POSE, now=1.5 + 0.1 * k)
    assert watch.settled(now=1.9)


def test_a_diagnostics_array_gives_the_driver_s_rate_the_servo_temperatures_and_what_recording_waits_for() -> None:
    watch = ArmWatch(now=0.0)
    watch.on_command(JOINT_NAMES, POSE)
    for k in range(5):
        watch.on_state(JOINT_NAMES, POSE, now=0.1 * k)
    assert watch.recording_waits(0.4, {"/joint_command"}, twin=True) == [
        "the recorder to subscribe to ['/joint_command']", "the driver's first report on /diagnostics",
        "the live gap twin's state"]
    watch.on_diagnostics([({"configured_rate_hz": "100.0", "achieved_rate_hz": "99.8"}, "bus ok"),
                          ({"joint": "shoulder_lift", "temperature_c": "41"}, "ok"),
                          ({"joint": "gripper", "fault": "no reply"}, "no data")], now=0.4)
    assert watch.driver_rate_hz == 100.0 and watch.bus_entries[-1]["achieved_rate_hz"] == "99.8"
    assert watch.temperatures[JOINT_NAMES.index("shoulder_lift")] == 41.0 and np.isnan(watch.temperatures[0])
    assert watch.recording_waits(0.4, set(), twin=False) == []


def test_the_longest_time_without_a_joint_state_counts_from_the_motion_start_and_up_to_now() -> None:
    watch = ArmWatch(now=0.0)
    for t in (0.0, 0.01, 0.5):  # a 0.49 s hole before the motion: not this motion's
        watch.on_state(JOINT_NAMES, POSE, now=t)
    watch.mark(now=0.52)
    for t in (0.53, 0.54, 0.88, 0.89):
        watch.on_state(JOINT_NAMES, POSE, now=t)
    assert _pair(watch.longest_gap(0.89)) == pytest.approx((0.34, 0.02))
    assert _pair(watch.longest_gap(1.4)) == pytest.approx((0.51, 0.37))  # still open
    watch.mark(now=2.0)  # the hole still open at the next motion's start counts from that start
    watch.on_state(JOINT_NAMES, POSE, now=2.05)
    assert _pair(watch.longest_gap(2.05)) == pytest.approx((0.05, 0.0))


def test_the_longest_gap_says_how_far_apart_the_servos_sampled_the_states_around_it() -> None:
    watch = ArmWatch(now=0.0)
    for arrived, sampled in ((0.01, 0.0), (0.02, 0.01), (0.30, 0.02), (0.31, 0.30), (0.32, 0.31)):
        watch.on_state(JOINT_NAMES, POSE, now=arrived, sampled=sampled)
    assert _triple(watch.longest_gap(0.32)) == pytest.approx((0.28, 0.02, 0.01))
    watch.on_state(JOINT_NAMES, POSE, now=0.8, sampled=0.79)  # none sampled in between: the driver's own gap
    assert _triple(watch.longest_gap(0.8)) == pytest.approx((0.48, 0.32, 0.48))


def _triple(gap: StateGap) -> tuple[float, float, float | None]:
    return gap.seconds, gap.at_s, gap.sampled_s


def _pair(gap: StateGap) -> tuple[float, float]:
    return gap.seconds, gap.at_s


def test_a_new_motion_s_driver_counts_start_from_its_last_report_before_it() -> None:
    watch = ArmWatch(now=0.0)
    watch.on_diagnostics([({"configured_rate_hz": "100", "missed_cycles": "3"}, "bus ok")], now=0.5)
    watch.on_diagnostics([({"configured_rate_hz": "100", "missed_cycles": "4"}, "bus ok")], now=1.5)
    watch.mark(now=1.6)
    assert watch.bus_before == {"configured_rate_hz": "100", "missed_cycles": "4"} and watch.bus_entries == []
    watch.mark(now=1.7)  # no report in between: still the last one before
    assert watch.bus_before == {"configured_rate_hz": "100", "missed_cycles": "4"}


def test_waiting_for_the_arm_s_first_state_gives_the_driver_s_word_on_its_bus() -> None:
    """run-motion on a port that is not there waited 60 s and said only 'waiting for the first joint state'."""
    watch = ArmWatch(now=0.0)
    watch.on_command(JOINT_NAMES, POSE)
    failing = "port failing: could not open port /dev/ttyNOPE (waiting for the port, retry every <= 1 s)"
    watch.on_diagnostics([({"configured_rate_hz": "100", "port": "/dev/ttyNOPE"}, failing)], now=0.5)
    assert watch.recording_waits(0.5, set(), twin=False) == [f"the first joint state (the driver: {failing})"]
    watch.on_diagnostics([({"configured_rate_hz": "100", "port": "/dev/ttyACM0"}, "all servos answering")], now=1.5)
    watch.on_state(JOINT_NAMES, POSE, now=1.5)
    assert "the driver" not in " ".join(watch.recording_waits(1.5, set(), twin=False))
