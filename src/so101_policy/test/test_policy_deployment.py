"""The node's start-up decisions, made without ROS: rate, cameras, warnings."""

from __future__ import annotations

from pathlib import Path

import pytest

from so101_policy.deployment import deploy_policy, publish_rate
from so101_policy.parameters import DEFAULT_RATE_HZ, PolicyParameters
from so101_policy.spec import MissingImageError, PolicySpec
from so101_policy.tiny import TINY_IMAGE_KEY, make_offset_onnx


def test_publish_rate_prefers_the_setting_then_the_policy_then_the_default() -> None:
    trained_at_50 = PolicySpec(kind="onnx", source="p.onnx", policy_type="onnx", rate_hz=50.0)
    no_rate = PolicySpec(kind="onnx", source="p.onnx", policy_type="onnx")
    assert publish_rate(0.0, trained_at_50) == (50.0, None)
    assert publish_rate(0.0, no_rate) == (DEFAULT_RATE_HZ, None)
    assert publish_rate(20.0, no_rate) == (20.0, None)
    rate, warning = publish_rate(30.0, trained_at_50)
    assert rate == 30.0 and warning is not None and "trained at (50 Hz)" in warning


def test_deploy_subscribes_only_the_cameras_the_policy_reads(tmp_path: Path) -> None:
    path = make_offset_onnx(tmp_path / "img.onnx", chunk_size=4, n_action_steps=4, image_shape=(3, 8, 8), rate_hz=25)
    params = PolicyParameters(policy_path=str(path), rate_hz=0.0,
                              image_topics=[f"{TINY_IMAGE_KEY}=camera/front", "observation.images.wrist=camera/wrist"])
    deployment = deploy_policy(params)
    try:
        assert deployment.image_topics == {TINY_IMAGE_KEY: "camera/front"}
        assert deployment.rate_hz == 25.0 and deployment.runner.n_action_steps == 4
        assert len(deployment.warnings) == 1 and "'observation.images.wrist'" in deployment.warnings[0]
        assert "25 Hz" in deployment.summary(autostart=False) and str(path) in deployment.source
    finally:
        deployment.runner.close()
    with pytest.raises(MissingImageError):
        deploy_policy(PolicyParameters(policy_path=str(path)))  # its camera is mapped to no topic
