"""Tiny reference policies for tests, benchmarks and dry runs (no training, no downloads).

- :func:`make_tiny_act`: a real LeRobot ACT policy with tiny dimensions (random weights, no pretrained
  backbone), saved with its pre/post processors exactly like a LeRobot training run's
  ``pretrained_model`` directory. ACT needs an image or an environment state besides
  ``observation.state``, so it takes one small camera image (``observation.images.front``).
- :func:`make_offset_onnx` / :func:`make_offset_torchscript`: a deterministic "policy" whose chunk is
  ``action[i] = state + (i + 1) · step`` (+ the mean of the image, if it has one), in LeRobot units, with
  embedded metadata: handy to check units, joint order and chunk serving exactly.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from so101_policy.spec import ACTION_KEY, METADATA_KEY, SCHEMA_VERSION, STATE_KEY, default_feature_names

__all__ = ["TINY_IMAGE_KEY", "make_tiny_act", "make_offset_onnx", "make_offset_torchscript", "offset_metadata",
           "DEFAULT_STEP"]

TINY_IMAGE_KEY = "observation.images.front"
DEFAULT_STEP = (1.0, -1.0, 0.5, -0.5, 2.0, 1.0)  # per policy-order joint, LeRobot units (deg, gripper %)


def make_tiny_act(out_dir: str | Path, *, chunk_size: int = 10, n_action_steps: int | None = None,
                  image_shape: Sequence[int] = (3, 32, 32), seed: int = 0, device: str = "cpu") -> Path:
    """Write a tiny ACT ``pretrained_model`` directory (config, weights, processors) to ``out_dir``."""
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors

    n = len(default_feature_names())
    cfg = ACTConfig(
        input_features={STATE_KEY: PolicyFeature(FeatureType.STATE, (n,)),
                        TINY_IMAGE_KEY: PolicyFeature(FeatureType.VISUAL, tuple(image_shape))},
        output_features={ACTION_KEY: PolicyFeature(FeatureType.ACTION, (n,))},
        chunk_size=chunk_size, n_action_steps=n_action_steps or chunk_size,
        dim_model=32, n_heads=2, dim_feedforward=64, n_encoder_layers=1, n_decoder_layers=1,
        use_vae=False, latent_dim=8, vision_backbone="resnet18", pretrained_backbone_weights=None,
        device=device,
    )
    torch.manual_seed(seed)
    policy = ACTPolicy(cfg)
    c = int(image_shape[0])
    stats = {  # plausible SO-101 statistics in LeRobot units (deg, gripper %)
        STATE_KEY: {"mean": torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 30.0]), "std": torch.full((n,), 30.0)},
        ACTION_KEY: {"mean": torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 30.0]), "std": torch.full((n,), 30.0)},
        TINY_IMAGE_KEY: {"mean": torch.full((c, 1, 1), 0.5), "std": torch.full((c, 1, 1), 0.25)},
    }
    pre, post = make_pre_post_processors(cfg, dataset_stats=stats)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(out)
    pre.save_pretrained(out)
    post.save_pretrained(out)
    return out


def offset_metadata(chunk_size: int, *, n_action_steps: int | None = None, rate_hz: float | None = 30.0,
                    image_shape: Sequence[int] | None = None, state_names: Sequence[str] | None = None,
                    action_names: Sequence[str] | None = None, units: str = "lerobot") -> dict:
    meta = {
        "schema_version": SCHEMA_VERSION,
        "state_names": list(state_names or default_feature_names()),
        "action_names": list(action_names or default_feature_names()),
        "units": units, "chunk_size": chunk_size, "n_action_steps": n_action_steps or chunk_size,
        "rate_hz": rate_hz, "description": "offset test policy: action[i] = state + (i + 1) * step",
    }
    if image_shape is not None:
        meta["image_features"] = {TINY_IMAGE_KEY: list(image_shape)}
    return meta


def _offsets(chunk_size: int, step: Sequence[float]) -> np.ndarray:
    return (np.arange(1, chunk_size + 1, dtype=np.float32)[:, None] * np.asarray(step, np.float32)[None, :])[None]


def make_offset_onnx(path: str | Path, *, chunk_size: int = 5, step: Sequence[float] = DEFAULT_STEP,
                     image_shape: Sequence[int] | None = None, embed: bool = True, **meta_kwargs) -> Path:
    """An ONNX offset policy built with ``onnx.helper`` (no torch). Metadata embedded or as a sidecar."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    n = len(default_feature_names())
    inputs = [helper.make_tensor_value_info(STATE_KEY, TensorProto.FLOAT, [1, n])]
    nodes = [
        helper.make_node("Reshape", [STATE_KEY, "state_shape"], ["state3"]),
        helper.make_node("Add", ["state3", "offsets"], ["chunk"]),
    ]
    inits = [numpy_helper.from_array(np.array([1, 1, n], np.int64), "state_shape"),
             numpy_helper.from_array(_offsets(chunk_size, step), "offsets")]
    out_name = "chunk"
    if image_shape is not None:
        inputs.append(helper.make_tensor_value_info(TINY_IMAGE_KEY, TensorProto.FLOAT, [1, *image_shape]))
        nodes += [helper.make_node("ReduceMean", [TINY_IMAGE_KEY], ["image_mean"], keepdims=0),
                  helper.make_node("Add", ["chunk", "image_mean"], ["chunk_img"])]
        out_name = "chunk_img"
    nodes.append(helper.make_node("Identity", [out_name], [ACTION_KEY]))
    graph = helper.make_graph(nodes, "so101_offset_policy", inputs,
                              [helper.make_tensor_value_info(ACTION_KEY, TensorProto.FLOAT, [1, chunk_size, n])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    meta = offset_metadata(chunk_size, image_shape=image_shape, **meta_kwargs)
    if embed:
        helper.set_model_props(model, {METADATA_KEY: json.dumps(meta)})
    onnx.checker.check_model(model)
    p = Path(path)
    onnx.save(model, str(p))
    if not embed:
        p.with_name(p.name + ".json").write_text(json.dumps(meta, indent=2))
    return p


def make_offset_torchscript(path: str | Path, *, chunk_size: int = 5, step: Sequence[float] = DEFAULT_STEP,
                            embed: bool = True, **meta_kwargs) -> Path:
    """A TorchScript offset policy (state only), metadata in ``_extra_files`` or a sidecar."""
    import torch

    class Offset(torch.nn.Module):
        def __init__(self, offsets: torch.Tensor) -> None:
            super().__init__()
            self.offsets = torch.nn.Parameter(offsets, requires_grad=False)  # fixed: a typed attribute, unlike a buffer

        def forward(self, state: torch.Tensor) -> torch.Tensor:
            return state.unsqueeze(1) + self.offsets

    meta = offset_metadata(chunk_size, **meta_kwargs)
    p = Path(path)
    extra = {f"{METADATA_KEY}.json": json.dumps(meta)} if embed else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # TorchScript is deprecated in torch >= 2.10, still works
        module = torch.jit.script(Offset(torch.from_numpy(_offsets(chunk_size, step))))
        torch.jit.save(module, str(p), _extra_files=extra)
    if not embed:
        p.with_name(p.name + ".json").write_text(json.dumps(meta, indent=2))
    return p
