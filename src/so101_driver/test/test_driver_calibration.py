"""LeRobot calibration files and the step ↔ radian mapping."""

from __future__ import annotations

import dataclasses
import io
import json
import math
from pathlib import Path

import draccus
import numpy as np
import pytest
from lerobot.motors.motors_bus import MotorCalibration as LeRobotCalibration

from so101_common.joints import GRIPPER, JOINT_NAMES, gripper_percent_to_rad, joint
from so101_feetech.calibration import (
    CalibrationError,
    JointMapping,
    MotorCalibration,
    calibration_to_json,
    default_calibration_path,
    load_calibration,
    load_to_effort,
    rad_to_raw,
    rad_velocity_to_raw,
    raw_to_rad,
    raw_velocity_to_rad,
    resolve_calibration_path,
    save_calibration,
)

FIXTURE = Path(__file__).parent / "fixtures" / "so_follower_my_arm.json"


@pytest.fixture
def cals() -> dict[str, MotorCalibration]:
    return load_calibration(FIXTURE)


def test_file_round_trip_is_byte_identical(cals, tmp_path):
    out = save_calibration(tmp_path / "deep" / "arm.json", cals)
    assert out.read_bytes() == FIXTURE.read_bytes()
    assert load_calibration(out) == cals


def test_written_text_matches_lerobot_draccus(cals):
    theirs = {n: LeRobotCalibration(**dataclasses.asdict(c)) for n, c in cals.items()}
    buffer = io.StringIO()
    with draccus.config_type("json"):
        draccus.dump(theirs, buffer, indent=4)  # type: ignore[type-var]  # draccus encodes a dict of dataclasses too
    assert calibration_to_json(cals) == buffer.getvalue()


def test_loaded_values(cals):
    assert list(cals) == list(JOINT_NAMES)
    assert cals["shoulder_pan"] == MotorCalibration(id=1, drive_mode=0, homing_offset=-1494, range_min=758, range_max=3292)
    assert cals["wrist_roll"].range_min == 0 and cals["wrist_roll"].range_max == 4095


@pytest.mark.parametrize("name", JOINT_NAMES)
def test_raw_rad_raw_identity(cals, name):
    cal = cals[name]
    for raw in range(cal.range_min, cal.range_max + 1, 37):
        assert abs(rad_to_raw(name, raw_to_rad(name, raw, cal), cal) - raw) <= 1


@pytest.mark.parametrize("name", [n for n in JOINT_NAMES if n != "gripper"])
def test_mid_range_is_zero_and_scale_is_lerobot_degrees(cals, name):
    cal = cals[name]
    assert raw_to_rad(name, cal.mid, cal) == pytest.approx(0.0)
    # LeRobot degrees: (raw - mid) * 360 / 4095
    raw = cal.range_min + 100
    assert math.degrees(raw_to_rad(name, raw, cal)) == pytest.approx((raw - cal.mid) * 360 / 4095)


@pytest.mark.parametrize("name", JOINT_NAMES)
def test_drive_mode_flips_sign(cals, name):
    cal = cals[name]
    flipped = dataclasses.replace(cal, drive_mode=1)
    raw = cal.range_min + (cal.range_max - cal.range_min) // 3
    if joint(name).is_gripper:
        # reversed direction: range_min ↔ upper limit
        assert raw_to_rad(name, cal.range_min, flipped) == pytest.approx(GRIPPER.upper)
        assert raw_to_rad(name, cal.range_max, flipped) == pytest.approx(GRIPPER.lower)
        assert raw_velocity_to_rad(name, 10, flipped) == pytest.approx(-raw_velocity_to_rad(name, 10, cal))
    else:
        assert raw_to_rad(name, raw, flipped) == pytest.approx(-raw_to_rad(name, raw, cal))
        assert abs(rad_to_raw(name, raw_to_rad(name, raw, flipped), flipped) - raw) <= 1
    assert load_to_effort(name, 300, flipped) == pytest.approx(-load_to_effort(name, 300, cal))


def test_gripper_percent_limits(cals):
    cal = cals["gripper"]
    assert raw_to_rad("gripper", cal.range_min, cal) == pytest.approx(GRIPPER.lower)
    assert raw_to_rad("gripper", cal.range_max, cal) == pytest.approx(GRIPPER.upper)
    assert rad_to_raw("gripper", gripper_percent_to_rad(0.0), cal) == cal.range_min
    assert rad_to_raw("gripper", gripper_percent_to_rad(100.0), cal) == cal.range_max
    # LeRobot RANGE_0_100: 50 % sits in the middle of the calibrated range
    assert abs(rad_to_raw("gripper", gripper_percent_to_rad(50.0), cal) - cal.mid) <= 1


def test_velocity_and_effort(cals):
    cal = cals["elbow_flex"]
    assert raw_velocity_to_rad("elbow_flex", 4095, cal) == pytest.approx(2 * math.pi)
    assert rad_velocity_to_raw("elbow_flex", 2 * math.pi, cal) == 4095
    assert load_to_effort("elbow_flex", 1000, cal) == pytest.approx(joint("elbow_flex").max_effort)
    assert load_to_effort("elbow_flex", -500, cal) == pytest.approx(-joint("elbow_flex").max_effort / 2)


