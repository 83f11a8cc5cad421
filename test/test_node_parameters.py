"""Every node parameter has one default (its parameter dataclass), a description and, for numbers, a range;
the YAML files under config/ keep the ``/**: ros__parameters:`` layout with a comment per parameter and
only set parameters the node declares, within their ranges."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import rclpy
import yaml
from rcl_interfaces.msg import ParameterType
from rclpy.context import Context

from so101_bringup.motions import MotionPlayerParameters
from so101_common.parameters import ParameterSpec, parameter_specs
from so101_driver.parameters import ArmParameters, FollowerParameters
from so101_policy.parameters import PolicyParameters
from so101_recorder.parameters import RecorderParameters
from so101_ros.node_params import descriptor

ROOT = Path(__file__).resolve().parents[1]
DATACLASSES = [FollowerParameters, ArmParameters, RecorderParameters, PolicyParameters, MotionPlayerParameters]
YAML_FILES = {"driver.yaml": FollowerParameters, "leader.yaml": ArmParameters, "recorder.yaml": RecorderParameters,
              "policy.yaml": PolicyParameters}


def _numbers(cls: type) -> list[ParameterSpec]:
    return [s for s in parameter_specs(cls) if type(s.default) in (int, float)]


@pytest.mark.parametrize("cls", DATACLASSES, ids=lambda c: c.__name__)
def test_every_parameter_is_described_and_every_number_bounded(cls: type) -> None:
    for spec in parameter_specs(cls):
        d = descriptor(spec)
        assert len(d.description) > 10, spec.name
        if type(spec.default) is float:
            assert d.floating_point_range and d.floating_point_range[0].from_value <= spec.default \
                <= d.floating_point_range[0].to_value, spec.name
        elif type(spec.default) is int:
            assert d.type == ParameterType.PARAMETER_INTEGER and d.integer_range, spec.name
            assert d.integer_range[0].from_value <= spec.default <= d.integer_range[0].to_value, spec.name


@pytest.mark.parametrize("name", sorted(YAML_FILES))
def test_yaml_sets_declared_parameters_in_range_with_a_comment_each(name: str) -> None:
    text = (ROOT / "config" / name).read_text()
    values = yaml.safe_load(text)["/**"]["ros__parameters"]
    specs = {s.name: s for s in parameter_specs(YAML_FILES[name])}
    assert set(values) <= set(specs), f"{name}: not parameters of the node: {sorted(set(values) - set(specs))}"
    for key, value in values.items():
        spec = specs[key]
        if spec.low is not None:
            assert spec.low <= value <= spec.high, f"{name}: {key}={value} outside [{spec.low}, {spec.high}]"
        line = next(i for i, line in enumerate(text.splitlines()) if re.match(rf"\s+{key}:", line))
        lines = text.splitlines()
        assert "#" in lines[line] or lines[line - 1].strip().startswith("#"), f"{name}: {key} has no comment"


@pytest.fixture
def context() -> Iterator[Context]:
    context = Context()
    rclpy.init(context=context)
    yield context
    rclpy.shutdown(context=context)


def test_a_running_node_describes_its_parameters(context: Context, tmp_path: Path) -> None:
    from rclpy.parameter import Parameter

    from so101_recorder.recorder_node import RecorderNode

    node = RecorderNode(context=context, parameter_overrides=[Parameter("bag_root", value=str(tmp_path))])
    try:
        described = {d.name: d for d in node.describe_parameters([s.name for s in parameter_specs(RecorderParameters)])}
        assert described["flush_period_s"].floating_point_range[0].from_value == pytest.approx(0.01)
        assert "crash safety" in described["flush_period_s"].description
        assert described["qos_depth"].integer_range[0].to_value == 100000
        result = node.set_parameters([Parameter("qos_depth", value=0)])[0]  # below the range: refused by ROS
        assert not result.successful
    finally:
        node.destroy_node()
