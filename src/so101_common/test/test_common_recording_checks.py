"""so101_common.recording_checks: times that jump and values that cannot be radians, one line saying where."""

from __future__ import annotations

import math

import numpy as np
import pytest

from so101_common.joints import JOINT_NAMES, JOINTS
from so101_common.recording_checks import MAX_GAP_S, RecordingCheckError, check_positions, check_recording, check_times


def test_a_jump_is_located_and_refused() -> None:
    time = np.arange(100) * 0.02
    time[40:] += 1e6  # SAGE's µs stamps + 1e12
    with pytest.raises(RecordingCheckError) as err:
        check_times(time, "run/control.csv", first_line=2)
    assert str(err.value).startswith("run/control.csv: time jumps by 1e+06 s from line 41 to line 42 (0.78 → 1e+06 s;")
    check_times(time[:40], "x")  # the part before the jump is fine
    check_times(np.array([0.0, MAX_GAP_S]), "x")  # a pause up to the limit is allowed


def test_time_going_back_non_finite_and_too_long_are_refused() -> None:
    with pytest.raises(RecordingCheckError, match=r"^bag: time goes back by 0\.5 s from sample 1 to sample 2"):
        check_times([0.0, 1.0, 0.5], "bag")
    with pytest.raises(RecordingCheckError, match=r"^x: sample 1: timestamp nan is not a number"):
        check_times([0.0, math.nan], "x")
    with pytest.raises(RecordingCheckError, match=r"spans 7200 s, more than 3600 s"):
        check_times(np.arange(0.0, 7200.5, 30.0), "x")


def test_degrees_are_refused_with_a_hint() -> None:
    position = np.zeros((10, 6))
    position[3, 0] = 33.0  # shoulder_pan in degrees: 0.576 rad
    with pytest.raises(RecordingCheckError) as err:
        check_positions(position, "m.txt", first_line=2)
    message = str(err.value)
    assert message.startswith("m.txt: line 5: shoulder_pan = 33, which cannot be radians for this joint")
    assert "degrees" in message and "\n" not in message


def test_absurd_and_missing_values_are_refused() -> None:
    position = np.zeros((5, 6))
    position[0] = 1e308
    with pytest.raises(RecordingCheckError, match=r"^m: line 2: shoulder_pan = 1e\+308, which cannot be radians .*not a joint angle"):
        check_positions(position, "m", first_line=2)
    position[0] = 0.0
    position[2, 4] = math.nan
    with pytest.raises(RecordingCheckError, match=r"^m: sample 2: wrist_roll is not a number"):
        check_positions(position, "m")
    check_positions(position, "m", allow_nan=True)  # a measured state may miss a sample


def test_the_joint_ranges_with_their_margin_pass() -> None:
    lower = np.array([[j.lower - 0.99 for j in JOINTS]])  # a calibration ~0.8 rad off the URDF's zero still loads
    upper = np.array([[j.upper + 0.99 for j in JOINTS]])
    check_recording([0.0, 0.02], np.vstack([lower, upper]), "x")
    with pytest.raises(ValueError, match="elbow_flex"):  # the reader's own error class
        check_positions(upper[:, [2]] + 0.02, "x", [JOINT_NAMES[2]], error=ValueError)