def test_vectorised_mapping_matches_scalar(cals):
    mapping = JointMapping.from_calibration(cals)
    raws = np.array([cals[n].range_min + 123 for n in JOINT_NAMES])
    expected = [raw_to_rad(n, r, cals[n]) for n, r in zip(JOINT_NAMES, raws, strict=True)]
    np.testing.assert_allclose(mapping.to_rad(raws), expected)
    np.testing.assert_array_equal(mapping.to_raw(mapping.to_rad(raws)), raws)
    assert list(mapping.ids) == [1, 2, 3, 4, 5, 6]
    clamped = mapping.clamp_raw(np.array([0, 4095, 2000, 5000, -3, 0]))
    assert list(clamped) == [758, 3198, 2000, 3221, 0, 2029]
    lower, upper = mapping.limits_rad()
    assert np.all(lower < upper)
    assert lower[-1] == pytest.approx(GRIPPER.lower) and upper[-1] == pytest.approx(GRIPPER.upper)


def test_mapping_rejects_duplicate_ids(cals):
    cals = dict(cals, gripper=dataclasses.replace(cals["gripper"], id=1))
    with pytest.raises(CalibrationError, match="not unique"):
        JointMapping.from_calibration(cals)


# --- errors ----------------------------------------------------------------------------------------


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "cal.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_missing_file(tmp_path):
    with pytest.raises(CalibrationError, match="does not exist"):
        load_calibration(tmp_path / "nope.json")


def test_bad_json(tmp_path):
    with pytest.raises(CalibrationError, match="not valid JSON"):
        load_calibration(_write(tmp_path, "{ not json"))


def test_not_an_object(tmp_path):
    with pytest.raises(CalibrationError, match="expected an object"):
        load_calibration(_write(tmp_path, [1, 2]))


def test_missing_motor(tmp_path):
    data = json.loads(FIXTURE.read_text())
    del data["wrist_flex"]
    with pytest.raises(CalibrationError, match=r"missing motors \['wrist_flex'\]"):
        load_calibration(_write(tmp_path, data))


def test_unknown_motor(tmp_path):
    data = json.loads(FIXTURE.read_text())
    data["elbow"] = data["elbow_flex"]
    with pytest.raises(CalibrationError, match="unknown motors"):
        load_calibration(_write(tmp_path, data))


def test_missing_field_names_motor_and_field(tmp_path):
    data = json.loads(FIXTURE.read_text())
    del data["gripper"]["range_max"]
    with pytest.raises(CalibrationError, match=r"motor 'gripper': missing fields \['range_max'\]"):
        load_calibration(_write(tmp_path, data))


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [("range_min", 4000, "need 0 <= min < max"), ("drive_mode", 2, "drive_mode"), ("homing_offset", 3000, "homing_offset"),
     ("id", "1", "integer")],
)
def test_bad_values(tmp_path, field, value, match):
    data = json.loads(FIXTURE.read_text())
    data["shoulder_pan"][field] = value
    with pytest.raises(CalibrationError, match=match):
        load_calibration(_write(tmp_path, data))


# --- default paths ---------------------------------------------------------------------------------


def test_default_path_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_LEROBOT_CALIBRATION", str(tmp_path))
    assert default_calibration_path("my_arm") == tmp_path / "robots" / "so_follower" / "my_arm.json"
    assert default_calibration_path("lead", role="leader") == tmp_path / "teleoperators" / "so_leader" / "lead.json"


def test_default_path_falls_back_to_older_layout(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_LEROBOT_CALIBRATION", str(tmp_path))
    legacy = tmp_path / "robots" / "so101_follower" / "my_arm.json"
    legacy.parent.mkdir(parents=True)
    legacy.write_text(FIXTURE.read_text())
    assert default_calibration_path("my_arm") == legacy
    current = tmp_path / "robots" / "so_follower" / "my_arm.json"
    current.parent.mkdir(parents=True)
    current.write_text(FIXTURE.read_text())
    assert default_calibration_path("my_arm") == current
    legacy_leader = tmp_path / "teleoperators" / "so101_leader" / "l.json"
    legacy_leader.parent.mkdir(parents=True)
    legacy_leader.write_text("{}")
    assert default_calibration_path("l", role="leader") == legacy_leader


def test_default_path_without_env(monkeypatch, tmp_path):
    for var in ("HF_LEROBOT_CALIBRATION", "HF_LEROBOT_HOME", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    expected = tmp_path / ".cache" / "huggingface" / "lerobot" / "calibration" / "robots" / "so_follower" / "x.json"
    assert default_calibration_path("x") == expected
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert default_calibration_path("x").is_relative_to(tmp_path / "hf" / "lerobot" / "calibration")


def test_default_path_rejects_bad_role_and_id():
    with pytest.raises(CalibrationError, match="role"):
        default_calibration_path("x", role="boss")
    with pytest.raises(CalibrationError, match="invalid robot id"):
        default_calibration_path("../etc")


def test_resolve_calibration_path(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_LEROBOT_CALIBRATION", str(tmp_path))
    assert resolve_calibration_path(str(FIXTURE), "ignored") == FIXTURE
    with pytest.raises(CalibrationError, match=r"no LeRobot calibration for robot_id 'arm' at .*so_leader/arm.json"
                                               r".*so101 calibrate --port /dev/ttyX --robot-id arm --role leader"):
        resolve_calibration_path("", "arm", "leader", "/dev/ttyX")
    path = save_calibration(tmp_path / "robots" / "so_follower" / "arm.json", load_calibration(FIXTURE))
    assert resolve_calibration_path("", "arm") == path
