"""so101_common.schema: one-line errors that name the file and the key, for YAML, JSON and records."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import Field

from so101_common.schema import Number, SchemaError, StrictModel, load_json, load_yaml, read_yaml, validate


class Joint(StrictModel):
    backlash: float = Field(0.0, ge=0.0, le=0.5)


class Profile(StrictModel):
    name: str
    rate_hz: float = Field(50.0, gt=0)
    joints: dict[str, Joint] = {}


def test_valid_yaml_is_parsed_and_frozen(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("name: arm\njoints:\n  elbow_flex: {backlash: 0.01}\n")
    profile = load_yaml(path, Profile)
    assert profile.joints["elbow_flex"].backlash == 0.01
    with pytest.raises(ValueError):
        profile.name = "other"  # type: ignore[misc]


def test_out_of_range_value_names_file_and_nested_key(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("name: arm\njoints:\n  elbow_flex: {backlash: 0.7}\n")
    with pytest.raises(SchemaError) as err:
        load_yaml(path, Profile)
    assert str(err.value).startswith(f"{path}: joints.elbow_flex.backlash: ")
    assert "0.7" in str(err.value) and "\n" not in str(err.value)


def test_unknown_key_suggests_the_close_one(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("name: arm\njoints:\n  elbow_flex: {backlsh: 0.1}\n")
    with pytest.raises(SchemaError, match=r"joints\.elbow_flex\.backlsh: unknown key \(did you mean 'backlash'\?\)"):
        load_yaml(path, Profile)


def test_yaml_syntax_error_is_one_line_with_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: arm\njoints: [1, 2\n")
    with pytest.raises(SchemaError) as err:
        read_yaml(path)
    message = str(err.value)
    assert message.startswith(f"{path}:3:1: YAML syntax error") and "\n" not in message


def test_json_syntax_error_and_missing_field(tmp_path: Path) -> None:
    broken, partial = tmp_path / "broken.json", tmp_path / "partial.json"
    broken.write_text('{"name": "arm",}')
    partial.write_text('{"rate_hz": 30}')
    with pytest.raises(SchemaError, match=r"broken\.json:1:16: JSON syntax error"):
        load_json(broken, Profile)
    with pytest.raises(SchemaError, match=r"partial\.json: name: Field required$"):
        load_json(partial, Profile)


def test_nan_is_rejected_and_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match=r"^record: rate_hz: "):
        validate(Profile, {"name": "arm", "rate_hz": float("nan")}, "record")
    with pytest.raises(SchemaError, match=r"nope\.yaml: no such file"):
        load_yaml(tmp_path / "nope.yaml", Profile)


class Gain(StrictModel):
    kp: Number = 1.0


@pytest.mark.parametrize("value", [True, "3", None])
def test_a_number_is_not_a_bool_or_text(value: object) -> None:
    with pytest.raises(SchemaError, match=r"^gain.yaml: kp: "):
        validate(Gain, {"kp": value}, "gain.yaml")
    assert validate(Gain, {"kp": 2}, "gain.yaml").kp == 2.0


@pytest.mark.parametrize(("text", "value"), [("5e-1", 0.5), ("1e3", 1000.0), ("+2E+02", 200.0), (".5e1", 5.0),
                                             ("0.5", 0.5), ("3", 3)])
def test_exponent_floats_are_numbers_as_in_yaml_1_2(tmp_path: Path, text: str, value: float) -> None:
    # PyYAML's YAML 1.1 resolver reads 5e-1 (no dot) as the string "5e-1"
    path = tmp_path / "p.yaml"
    path.write_text(f"name: arm\nrate_hz: {text}\n")
    data = read_yaml(path)
    assert data["rate_hz"] == value and type(data["rate_hz"]) is type(value)
    assert load_yaml(path, Profile).rate_hz == value
