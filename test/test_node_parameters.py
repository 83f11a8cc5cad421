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

from so101_apps.web_view import WebViewConfig
from so101_common.parameters import ParameterSpec, parameter_specs
from so101_driver.parameters import ArmParameters, FollowerParameters
from so101_policy.motions import MotionPlayerParameters
from so101_policy.parameters import PolicyParameters
from so101_recorder.parameters import RecorderParameters
from so101_ros.node_params import descriptor
from so101_safety.config import JointOverride, NodeOptions, SafetyConfig
from so101_sim2real.twin_parameters import TwinParameters

ROOT = Path(__file__).resolve().parents[1]
DATACLASSES = [FollowerParameters, ArmParameters, RecorderParameters, PolicyParameters, MotionPlayerParameters,
               TwinParameters, WebViewConfig]
YAML_FILES = {"driver.yaml": FollowerParameters, "leader.yaml": ArmParameters, "recorder.yaml": RecorderParameters,
              "policy.yaml": PolicyParameters}
# the safety filter's parameters come from its core's pydantic config models (overrides nested per joint)
SAFETY_SPECS = [*parameter_specs(SafetyConfig, exclude=("joints",)), *parameter_specs(NodeOptions),
                *parameter_specs(JointOverride, prefix="joints.<joint>.")]


def _numbers(cls: type) -> list[ParameterSpec]:
    return [s for s in parameter_specs(cls) if type(s.default) in (int, float)]


@pytest.mark.parametrize("specs", [parameter_specs(cls) for cls in DATACLASSES] + [SAFETY_SPECS],
                         ids=[cls.__name__ for cls in DATACLASSES] + ["SafetyConfig"])
def test_every_parameter_is_described_and_every_number_bounded(specs: list[ParameterSpec]) -> None:
    for spec in specs:
        d = descriptor(spec)
        assert len(d.description) > 10, spec.name
        if spec.value_type is float:
            assert d.floating_point_range, spec.name
            if spec.default is not None:
                assert d.floating_point_range[0].from_value <= spec.default <= d.floating_point_range[0].to_value
        elif type(spec.default) is int:
            assert d.type == ParameterType.PARAMETER_INTEGER and d.integer_range, spec.name
            assert d.integer_range[0].from_value <= spec.default <= d.integer_range[0].to_value, spec.name


@pytest.mark.parametrize("name", sorted(YAML_FILES))
def test_yaml_sets_declared_parameters_in_range_with_a_comment_each(name: str) -> None:
    specs = {s.name: s for s in parameter_specs(YAML_FILES[name])}
    _check_yaml(name, specs, yaml.safe_load((ROOT / "config" / name).read_text())["/**"]["ros__parameters"])


def test_safety_yaml_sets_only_declared_non_default_values_with_a_comment_each() -> None:
    nested = yaml.safe_load((ROOT / "config" / "safety.yaml").read_text())["/**"]["ros__parameters"]
    values = {key: value for key, value in nested.items() if key != "joints"}
    values |= {f"joints.<joint>.{key}": value for override in nested.get("joints", {}).values()
               for key, value in override.items()}
    specs = {s.name: s for s in SAFETY_SPECS}
    _check_yaml("safety.yaml", specs, values)
    defaults = SafetyConfig().to_mapping() | NodeOptions().model_dump()
    assert not {k for k, v in values.items() if defaults.get(k) == v}, "safety.yaml repeats defaults"


def _check_yaml(name: str, specs: dict[str, ParameterSpec], values: dict[str, object]) -> None:
    text = (ROOT / "config" / name).read_text()
    assert set(values) <= set(specs), f"{name}: not parameters of the node: {sorted(set(values) - set(specs))}"
    for key, value in values.items():
        spec = specs[key]
        assert spec.low is None or spec.low <= value, f"{name}: {key}={value} below {spec.low}"  # type: ignore[operator]
        assert spec.high is None or value <= spec.high, f"{name}: {key}={value} above {spec.high}"  # type: ignore[operator]
        leaf = key.rpartition(".")[2]
        line = next(i for i, line in enumerate(text.splitlines()) if re.match(rf"\s+{leaf}:", line))
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


def test_the_safety_node_describes_its_parameters(context: Context) -> None:
    from rclpy.parameter import Parameter

    from so101_safety.safety_node import SafetyNode

    node = SafetyNode(context=context, parameter_overrides=[Parameter("joints.gripper.max_velocity", value=2.0)])
    try:
        described = {d.name: d for d in node.describe_parameters(["watchdog_timeout", "log_throttle",
                                                                   "joints.gripper.max_velocity"])}
        assert described["watchdog_timeout"].floating_point_range[0].from_value == 0.0
        assert "hold" in described["watchdog_timeout"].description
        assert "log line" in described["log_throttle"].description
        assert "this joint" in described["joints.gripper.max_velocity"].description
        assert node.get_parameter("watchdog_timeout").value == SafetyConfig().watchdog_timeout
        assert {lim.name: lim.max_velocity for lim in node.config.limits}["gripper"] == 2.0
    finally:
        node.destroy_node()
