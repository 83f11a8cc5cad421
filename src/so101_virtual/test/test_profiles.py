"""Gap profiles: the shipped ones load, the schema is enforced with errors that name the key, per-joint
overrides and ``base`` inheritance work, and the schema tables (the README's generated block) list every key."""

from __future__ import annotations

from pathlib import Path

import pytest

from so101_common.joints import JOINT_NAMES
from so101_virtual.profiles import (
    GapProfile,
    JointParams,
    ProfileError,
    available_profiles,
    load_profile,
    profile_from_dict,
    profiles_dir,
    schema_markdown,
    schema_rows,
    write_profile,
)

SHIPPED = ("default", "ideal", "worn", "heavy_payload", "laggy_bus", "slow_bus", "weak_gains", "unfitted")


def write(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_profiles_load(name):
    profile = load_profile(name)
    assert profile.name == name
    assert profile.description
    assert len(profile.joint_params) == len(JOINT_NAMES)


def test_shipped_list_and_config_symlink():
    assert set(SHIPPED) <= set(available_profiles())
    config = Path(__file__).resolve().parents[3] / "config" / "gap_profiles"
    assert config.is_symlink() and config.resolve() == profiles_dir().resolve()


def test_profiles_differ_where_they_should():
    default, ideal, worn = load_profile("default"), load_profile("ideal"), load_profile("worn")
    heavy, laggy = load_profile("heavy_payload"), load_profile("laggy_bus")
    assert all(j.backlash == 0 for j in ideal.joint_params) and ideal.bus.latency == 0 and ideal.bus.jitter == 0
    assert all(j.position_noise == 0 for j in ideal.joint_params)
    assert all(0 <= j.backlash < 0.1 for j in default.joint_params)
    assert all(w.backlash > 2 * d.backlash for w, d in zip(worn.joint_params, default.joint_params, strict=True))
    assert all(w.coulomb_friction > 2 * d.coulomb_friction for w, d in zip(worn.joint_params, default.joint_params, strict=True))
    assert heavy.physics.payload_mass > 0.1 and default.physics.payload_mass == 0
    assert laggy.bus.latency > 10 * default.bus.latency
    # derived profiles keep the rest of their base
    assert heavy.firmware == default.firmware and laggy.joint_params == default.joint_params


def test_unfitted_motor_matches_sts3215_at_12v():
    joint = load_profile("unfitted").joint("shoulder_lift")  # the datasheet motor default.yaml is fitted from
    assert joint.stall_torque == pytest.approx(2.94, rel=0.05)
    assert joint.no_load_speed == pytest.approx(2 * 3.14159 / 6 / 0.222, rel=0.05)  # 0.222 s/60°
    assert load_profile("default").physics.supply_voltage == pytest.approx(12.0)


def test_name_or_path(tmp_path):
    path = write(tmp_path, "description: mine\nphysics: {payload_mass: 0.2}\n", "mine.yaml")
    profile = load_profile(path)
    assert profile.name == "mine" and profile.physics.payload_mass == 0.2
    assert load_profile(str(path)).physics.payload_mass == 0.2
    assert load_profile(profile) is profile


def test_unknown_profile_name_lists_shipped():
    with pytest.raises(ProfileError, match=r"unknown gap profile 'defualt'.*did you mean 'default'.*shipped"):
        load_profile("defualt")
    with pytest.raises(ProfileError, match="does not exist"):
        load_profile("/nonexistent/x.yaml")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("physcs: {}\n", r": physcs: unknown key \(did you mean 'physics'\?\)"),
        ("physics: {gravity: 1}\n", r": physics.gravity: unknown key"),
        ("joint_defaults: {backlash_rad: 0.01}\n", r": joint_defaults.backlash_rad: unknown key \(did you mean 'backlash'\?\)"),
        ("joints: {elbow: {backlash: 0.01}}\n", r": joints: unknown joint 'elbow' \(did you mean 'elbow_flex'\?\)"),
        ("joints: {elbow_flex: {frictoin: 0.01}}\n", r": joints.elbow_flex.frictoin: unknown key"),
        ("joint_defaults: {backlash: -0.01}\n", r": joint_defaults.backlash: .*greater than or equal to 0 \(got -0.01\)"),
        ("joints: {gripper: {armature: 0}}\n", r": joints.gripper.armature: .*greater than or equal to 0.0001"),
        ("physics: {timestep: 0.1}\n", r": physics.timestep: .*less than or equal to 0.005"),
        ("firmware: {p_gain: fast}\n", r": firmware.p_gain: Input should be a valid number.*got 'fast'"),
        ("firmware: {p_gain: .nan}\n", r": firmware.p_gain: Input should be a finite number"),
        ("bus: {byte_time: 1}\n", r": bus.byte_time: Input should be a valid boolean"),
        ("physics: {payload_mass: true}\n", r": physics.payload_mass: Input should be a valid number.*got True"),
        ("physics: {payload_offset: [0, 0]}\n", r": physics.payload_offset: .*at least 3 items"),
        ("physics: {payload_offset: [0, 0, 1]}\n", r": physics.payload_offset.2: .*less than or equal to 0.3"),
        ("joint_defaults: {no_load_current: 3.0}\n", r": joint_defaults.no_load_current: 3 A must be below stall_current"),
        ("joints: {elbow_flex: {no_load_current: 3.0}}\n",
         r": joints: elbow_flex.no_load_current: 3 A must be below stall_current"),
        ("firmware: {loop_rate: 300}\n", r": firmware: loop_rate 300 Hz: its period must be a whole number of physics.timestep"),
        ("seed: 1.5\n", r": seed: Input should be a valid integer"),
        ("name: [a]\n", r": name: Input should be a valid string"),
        ("- a\n- b\n", r": expected a mapping of keys at the top level"),
        ("physics: [1, 2]\n", r": physics: Input should be a valid dictionary"),
        ("base: nope\n", r": base: unknown gap profile 'nope'"),
        ("base: 3\n", r": base: expected a profile name or path"),
    ],
)
def test_errors_name_the_key(tmp_path, text, match):
    path = write(tmp_path, text)
    with pytest.raises(ProfileError, match=match) as info:
        load_profile(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message


def test_yaml_syntax_error_is_one_line_with_position(tmp_path):
    path = write(tmp_path, "name: x\nphysics: {timestep: 0.001\n")
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert str(info.value).startswith(f"{path}:3:1: YAML syntax error") and "\n" not in str(info.value)


@pytest.mark.parametrize("name", SHIPPED)
def test_written_profile_loads_back_equal(tmp_path, name):
    profile = load_profile(name)
    path = write_profile(tmp_path / f"{name}.yaml", profile, header="line one\n\nline three")
    again = load_profile(path)
    assert again.joint_params == profile.joint_params
    assert (again.physics, again.firmware, again.bus, again.name) == (profile.physics, profile.firmware, profile.bus, name)
    assert path.read_text().startswith("# line one\n#\n# line three\n")


def test_per_joint_overrides_merge_over_defaults():
    profile = profile_from_dict({
        "joint_defaults": {"backlash": 0.01, "coulomb_friction": 0.05},
        "joints": {"shoulder_lift": {"backlash": 0.04}, "gripper": {"stall_torque": 1.5}},
    })
    assert profile.joint("shoulder_lift").backlash == 0.04
    assert profile.joint("shoulder_lift").coulomb_friction == 0.05
    assert profile.joint("elbow_flex").backlash == 0.01
    assert profile.joint("gripper").stall_torque == 1.5
    assert profile.joint_params[JOINT_NAMES.index("gripper")].stall_torque == 1.5
    with pytest.raises(ProfileError, match="unknown joint"):
        profile.joint("elbow")


def test_base_inheritance_and_loops(tmp_path):
    write(tmp_path, "base: worn\njoints: {wrist_roll: {backlash: 0.2}}\nbus: {latency: 0.003}\n", "child.yaml")
    child = load_profile(tmp_path / "child.yaml")
    worn = load_profile("worn")
    assert child.joint("wrist_roll").backlash == 0.2
    assert child.joint("shoulder_lift") == worn.joint("shoulder_lift")  # the base's overrides survive
    assert child.bus.latency == 0.003 and child.bus.jitter == worn.bus.jitter
    assert child.name == "child"
    write(tmp_path, "base: b.yaml\n", "a.yaml")
    write(tmp_path, "base: a.yaml\n", "b.yaml")
    with pytest.raises(ProfileError, match="loops back"):
        load_profile(tmp_path / "a.yaml")


def test_exponent_notation_is_a_number(tmp_path):
    # YAML 1.1 (PyYAML's resolver) reads 5e-1 as text; the profile loader reads it as YAML 1.2 does
    profile = load_profile(write(tmp_path, "joints: {wrist_roll: {backlash: 5e-3}}\nbus: {latency: 2e-3}\n"))
    assert profile.joint("wrist_roll").backlash == 0.005
    assert profile.bus.latency == 0.002


def test_a_full_disk_leaves_no_half_written_profile(tmp_path, monkeypatch):
    import errno

    real_write_text = Path.write_text

    def half_then_full(self, data, *args, **kwargs):
        real_write_text(self, data[: len(data) // 2], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", half_then_full)
    with pytest.raises(OSError, match="No space left"):
        write_profile(tmp_path / "fitted.yaml", load_profile("worn"), "fitted")
    assert list(tmp_path.iterdir()) == []  # main: half a profile at fitted.yaml


def test_empty_file_is_the_built_in_defaults(tmp_path):
    profile = load_profile(write(tmp_path, ""))
    assert profile.joint_defaults == JointParams()
    assert profile.firmware == GapProfile().firmware


def test_derived_motor_constants():
    joint = JointParams(stall_torque=3.0, stall_current=3.0, rated_voltage=12.0, no_load_speed=5.0, no_load_current=0.0)
    assert joint.winding_resistance == pytest.approx(4.0)
    assert joint.torque_constant == pytest.approx(1.0)
    assert joint.back_emf_constant == pytest.approx(2.4)
    assert joint.emf_damping == pytest.approx(0.6)  # stall torque / no-load speed


def test_schema_tables_list_every_key():
    # the README shows these tables between generated markers (test/test_docs.py keeps it current)
    text = schema_markdown()
    for key, *_ in schema_rows():
        section, leaf = key.rsplit(".", 1)
        assert f"**{section}**" in text and f"| `{leaf}` |" in text, f"the schema tables lack the profile key {key}"
