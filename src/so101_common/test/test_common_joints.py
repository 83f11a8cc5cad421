"""The joint specification: names, ids, limits and the unit mappings at the LeRobot/SAGE boundaries."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from so101_common import joints
from so101_common.joints import (
    ARM_JOINT_NAMES,
    GRIPPER,
    JOINT_NAMES,
    JOINTS,
    SAGE_JOINT_NAMES,
    JointSpec,
    JointSpecError,
)

finite = st.floats(min_value=-10.0, max_value=10.0, allow_nan=False)


def test_names_ids_and_order() -> None:
    assert JOINT_NAMES == ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
    assert ARM_JOINT_NAMES == JOINT_NAMES[:5]
    assert SAGE_JOINT_NAMES == ("Rotation", "Pitch", "Elbow", "Wrist_Pitch", "Wrist_Roll", "Jaw")
    assert [j.servo_id for j in JOINTS] == [1, 2, 3, 4, 5, 6]
    assert GRIPPER.name == "gripper" and GRIPPER.is_gripper
    assert sum(j.is_gripper for j in JOINTS) == 1


def test_limits_are_the_new_calib_figures() -> None:
    # so101_new_calib: zero at mid-range, symmetric except wrist_roll and the gripper.
    for j in JOINTS[:4]:
        assert j.lower == -j.upper
    assert (joints.joint("wrist_roll").lower, joints.joint("wrist_roll").upper) == (-2.74385, 2.84121)
    assert (GRIPPER.lower, GRIPPER.upper) == (-0.174533, 1.74533)
    assert joints.joint("elbow_flex").span == pytest.approx(3.38)


def test_physical_figures() -> None:
    for j in JOINTS:
        assert j.max_velocity == pytest.approx(math.radians(60) / 0.222)
        assert j.max_effort == pytest.approx(2.94)


def test_lookup_by_name_and_id() -> None:
    assert joints.joint("elbow_flex").servo_id == 3
    assert joints.joint_by_id(5).name == "wrist_roll"
    with pytest.raises(JointSpecError, match="unknown joint 'elbow'"):
        joints.joint("elbow")
    with pytest.raises(JointSpecError, match="servo id 7"):
        joints.joint_by_id(7)


def test_spec_validates_itself() -> None:
    with pytest.raises(JointSpecError, match="lower limit"):
        JointSpec("x", 1, 1.0, 1.0, 1.0, 1.0, "X", "x")
    with pytest.raises(JointSpecError, match="servo id 254"):
        JointSpec("x", 254, -1.0, 1.0, 1.0, 1.0, "X", "x")
    assert issubclass(JointSpecError, ValueError)


def test_clip_with_margin() -> None:
    j = joints.joint("shoulder_pan")
    assert j.clip(5.0) == j.upper
    assert j.clip(-5.0, margin=0.1) == pytest.approx(j.lower + 0.1)
    assert j.clip(0.3, margin=0.1) == 0.3


def test_gripper_mapping_end_points() -> None:
    assert joints.gripper_percent_to_rad(0.0) == pytest.approx(GRIPPER.lower)
    assert joints.gripper_percent_to_rad(100.0) == pytest.approx(GRIPPER.upper)
    assert joints.gripper_rad_to_percent(GRIPPER.lower) == pytest.approx(0.0)
    assert joints.gripper_rad_to_fraction(GRIPPER.upper) == pytest.approx(1.0)
    assert joints.gripper_fraction_to_rad(0.5) == pytest.approx((GRIPPER.lower + GRIPPER.upper) / 2)


@given(st.floats(min_value=-50.0, max_value=150.0))
def test_gripper_percent_round_trip(percent: float) -> None:
    assert joints.gripper_rad_to_percent(joints.gripper_percent_to_rad(percent)) == pytest.approx(percent, abs=1e-9)


@given(finite)
def test_gripper_fraction_round_trip(rad: float) -> None:
    assert joints.gripper_fraction_to_rad(joints.gripper_rad_to_fraction(rad)) == pytest.approx(rad, abs=1e-12)


@given(st.lists(finite, min_size=6, max_size=6))
def test_sage_round_trip(row: list[float]) -> None:
    rad = joints.sage_to_rad(row)
    assert rad[:5] == row[:5]
    assert rad[5] == pytest.approx(joints.gripper_fraction_to_rad(row[5]))
    assert joints.rad_to_sage(rad) == pytest.approx(row, abs=1e-9)


@pytest.mark.parametrize("length", [0, 5, 7])
def test_sage_rows_must_have_six_values(length: int) -> None:
    with pytest.raises(JointSpecError, match=f"expected 6 joint values, got {length}"):
        joints.sage_to_rad([0.0] * length)
    with pytest.raises(JointSpecError, match="expected 6"):
        joints.rad_to_sage([0.0] * length)


def test_reorder() -> None:
    names = list(reversed(JOINT_NAMES))
    values = [float(i) for i in range(6)]
    assert joints.reorder(names, values) == list(reversed(values))
    # Extra joints are ignored; a custom target order is honoured.
    assert joints.reorder([*names, "camera_pan"], [*values, 9.0], target=("gripper", "elbow_flex")) == [0.0, 3.0]
    assert all(isinstance(v, float) for v in joints.reorder(JOINT_NAMES, list(range(6))))


def test_reorder_names_missing_joints() -> None:
    with pytest.raises(JointSpecError, match=r"missing joints \['gripper'\]"):
        joints.reorder(JOINT_NAMES[:5], [0.0] * 5)
