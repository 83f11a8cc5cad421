"""Torch-heavy so101_policy tests, grouped in one module: tiny LeRobot ACT, TorchScript, torch-exported ONNX.

The tiny ACT is a real LeRobot 0.4.4 ACT (random weights, dim_model 32, chunk 10, one 32x32 camera image:
ACT needs an image or an environment state besides observation.state) saved with its processors, built
once per session (conftest.py) and loaded offline through the loader like a training run's output.
"""

from __future__ import annotations

import json
import math
import shutil
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
import torch

from so101_policy.backends.lerobot import LeRobotPolicy
from so101_policy.loading import load_policy
from so101_policy.runner import AsyncPolicyRunner, PolicyRunner
from so101_policy.spec import FeatureMismatchError, MissingImageError, PolicyLoadError
from so101_policy.tiny import DEFAULT_STEP, TINY_IMAGE_KEY, make_offset_torchscript, offset_metadata
from so101_testing import wait_for

Q = np.array([0.1, -0.2, 0.3, -0.4, 0.5, 0.6])
IMAGE = (np.arange(32 * 32 * 3) % 251).astype(np.uint8).reshape(32, 32, 3)


@pytest.fixture(scope="module")
def act_model(tiny_act_dir):
    return load_policy(tiny_act_dir)


def test_tiny_act_loads_with_spec_from_config(act_model, tiny_act_dir):
    assert isinstance(act_model, LeRobotPolicy) and act_model.chunked
    spec = act_model.spec
    assert (spec.kind, spec.policy_type, spec.units) == ("lerobot", "act", "lerobot")
    assert (spec.chunk_size, spec.n_action_steps) == (10, 10)
    assert dict(spec.image_features) == {TINY_IMAGE_KEY: (3, 32, 32)}
    assert load_policy(tiny_act_dir, kind="lerobot").spec == spec


def test_tiny_act_actions_match_lerobot_in_rad(act_model):
    """The runner's rad actions equal LeRobot's own pipeline on the same frame, converted deg/% → rad."""
    runner = PolicyRunner(act_model, configured_images=[TINY_IMAGE_KEY])
    actions = runner.infer(Q, {TINY_IMAGE_KEY: IMAGE})
    assert actions.shape == (10, 6) and np.all(np.isfinite(actions))

    # reference: LeRobot's frame built by hand (degrees, gripper %), its processors, its policy
    grip = (Q[5] - (-0.174533)) / (1.74533 + 0.174533) * 100.0
    state = torch.tensor([[*np.degrees(Q[:5]), grip]], dtype=torch.float32)
    image = torch.from_numpy(IMAGE).float().permute(2, 0, 1).unsqueeze(0) / 255.0
    batch = {"observation.state": state, TINY_IMAGE_KEY: image, "task": "", "robot_type": ""}
    with torch.inference_mode():
        chunk = act_model.policy.predict_action_chunk(act_model.preprocessor(batch))
        reference = act_model.postprocessor(chunk)[0].numpy()  # (10, 6) deg / %
    np.testing.assert_allclose(np.degrees(actions[:, :5]), reference[:, :5], rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(actions[:, 5], -0.174533 + reference[:, 5] / 100 * (1.74533 + 0.174533), atol=1e-5)


def test_tiny_act_chunk_is_served_from_the_queue(act_model):
    runner = PolicyRunner(act_model, configured_images=[TINY_IMAGE_KEY])
    expected = runner.infer(Q, {TINY_IMAGE_KEY: IMAGE})
    with AsyncPolicyRunner(runner, refill_threshold=0, align_chunks=False) as server:
        server.set_positions(Q)
        server.set_image(TINY_IMAGE_KEY, IMAGE)
        server.start()
        assert server.tick().status == "waiting"  # requests the first chunk
        assert wait_for(lambda: server.stats().inferences >= 1, timeout=30)
        first = server.tick()
        assert first.status == "fresh"
        served: list[Any] = [first.action] + [server.tick().action for _ in range(9)]
        np.testing.assert_allclose(np.stack(served), expected, atol=1e-5)  # the whole chunk, in order
        assert server.stats().inferences >= 1


def test_act_needs_its_camera(act_model):
    with pytest.raises(MissingImageError, match=r"observation.images.front.*image_topics"):
        PolicyRunner(act_model, configured_images=[])
    with pytest.raises(MissingImageError, match="none received"):
        PolicyRunner(act_model).infer(Q)


def test_lerobot_errors_on_a_real_directory(tiny_act_dir, tmp_path):
    broken = tmp_path / "pretrained_model"
    shutil.copytree(tiny_act_dir, broken)
    config = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**config, "type": "transformer_xl"}))
    with pytest.raises(PolicyLoadError, match="unknown LeRobot policy type 'transformer_xl'"):
        load_policy(broken)
    (broken / "config.json").write_text(json.dumps(config))
    (broken / "policy_postprocessor.json").unlink()
    with pytest.raises(PolicyLoadError, match=r"missing processor.*policy_postprocessor.json"):
        load_policy(broken)
    shutil.copy(tiny_act_dir / "policy_postprocessor.json", broken)
    (broken / "model.safetensors").unlink()
    with pytest.raises(PolicyLoadError, match="LeRobot could not load"):
        load_policy(broken)


