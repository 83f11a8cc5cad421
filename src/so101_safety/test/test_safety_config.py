"""SafetyConfig: defaults, the shipped parameter file, overrides and every validation error."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from so101_common.joints import JOINT_NAMES, joint
from so101_safety.config import JointOverride, NodeOptions, SafetyConfig, load_config, load_parameters, split_parameters
from so101_safety.errors import SafetyConfigError

REPO = Path(__file__).resolve().parents[3]
SHIPPED = REPO / "config" / "safety.yaml"


def test_defaults_are_valid_and_cover_every_joint():
    config = SafetyConfig()
    assert [lim.name for lim in config.limits] == list(JOINT_NAMES)
    for lim in config.limits:
        spec = joint(lim.name)
        assert lim.lower == pytest.approx(spec.lower + config.margin)
        assert lim.upper == pytest.approx(spec.upper - config.margin)
        assert lim.max_velocity == config.max_velocity
        assert lim.max_acceleration == config.max_acceleration


def test_shipped_parameter_file_is_valid():
    config, options = load_parameters(SHIPPED)
    assert isinstance(options, NodeOptions)
    assert config.rate_hz > 0 and config.watchdog_timeout > 0
    by_name = {lim.name: lim for lim in config.limits}
    assert by_name["wrist_roll"].max_velocity == 4.0
    assert by_name["gripper"].lower == pytest.approx(joint("gripper").lower + 0.02)
    assert load_config(SHIPPED) == config


def test_per_joint_overrides_nested_and_flat_agree():
    nested = SafetyConfig.from_mapping({"max_velocity": 2.0, "joints": {"elbow_flex": {"max_velocity": 1.0}}})
    flat = SafetyConfig.from_mapping({"max_velocity": 2, "joints.elbow_flex.max_velocity": 1.0,
                                      "joints.gripper.margin": None})
    assert nested.limits == flat.limits
    assert {lim.name: lim.max_velocity for lim in flat.limits}["elbow_flex"] == 1.0
    assert {lim.name: lim.max_velocity for lim in flat.limits}["shoulder_pan"] == 2.0
    assert SafetyConfig.from_mapping(flat.to_mapping()) == flat


def test_override_objects_are_accepted():
    config = SafetyConfig(joints={"gripper": JointOverride(max_acceleration=5.0)})
    assert config.limits[-1].max_acceleration == 5.0


@pytest.mark.parametrize("values, key", [
    ({"max_velocity": 0.0}, "max_velocity"),
    ({"max_velocity": -1.0}, "max_velocity"),
    ({"max_acceleration": math.inf}, "max_acceleration"),
    ({"watchdog_timeout": math.nan}, "watchdog_timeout"),
    ({"rate_hz": 0}, "rate_hz"),
    ({"margin": -0.1}, "margin"),
    ({"margin": 2.0}, "margin"),
    ({"smoothing_cutoff_hz": -1.0}, "smoothing_cutoff_hz"),
    ({"gripper_load_limit": -0.5}, "gripper_load_limit"),
    ({"gripper_load_limit": 0.5, "gripper_load_hysteresis": 0.6}, "gripper_load_hysteresis"),
    ({"reseed_tolerance": -1.0}, "reseed_tolerance"),
    ({"max_velocity": True}, "max_velocity"),
    ({"max_velocity": "fast"}, "max_velocity"),
    ({"speed": 1.0}, "speed"),
    ({"joints.elbow.max_velocity": 1.0}, "joints.elbow"),
    ({"joints.gripper.speed": 1.0}, "joints.gripper.speed"),
    ({"joints.gripper": 1.0}, "joints.gripper"),
    ({"joints.gripper.max_velocity": -2.0}, "joints.gripper.max_velocity"),
    ({"joints.gripper.margin": 5.0}, "joints"),
    ({"joints": {"gripper": 3}}, "joints.gripper"),
    ({"joints": 5}, "joints"),
])
def test_invalid_values_are_one_line_naming_the_parameter(values, key):
    with pytest.raises(SafetyConfigError) as caught:
        SafetyConfig.from_mapping(values)
    message = str(caught.value)
    assert message.startswith(f"parameters: {key}") and "\n" not in message, message


def test_messages_say_what_is_wrong():
    with pytest.raises(SafetyConfigError, match=r"^parameters: speed: unknown key; known keys: .*max_velocity"):
        SafetyConfig.from_mapping({"speed": 1.0})
    with pytest.raises(SafetyConfigError, match=r"gripper\.margin must be below 0\.9599 rad \(half the range of gripper\)"):
        SafetyConfig.from_mapping({"joints.gripper.margin": 5.0})
    with pytest.raises(SafetyConfigError, match=r"^parameters: max_velocity: .*must be a number, not bool"):
        SafetyConfig.from_mapping({"max_velocity": True})


def test_node_options_are_validated():
    with pytest.raises(SafetyConfigError, match="^parameters: diagnostics_period: "):
        split_parameters({"diagnostics_period": 0})
    with pytest.raises(SafetyConfigError, match="^parameters: log_throttle: "):
        split_parameters({"log_throttle": -1.0})


def test_parameter_file_errors(tmp_path):
    missing = tmp_path / "none.yaml"
    with pytest.raises(SafetyConfigError, match=f"^{missing}: no such file$"):
        load_config(missing)
    bad = tmp_path / "bad.yaml"
    bad.write_text("other_node:\n  ros__parameters:\n    margin: 0.1\n")
    with pytest.raises(SafetyConfigError, match="ros__parameters"):
        load_config(bad)
    named = tmp_path / "named.yaml"
    named.write_text("safety_filter:\n  ros__parameters:\n    margin: 0.1\n    use_sim_time: true\n")
    assert load_config(named).margin == 0.1
    typo = tmp_path / "typo.yaml"
    typo.write_text("/**:\n  ros__parameters:\n    max_velocty: 1.0\n")
    with pytest.raises(SafetyConfigError, match=rf"^{typo} \[/\*\*\.ros__parameters\]: max_velocty: unknown key \(did you mean 'max_velocity'\?\)"):
        load_config(typo)
    broken = tmp_path / "broken.yaml"
    broken.write_text("/**:\n  ros__parameters:\n    margin: [0.1\n")
    with pytest.raises(SafetyConfigError, match=rf"^{broken}:\d+:\d+: YAML syntax error"):
        load_config(broken)
