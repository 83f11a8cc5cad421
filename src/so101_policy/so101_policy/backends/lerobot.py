"""LeRobot ``pretrained_model`` directories, loaded offline with LeRobot's own factory and processors.

A directory written by LeRobot 0.4.4 (``config.json`` with a ``type``, ``model.safetensors``,
``policy_preprocessor.json`` / ``policy_postprocessor.json`` and their state files) is loaded with
``get_policy_class`` + ``make_pre_post_processors(cfg, pretrained_path=dir)``, after
:mod:`so101_policy.trust` checked that its processor steps are LeRobot's own (no code from the
folder runs) and forced the hub offline. ``config.json`` does not
store feature *names*; the SO-101 follower's order (``shoulder_pan.pos`` … ``gripper.pos``, degrees +
gripper 0..100) is assumed unless an optional ``so101_policy.json`` in the directory says otherwise.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from so101_common.joints import JOINT_NAMES
from so101_policy.images import images_for
from so101_policy.metadata import read_json_object, spec_from_metadata
from so101_policy.spec import (
    ACTION_KEY,
    ENV_STATE_KEY,
    IMAGE_PREFIX,
    LEROBOT_CHUNK_TYPES,
    LEROBOT_LANGUAGE_TYPES,
    LEROBOT_NON_POLICY_TYPES,
    SIDECAR_NAME,
    STATE_KEY,
    FeatureMismatchError,
    PolicyError,
    PolicyLoadError,
    PolicyObservation,
    PolicySpec,
    default_feature_names,
)
from so101_policy.trust import check_processor_steps, offline_hub

__all__ = ["LeRobotPolicy", "load_lerobot"]


class LeRobotPolicy:
    """A LeRobot ``PreTrainedPolicy`` with its saved pre/post processor pipelines."""

    def __init__(self, policy: Any, preprocessor: Any, postprocessor: Any, spec: PolicySpec, device: str) -> None:
        import torch

        self._torch = torch
        self.policy = policy
        self.preprocessor = preprocessor
        self.postprocessor = postprocessor
        self.spec = spec
        self.device = torch.device(device)
        self.chunked = spec.policy_type in LEROBOT_CHUNK_TYPES and \
            getattr(policy.config, "temporal_ensemble_coeff", None) is None

    def predict(self, obs: PolicyObservation) -> np.ndarray:
        torch = self._torch
        state = self.spec.state_array(obs.state)
        # the frame LeRobot's own inference builds (prepare_observation_for_inference): batch of 1,
        # images float (C, H, W) in [0, 1], plus the task string and robot type
        batch: dict[str, Any] = {STATE_KEY: torch.from_numpy(state).unsqueeze(0)}
        for key, image in images_for(self.spec, obs).items():
            batch[key] = torch.from_numpy(image).unsqueeze(0)
        batch["task"] = obs.task or ""
        batch["robot_type"] = "so101_follower"
        with torch.inference_mode():
            batch = self.preprocessor(batch)
            if self.chunked:
                chunk = self.policy.predict_action_chunk(batch)
                if chunk.ndim == 2:
                    chunk = chunk.unsqueeze(0)
                chunk = chunk[:, : self.spec.n_action_steps, :]
                # post-process action by action, as LeRobot's policy server does
                actions = [self.postprocessor(chunk[:, i, :]) for i in range(chunk.shape[1])]
                out = torch.stack(actions, dim=1)[0]
            else:
                out = self.postprocessor(self.policy.select_action(batch))
        return self.spec.actions_from_output(out.detach().float().cpu().numpy())

    def reset(self) -> None:
        self.policy.reset()


def _lerobot_types() -> list[str]:
    return sorted(LEROBOT_CHUNK_TYPES | {"diffusion", "tdmpc", "vqbet", "sac"})


def load_lerobot(path: str | os.PathLike[str], device: str = "cpu", *, trust_remote_code: bool = False,
                 allow_network: bool = False) -> LeRobotPolicy:
    """Load a LeRobot pretrained policy directory with its processors: offline unless ``allow_network``,
    and refusing processor steps outside LeRobot unless ``trust_remote_code`` (:mod:`so101_policy.trust`)."""
    d = Path(path)
    if not d.exists():
        raise PolicyLoadError(f"LeRobot policy directory {str(d)!r} does not exist")
    if not d.is_dir():
        raise PolicyLoadError(f"LeRobot policy {str(d)!r} is not a directory (expected .../pretrained_model)")
    config_path = d / "config.json"
    if not config_path.is_file():
        hint = " (did you mean its pretrained_model/ subfolder?)" if (d / "pretrained_model").is_dir() else ""
        raise PolicyLoadError(f"{d}: no config.json: not a LeRobot pretrained policy directory{hint}")
    raw = read_json_object(config_path)
    policy_type = raw.get("type")
    if not isinstance(policy_type, str) or not policy_type:
        raise PolicyLoadError(f"{config_path}: no policy 'type' in config.json")
    if policy_type in LEROBOT_NON_POLICY_TYPES:
        raise PolicyLoadError(f"{config_path}: type {policy_type!r} is a reward model, not an action policy")
    missing = [name for name in ("policy_preprocessor.json", "policy_postprocessor.json") if not (d / name).is_file()]
    if missing:
        raise PolicyLoadError(
            f"{d}: missing processor file(s) {missing}. LeRobot >= 0.4 saves the normalisation pipelines next to "
            "the model; re-save the checkpoint with LeRobot 0.4.x (or migrate it with "
            "lerobot/processor/migrate_policy_normalization.py)")
    sidecar = d / SIDECAR_NAME
    meta = read_json_object(sidecar) if sidecar.is_file() else {}
    spec = _lerobot_spec(raw, meta, str(d), policy_type, str(sidecar))  # feature checks before any heavy import

    offline_hub(allow_network)  # never reach for the hub unless asked; before the imports below
    check_processor_steps(d, trust_remote_code)  # before LeRobot instantiates anything the folder names
    try:
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors
    except ImportError as err:
        raise PolicyLoadError(f"LeRobot is not importable ({err}); install lerobot==0.4.4") from err
    try:
        policy_cls = get_policy_class(policy_type)
    except (ValueError, NotImplementedError, ImportError) as err:
        raise PolicyLoadError(f"{config_path}: unknown LeRobot policy type {policy_type!r} ({err}); "
                              f"LeRobot 0.4.4 knows e.g. {_lerobot_types()}") from err
    try:
        cfg = PreTrainedConfig.from_pretrained(str(d))
        cfg.device = device
        with contextlib.redirect_stdout(sys.stderr):  # LeRobot prints "Loading weights ..." to stdout
            policy = policy_cls.from_pretrained(str(d), config=cfg)
        policy.to(device)
        policy.eval()
        override = {"device": device}
        pre, post = make_pre_post_processors(
            policy.config, pretrained_path=str(d),
            preprocessor_overrides={"device_processor": override},
            postprocessor_overrides={"device_processor": {"device": "cpu"}},
        )
    except PolicyError:
        raise
    except Exception as err:
        raise PolicyLoadError(f"{d}: LeRobot could not load this {policy_type!r} policy: "
                              f"{type(err).__name__}: {err}") from err
    policy.reset()
    return LeRobotPolicy(policy, pre, post, spec, device)


def _lerobot_spec(raw: Mapping[str, Any], meta: Mapping[str, Any], source: str, policy_type: str,
                  where: str) -> PolicySpec:
    """Check config.json's features against the SO-101 and build the spec (no LeRobot import)."""
    inputs: Mapping[str, Any] = raw.get("input_features") or {}
    outputs: Mapping[str, Any] = raw.get("output_features") or {}

    def shape(features: Mapping[str, Any], key: str) -> tuple[int, ...] | None:
        feature = features.get(key)
        return None if feature is None else tuple(int(s) for s in feature.get("shape", ()))

    n = len(JOINT_NAMES)
    state_shape, action_shape = shape(inputs, STATE_KEY), shape(outputs, ACTION_KEY)
    if state_shape != (n,):
        raise FeatureMismatchError(
            f"{source}: input feature {STATE_KEY!r} has shape {list(state_shape) if state_shape else None}; the "
            f"SO-101 joint spec has {n} joints ({list(default_feature_names())})")
    if action_shape != (n,):
        raise FeatureMismatchError(
            f"{source}: output feature {ACTION_KEY!r} has shape {list(action_shape) if action_shape else None}; "
            f"the SO-101 joint spec has {n} joints")
    unsupported = [k for k in inputs if k != STATE_KEY and not k.startswith(IMAGE_PREFIX)]
    if unsupported:
        raise FeatureMismatchError(f"{source}: input feature(s) {unsupported} cannot be built from joint states "
                                   f"and camera images (e.g. {ENV_STATE_KEY!r})")
    images = {k: tuple(int(s) for s in v.get("shape", ())) for k, v in inputs.items() if k.startswith(IMAGE_PREFIX)}
    chunk = int(raw.get("chunk_size") or raw.get("horizon") or 1)
    steps = int(raw.get("n_action_steps") or 1)
    if policy_type not in LEROBOT_CHUNK_TYPES or raw.get("temporal_ensemble_coeff") is not None:
        chunk = steps = 1  # stepped with select_action: one action per inference
    defaults = {"chunk_size": chunk, "n_action_steps": min(steps, chunk), "image_features": images,
                "uses_task": policy_type in LEROBOT_LANGUAGE_TYPES}
    fixed = {"image_features", "chunk_size"}
    clash = sorted(k for k in fixed if k in meta)
    if clash:
        raise PolicyLoadError(f"{source}/{SIDECAR_NAME}: {clash} come from config.json and cannot be overridden")
    spec = spec_from_metadata(meta, kind="lerobot", source=source, policy_type=policy_type, defaults=defaults,
                              where=where)
    if spec.n_action_steps > chunk:
        spec = replace(spec, n_action_steps=chunk)
    return spec