def test_lerobot_sidecar_overrides_units_and_rate(tiny_act_dir, tmp_path):
    d = tmp_path / "pretrained_model"
    shutil.copytree(tiny_act_dir, d)
    (d / "so101_policy.json").write_text(json.dumps({"rate_hz": 50, "n_action_steps": 4}))
    spec = load_policy(d).spec
    assert (spec.rate_hz, spec.n_action_steps, spec.chunk_size) == (50.0, 4, 10)
    (d / "so101_policy.json").write_text(json.dumps({"chunk_size": 3}))
    with pytest.raises(PolicyLoadError, match="cannot be overridden"):
        load_policy(d)


def test_torchscript_offset_policy_embedded_and_sidecar(tmp_path):
    path = make_offset_torchscript(tmp_path / "offset.pt", chunk_size=4, rate_hz=50)
    runner = PolicyRunner(load_policy(path))
    assert (runner.spec.kind, runner.spec.chunk_size, runner.spec.rate_hz) == ("torchscript", 4, 50.0)
    actions = runner.infer(Q)
    assert actions.shape == (4, 6)
    assert actions[0, 0] - Q[0] == pytest.approx(math.radians(DEFAULT_STEP[0]), abs=1e-6)
    assert actions[3, 1] - Q[1] == pytest.approx(4 * math.radians(DEFAULT_STEP[1]), abs=1e-6)

    side = make_offset_torchscript(tmp_path / "side.ts", chunk_size=2, embed=False, units="rad")
    assert (tmp_path / "side.ts.json").is_file()
    spec = load_policy(side).spec
    assert spec.units == "rad" and spec.chunk_size == 2
    np.testing.assert_allclose(PolicyRunner(load_policy(side)).infer(Q)[0], Q + np.array(DEFAULT_STEP), atol=1e-6)
    (tmp_path / "side.ts.json").unlink()
    with pytest.raises(PolicyLoadError, match="no policy metadata"):
        load_policy(side)
    (tmp_path / "junk.pt").write_bytes(b"not a zip")
    with pytest.raises(PolicyLoadError, match="not a loadable TorchScript"):
        load_policy(tmp_path / "junk.pt")


def test_torch_exported_onnx_policy_runs(tmp_path):
    """A torch module exported to ONNX with a sidecar: the documented input/output contract."""

    class Chunk(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.head = torch.nn.Linear(6, 3 * 6)

        def forward(self, state: torch.Tensor) -> torch.Tensor:
            return self.head(state).reshape(-1, 3, 6)

    module = Chunk().eval()
    path = tmp_path / "exported.onnx"
    torch.onnx.export(module, (torch.zeros(1, 6),), str(path), input_names=["observation.state"],
                      output_names=["action"], dynamo=False)
    path.with_name(path.name + ".json").write_text(json.dumps(offset_metadata(3)))
    runner = PolicyRunner(load_policy(path))
    actions = runner.infer(Q)
    state = torch.from_numpy(runner.spec.state_from_rad(Q)).unsqueeze(0)
    with torch.no_grad():
        reference = module(state)[0].numpy().astype(np.float64)
    np.testing.assert_allclose(runner.spec.state_from_rad(actions[0]), reference[0], rtol=1e-4, atol=1e-3)
    with pytest.raises(FeatureMismatchError):
        path.with_name(path.name + ".json").write_text(json.dumps({**offset_metadata(3),
                                                                   "state_names": ["x.pos"] * 6}))
        load_policy(path)
