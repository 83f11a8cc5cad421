"""Load a learned policy (LeRobot pretrained directory, TorchScript or ONNX) behind one interface.

No rclpy here. Every loader returns a :class:`PolicyModel`: ``spec`` (a :class:`PolicySpec`
describing features, joint order, units, chunking and rate), ``predict(obs) -> (n, A)`` in the
*policy's* units and joint order, and ``reset()``. Unit and joint-order conversion to the ROS side
(radians, :data:`so101_common.joints.JOINT_NAMES`) lives in :class:`PolicySpec` and is applied by
:class:`so101_policy.runner.PolicyRunner`.

Kinds
-----
``lerobot``
    A ``pretrained_model`` directory written by LeRobot 0.4.4 (``config.json`` with a ``type``,
    ``model.safetensors``, ``policy_preprocessor.json`` / ``policy_postprocessor.json`` and their
    state files). Loaded offline (``HF_HUB_OFFLINE=1``) with LeRobot's own factory
    (``get_policy_class`` + ``make_pre_post_processors(cfg, pretrained_path=dir)``). LeRobot's
    ``config.json`` does not store feature *names*; the SO-101 follower's order
    (``shoulder_pan.pos`` … ``gripper.pos``, degrees + gripper 0..100) is assumed unless an optional
    ``so101_policy.json`` in the directory says otherwise (same schema as below).
``torchscript`` / ``onnx``
    A model file plus JSON metadata (schema below): embedded (TorchScript ``_extra_files
    ["so101_policy.json"]``, ONNX ``metadata_props["so101_policy"]``) or a sidecar file next to the
    model (``policy.onnx`` → ``policy.onnx.json`` or ``policy.json``; the sidecar wins).
    Inputs: ``observation.state`` float32 ``(1, S)`` in the policy's units, then each image feature
    float32 ``(1, 3, H, W)`` in [0, 1] (TorchScript: positional, in ``image_features`` order; ONNX:
    inputs named after the features). Output: the first output, ``(1, chunk, A)``, ``(chunk, A)`` or
    ``(1, A)``, in the policy's units.

Metadata schema (``schema_version`` 1)::

    {"schema_version": 1,
     "state_names": ["shoulder_pan.pos", ...],      # observation.state order (default: SO-101 order)
     "action_names": ["shoulder_pan.pos", ...],     # action order (default: SO-101 order)
     "units": "lerobot",                            # "lerobot" (deg, gripper 0..100) or "rad"
     "chunk_size": 10, "n_action_steps": 10,        # actions per inference / actions used of them
     "rate_hz": 30,                                  # rate the policy was trained at (optional)
     "image_features": {"observation.images.front": [3, 96, 96]},   # optional
     "uses_task": false}                            # language-conditioned (optional)
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from so101_common.joints import (
    GRIPPER,
    JOINT_NAMES,
    JointSpecError,
    gripper_percent_to_rad,
    gripper_rad_to_percent,
)

__all__ = [
    "SCHEMA_VERSION",
    "METADATA_KEY",
    "SIDECAR_NAME",
    "STATE_KEY",
    "ACTION_KEY",
    "IMAGE_PREFIX",
    "UNITS",
    "LEROBOT_CHUNK_TYPES",
    "PolicyError",
    "PolicyLoadError",
    "FeatureMismatchError",
    "MissingImageError",
    "PolicySpec",
    "PolicyObservation",
    "PolicyModel",
    "default_feature_names",
    "joint_order",
    "detect_kind",
    "load_policy",
    "load_lerobot",
    "load_torchscript",
    "load_onnx",
    "read_metadata",
    "spec_from_metadata",
    "image_to_chw",
]

SCHEMA_VERSION = 1
METADATA_KEY = "so101_policy"  # ONNX metadata_props key; TorchScript extra file is f"{METADATA_KEY}.json"
SIDECAR_NAME = "so101_policy.json"  # optional override inside a LeRobot pretrained directory
STATE_KEY = "observation.state"
ACTION_KEY = "action"
IMAGE_PREFIX = "observation.images."
ENV_STATE_KEY = "observation.environment_state"
UNITS = ("lerobot", "rad")
TORCHSCRIPT_SUFFIXES = (".pt", ".pth", ".ts", ".torchscript", ".jit")
ONNX_SUFFIXES = (".onnx",)

# LeRobot policy types whose ``predict_action_chunk`` is a pure function of one observation; the others
# (diffusion, tdmpc, vqbet, sac, ...) keep observation/action queues inside and are stepped with
# ``select_action`` (one action per inference; the policy's own queue does its chunking).
LEROBOT_CHUNK_TYPES = frozenset({"act", "smolvla", "pi0", "pi05", "pi0_fast", "groot", "xvla", "wall_x"})
# Known non-action model types LeRobot's factory can build (reward models): refused.
LEROBOT_NON_POLICY_TYPES = frozenset({"reward_classifier", "sarm"})


class PolicyError(RuntimeError):
    """Base class of this package's errors."""


class PolicyLoadError(PolicyError):
    """A policy could not be loaded (missing path, unknown type, missing processors, bad metadata)."""


class FeatureMismatchError(PolicyLoadError):
    """The policy's state/action features do not fit the SO-101 joint specification."""


class MissingImageError(PolicyError):
    """The policy needs a camera image that is not configured (or not received)."""


def default_feature_names() -> tuple[str, ...]:
    """LeRobot's SO-101 follower feature names in motor order: ``shoulder_pan.pos`` … ``gripper.pos``."""
    return tuple(f"{name}.pos" for name in JOINT_NAMES)


def joint_order(names: Sequence[str], what: str) -> tuple[int, ...]:
    """For feature ``names`` (``<joint>.pos`` or bare ``<joint>``), the index of each into ``JOINT_NAMES``.

    The names must be exactly the six SO-101 joints, in any order; anything else is a
    :class:`FeatureMismatchError` naming the unknown, missing and duplicated joints.
    """
    joints = [n[: -len(".pos")] if n.endswith(".pos") else n for n in names]
    unknown = [n for n, j in zip(names, joints, strict=True) if j not in JOINT_NAMES]
    missing = [j for j in JOINT_NAMES if j not in joints]
    duplicated = sorted({j for j in joints if joints.count(j) > 1})
    if unknown or missing or duplicated:
        parts = []
        if unknown:
            parts.append(f"unknown {unknown}")
        if missing:
            parts.append(f"missing {missing}")
        if duplicated:
            parts.append(f"duplicated {duplicated}")
        raise FeatureMismatchError(
            f"{what} names do not match the SO-101 joint spec ({', '.join(parts)}); "
            f"expected the six joints {list(default_feature_names())} in any order")
    return tuple(JOINT_NAMES.index(j) for j in joints)


@dataclass(frozen=True)
class PolicySpec:
    """What a loaded policy consumes and produces, and how to convert to/from the ROS side."""

    kind: str  # "lerobot" | "torchscript" | "onnx"
    source: str  # path it was loaded from
    policy_type: str  # LeRobot type ("act", ...) or the kind for plain models
    state_names: tuple[str, ...] = field(default_factory=default_feature_names)
    action_names: tuple[str, ...] = field(default_factory=default_feature_names)
    units: str = "lerobot"
    chunk_size: int = 1
    n_action_steps: int = 1
    rate_hz: float | None = None
    image_features: Mapping[str, tuple[int, int, int]] = field(default_factory=dict)  # key -> (C, H, W)
    uses_task: bool = False

    def __post_init__(self) -> None:
        if self.units not in UNITS:
            raise PolicyLoadError(f"{self.source}: units {self.units!r} not supported; use one of {list(UNITS)}")
        if self.chunk_size < 1 or not 1 <= self.n_action_steps <= self.chunk_size:
            raise PolicyLoadError(f"{self.source}: need 1 <= n_action_steps ({self.n_action_steps}) <= "
                                  f"chunk_size ({self.chunk_size})")
        if self.rate_hz is not None and not (math.isfinite(self.rate_hz) and self.rate_hz > 0):
            raise PolicyLoadError(f"{self.source}: rate_hz must be positive, got {self.rate_hz}")
        for key, shape in self.image_features.items():
            if not key.startswith(IMAGE_PREFIX):
                raise PolicyLoadError(f"{self.source}: image feature {key!r} must start with {IMAGE_PREFIX!r}")
            if len(shape) != 3 or shape[0] not in (1, 3) or min(shape) < 1:
                raise PolicyLoadError(f"{self.source}: image feature {key!r} shape {list(shape)} is not (C, H, W) "
                                      "with C = 1 or 3")
        # validates both orders now, so a bad policy fails at load time
        object.__setattr__(self, "_state_index", joint_order(self.state_names, f"{self.source}: state"))
        object.__setattr__(self, "_action_index", joint_order(self.action_names, f"{self.source}: action"))

    # -- conversions between ROS (rad, JOINT_NAMES order) and the policy (its units and order) ---------
    def state_from_rad(self, positions: Sequence[float] | np.ndarray) -> np.ndarray:
        """Joint positions in rad (``JOINT_NAMES`` order) → the policy's ``observation.state`` (float32)."""
        q = np.asarray(positions, dtype=np.float64)
        if q.shape != (len(JOINT_NAMES),):
            raise JointSpecError(f"expected {len(JOINT_NAMES)} joint positions, got shape {q.shape}")
        if self.units == "lerobot":
            q = _rad_to_lerobot(q)
        return q[list(self._state_index)].astype(np.float32)  # type: ignore[attr-defined]

    def actions_to_rad(self, actions: np.ndarray) -> np.ndarray:
        """Policy actions ``(n, A)`` in its units and order → ``(n, 6)`` rad in ``JOINT_NAMES`` order."""
        a = np.asarray(actions, dtype=np.float64)
        if a.ndim != 2 or a.shape[1] != len(self.action_names):
            raise FeatureMismatchError(f"{self.source}: policy returned actions of shape {a.shape}, expected "
                                       f"(n, {len(self.action_names)})")
        out = np.empty((a.shape[0], len(JOINT_NAMES)))
        out[:, list(self._action_index)] = a  # type: ignore[attr-defined]
        if self.units == "lerobot":
            out = _lerobot_to_rad(out)
        return out

    def missing_images(self, configured: Sequence[str]) -> list[str]:
        """The image features this policy needs that are not in ``configured``."""
        return [key for key in self.image_features if key not in configured]

    def require_images(self, configured: Sequence[str]) -> None:
        """Raise :class:`MissingImageError` if the policy needs an image that is not configured."""
        missing = self.missing_images(configured)
        if missing:
            raise MissingImageError(
                f"policy {self.source} needs camera image(s) {missing} that are not configured; map each to a "
                f"sensor_msgs/Image topic (node parameter image_topics: ['{missing[0]}=/camera/image_raw']). "
                f"Configured: {sorted(configured)}")

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "source": self.source, "policy_type": self.policy_type, "units": self.units,
            "chunk_size": self.chunk_size, "n_action_steps": self.n_action_steps, "rate_hz": self.rate_hz,
            "state_names": list(self.state_names), "action_names": list(self.action_names),
            "image_features": {k: list(v) for k, v in self.image_features.items()}, "uses_task": self.uses_task,
        }


_DEG = 180.0 / math.pi
_GRIPPER_INDEX = JOINT_NAMES.index(GRIPPER.name)


def _rad_to_lerobot(q: np.ndarray) -> np.ndarray:
    """rad (JOINT_NAMES order, last axis) → LeRobot units: degrees from mid-range, gripper 0..100."""
    out = q * _DEG
    out[..., _GRIPPER_INDEX] = gripper_rad_to_percent(q[..., _GRIPPER_INDEX])
    return out


def _lerobot_to_rad(values: np.ndarray) -> np.ndarray:
    out = values / _DEG
    out[..., _GRIPPER_INDEX] = gripper_percent_to_rad(values[..., _GRIPPER_INDEX])
    return out


@dataclass
class PolicyObservation:
    """One observation in the policy's units: ``state`` (S,) float32, images HxWxC uint8 (RGB), task."""

    state: np.ndarray
    images: dict[str, np.ndarray] = field(default_factory=dict)
    task: str = ""


class PolicyModel(Protocol):
    """What every loader returns."""

    spec: PolicySpec

    def predict(self, obs: PolicyObservation) -> np.ndarray:
        """Actions ``(n, A)`` (n ≤ ``spec.chunk_size``) in the policy's units and action order."""
        ...

    def reset(self) -> None:
        """Forget internal state (queues, ensembles) before a new episode."""
        ...


# --------------------------------------------------------------------------------------- helpers
def image_to_chw(image: np.ndarray, shape: Sequence[int], key: str = "image") -> np.ndarray:
    """An HxW[xC] uint8 (or float in [0, 1]) image → float32 ``(C, H, W)`` in [0, 1] at ``shape``.

    Resized with OpenCV (area) when the camera's size differs from the trained one, like LeRobot's
    async inference server; grey ↔ RGB converted to the expected channel count.
    """
    img = np.asarray(image)
    if img.ndim == 2:
        img = img[:, :, None]
    if img.ndim != 3 or img.shape[2] not in (1, 3, 4):
        raise MissingImageError(f"{key}: expected an HxW, HxWx1, HxWx3 or HxWx4 image, got shape {img.shape}")
    if img.shape[2] == 4:
        img = img[:, :, :3]
    channels, height, width = (int(s) for s in shape)
    if channels == 3 and img.shape[2] == 1:
        img = np.repeat(img, 3, axis=2)
    elif channels == 1 and img.shape[2] == 3:
        img = img.mean(axis=2, keepdims=True).astype(img.dtype)
    if img.shape[0] != height or img.shape[1] != width:
        import cv2

        img = cv2.resize(img, (width, height), interpolation=cv2.INTER_AREA)
        if img.ndim == 2:
            img = img[:, :, None]
    out = img.astype(np.float32)
    if np.issubdtype(np.asarray(image).dtype, np.integer):
        out /= 255.0
    return np.ascontiguousarray(out.transpose(2, 0, 1))


def _images_for(spec: PolicySpec, obs: PolicyObservation) -> dict[str, np.ndarray]:
    """The policy's images as float32 (C, H, W) in [0, 1], or MissingImageError."""
    missing = [k for k in spec.image_features if k not in obs.images]
    if missing:
        raise MissingImageError(f"policy {spec.source} needs image(s) {missing}; none received yet")
    return {k: image_to_chw(obs.images[k], shape, k) for k, shape in spec.image_features.items()}


def detect_kind(path: str | os.PathLike[str]) -> str:
    """``lerobot`` for a directory, ``onnx`` / ``torchscript`` by file suffix."""
    p = Path(path)
    if not p.exists():
        raise PolicyLoadError(f"policy path {str(p)!r} does not exist")
    if p.is_dir():
        return "lerobot"
    suffix = p.suffix.lower()
    if suffix in ONNX_SUFFIXES:
        return "onnx"
    if suffix in TORCHSCRIPT_SUFFIXES:
        return "torchscript"
    raise PolicyLoadError(f"cannot tell the kind of policy {str(p)!r}: expected a LeRobot pretrained_model "
                          f"directory, an ONNX file ({', '.join(ONNX_SUFFIXES)}) or a TorchScript file "
                          f"({', '.join(TORCHSCRIPT_SUFFIXES)}); or set policy_kind explicitly")


def load_policy(path: str | os.PathLike[str], kind: str = "auto", device: str = "cpu") -> PolicyModel:
    """Load the policy at ``path`` (``kind``: auto | lerobot | torchscript | onnx)."""
    if not str(path):
        raise PolicyLoadError("no policy path given (parameter policy_path is empty)")
    p = Path(path).expanduser()
    if not p.exists():
        raise PolicyLoadError(f"policy path {str(p)!r} does not exist")
    if kind == "auto":
        kind = detect_kind(p)
    if kind == "lerobot":
        return load_lerobot(p, device=device)
    if kind == "torchscript":
        return load_torchscript(p, device=device)
    if kind == "onnx":
        return load_onnx(p, device=device)
    raise PolicyLoadError(f"unknown policy kind {kind!r}; use auto, lerobot, torchscript or onnx")


# ------------------------------------------------------------------------------------- metadata
def spec_from_metadata(meta: Mapping[str, Any], *, kind: str, source: str, policy_type: str | None = None,
                       defaults: Mapping[str, Any] | None = None) -> PolicySpec:
    """Build a :class:`PolicySpec` from a metadata mapping (schema in the module docstring)."""
    if not isinstance(meta, Mapping):
        raise PolicyLoadError(f"{source}: policy metadata must be a JSON object, got {type(meta).__name__}")
    merged: dict[str, Any] = dict(defaults or {})
    merged.update(meta)
    version = merged.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise PolicyLoadError(f"{source}: policy metadata schema_version {version} is not supported "
                              f"(this build reads {SCHEMA_VERSION})")
    known = {"schema_version", "state_names", "action_names", "units", "chunk_size", "n_action_steps", "rate_hz",
             "image_features", "uses_task", "description"}
    unknown = sorted(set(merged) - known)
    if unknown:
        raise PolicyLoadError(f"{source}: unknown policy metadata key(s) {unknown}; known: {sorted(known)}")
    try:
        chunk = int(merged.get("chunk_size", 1))
        images: dict[str, Any] = {str(k): tuple(int(s) for s in v) for k, v in dict(merged.get("image_features") or {}).items()}
        rate = merged.get("rate_hz")
        return PolicySpec(
            kind=kind, source=source, policy_type=policy_type or kind,
            state_names=tuple(merged.get("state_names") or default_feature_names()),
            action_names=tuple(merged.get("action_names") or default_feature_names()),
            units=str(merged.get("units", "lerobot")),
            chunk_size=chunk, n_action_steps=int(merged.get("n_action_steps", chunk)),
            rate_hz=None if rate in (None, 0) else float(rate),
            image_features=images, uses_task=bool(merged.get("uses_task", False)),
        )
    except (TypeError, ValueError) as err:
        if isinstance(err, PolicyError):
            raise
        raise PolicyLoadError(f"{source}: bad policy metadata: {err}") from err


def _sidecar_candidates(model: Path) -> list[Path]:
    return [model.with_name(model.name + ".json"), model.with_suffix(".json")]


def read_metadata(model: Path, embedded: str | bytes | None) -> dict[str, Any]:
    """Metadata for a model file: a sidecar JSON next to it wins over the embedded copy."""
    for candidate in _sidecar_candidates(model):
        if candidate.is_file():
            return _parse_json(candidate.read_text(), str(candidate))
    if embedded:
        return _parse_json(embedded.decode() if isinstance(embedded, bytes) else embedded, f"{model} (embedded)")
    raise PolicyLoadError(
        f"{model}: no policy metadata; embed it ({'TorchScript _extra_files[' + repr(METADATA_KEY + '.json') + ']'} "
        f"or ONNX metadata_props[{METADATA_KEY!r}]) or put a sidecar at {_sidecar_candidates(model)[0]}")


def _parse_json(text: str, where: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise PolicyLoadError(f"{where}: policy metadata is not valid JSON: {err}") from err
    if not isinstance(data, dict):
        raise PolicyLoadError(f"{where}: policy metadata must be a JSON object")
    return data


def _chunk_array(out: np.ndarray, spec: PolicySpec) -> np.ndarray:
    """A model output as ``(n, A)``: accepts ``(1, n, A)``, ``(n, A)``, ``(1, A)`` and ``(A,)``."""
    a = np.asarray(out, dtype=np.float64)
    if a.ndim == 3 and a.shape[0] == 1:
        a = a[0]
    elif a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[1] != len(spec.action_names):
        raise FeatureMismatchError(f"{spec.source}: model output shape {np.shape(out)} is not (1, chunk, "
                                   f"{len(spec.action_names)}) / (chunk, {len(spec.action_names)})")
    return a[: spec.n_action_steps]


def _check_state(obs: PolicyObservation, spec: PolicySpec) -> np.ndarray:
    state = np.asarray(obs.state, dtype=np.float32).reshape(-1)
    if state.shape[0] != len(spec.state_names):
        raise FeatureMismatchError(f"{spec.source}: observation.state has {state.shape[0]} values, the policy "
                                   f"expects {len(spec.state_names)}")
    return state


# ------------------------------------------------------------------------------------ torchscript
class TorchScriptPolicy:
    """A TorchScript module: ``forward(state, *images) -> actions``."""

    def __init__(self, module: Any, spec: PolicySpec, device: str) -> None:
        import torch

        self._torch = torch
        self.module = module
        self.spec = spec
        self.device = torch.device(device)

    def predict(self, obs: PolicyObservation) -> np.ndarray:
        torch = self._torch
        state = torch.from_numpy(_check_state(obs, self.spec)).unsqueeze(0).to(self.device)
        images = [torch.from_numpy(v).unsqueeze(0).to(self.device) for v in _images_for(self.spec, obs).values()]
        with torch.inference_mode():
            out = self.module(state, *images)
        if isinstance(out, (tuple, list)):
            out = out[0]
        return _chunk_array(out.detach().cpu().numpy(), self.spec)

    def reset(self) -> None:
        if hasattr(self.module, "reset"):
            self.module.reset()


def load_torchscript(path: str | os.PathLike[str], device: str = "cpu") -> TorchScriptPolicy:
    p = Path(path)
    if not p.is_file():
        raise PolicyLoadError(f"TorchScript policy {str(p)!r} does not exist or is not a file")
    import torch

    extra = {f"{METADATA_KEY}.json": ""}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch >= 2.10 deprecates TorchScript; it still loads
            module = torch.jit.load(str(p), map_location=device, _extra_files=extra)
    except Exception as err:
        raise PolicyLoadError(f"{p}: not a loadable TorchScript module: {err}") from err
    module.eval()
    meta = read_metadata(p, extra[f"{METADATA_KEY}.json"] or None)
    return TorchScriptPolicy(module, spec_from_metadata(meta, kind="torchscript", source=str(p)), device)


# ------------------------------------------------------------------------------------------- onnx
class OnnxPolicy:
    """An ONNX model run with onnxruntime (inputs named after the features, first output = actions)."""

    def __init__(self, session: Any, spec: PolicySpec) -> None:
        self.session = session
        self.spec = spec
        names = [i.name for i in session.get_inputs()]
        wanted = [STATE_KEY, *spec.image_features]
        missing = [n for n in wanted if n not in names]
        extra = [n for n in names if n not in wanted]
        if missing or extra:
            raise FeatureMismatchError(f"{spec.source}: ONNX inputs {names} do not match the metadata's features "
                                       f"{wanted} (missing {missing}, unexpected {extra})")
        self._output = session.get_outputs()[0].name

    def predict(self, obs: PolicyObservation) -> np.ndarray:
        feeds = {STATE_KEY: _check_state(obs, self.spec)[None, :]}
        feeds.update({k: v[None] for k, v in _images_for(self.spec, obs).items()})
        (out,) = self.session.run([self._output], feeds)
        return _chunk_array(out, self.spec)

    def reset(self) -> None:
        pass


def load_onnx(path: str | os.PathLike[str], device: str = "cpu", threads: int = 1) -> OnnxPolicy:
    p = Path(path)
    if not p.is_file():
        raise PolicyLoadError(f"ONNX policy {str(p)!r} does not exist or is not a file")
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if device.startswith("cuda") else \
        ["CPUExecutionProvider"]
    providers = [pr for pr in providers if pr in ort.get_available_providers()] or ["CPUExecutionProvider"]
    try:
        session = ort.InferenceSession(str(p), sess_options=options, providers=providers)
    except Exception as err:
        raise PolicyLoadError(f"{p}: not a loadable ONNX model: {err}") from err
    embedded = session.get_modelmeta().custom_metadata_map.get(METADATA_KEY)
    meta = read_metadata(p, embedded)
    return OnnxPolicy(session, spec_from_metadata(meta, kind="onnx", source=str(p)))


# ---------------------------------------------------------------------------------------- lerobot
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
        state = _check_state(obs, self.spec)
        # the frame LeRobot's own inference builds (prepare_observation_for_inference): batch of 1,
        # images float (C, H, W) in [0, 1], plus the task string and robot type
        batch: dict[str, Any] = {STATE_KEY: torch.from_numpy(state).unsqueeze(0)}
        for key, image in _images_for(self.spec, obs).items():
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
        return _chunk_array(out.detach().float().cpu().numpy(), self.spec)

    def reset(self) -> None:
        self.policy.reset()


def _lerobot_types() -> list[str]:
    return sorted(LEROBOT_CHUNK_TYPES | {"diffusion", "tdmpc", "vqbet", "sac"})


def load_lerobot(path: str | os.PathLike[str], device: str = "cpu") -> LeRobotPolicy:
    """Load a LeRobot pretrained policy directory offline, with its processors."""
    d = Path(path)
    if not d.exists():
        raise PolicyLoadError(f"LeRobot policy directory {str(d)!r} does not exist")
    if not d.is_dir():
        raise PolicyLoadError(f"LeRobot policy {str(d)!r} is not a directory (expected .../pretrained_model)")
    config_path = d / "config.json"
    if not config_path.is_file():
        hint = " (did you mean its pretrained_model/ subfolder?)" if (d / "pretrained_model").is_dir() else ""
        raise PolicyLoadError(f"{d}: no config.json: not a LeRobot pretrained policy directory{hint}")
    raw = _parse_json(config_path.read_text(), str(config_path))
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
    meta = _parse_json(sidecar.read_text(), str(sidecar)) if sidecar.is_file() else {}
    spec = _lerobot_spec(raw, meta, str(d), policy_type)  # feature checks before any heavy import

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the hub; must precede the imports below
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


def _lerobot_spec(raw: Mapping[str, Any], meta: Mapping[str, Any], source: str, policy_type: str) -> PolicySpec:
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
                "uses_task": policy_type in {"smolvla", "pi0", "pi05", "pi0_fast", "groot", "xvla", "wall_x"}}
    fixed = {"image_features", "chunk_size"}
    clash = sorted(k for k in fixed if k in meta)
    if clash:
        raise PolicyLoadError(f"{source}/{SIDECAR_NAME}: {clash} come from config.json and cannot be overridden")
    spec = spec_from_metadata(meta, kind="lerobot", source=source, policy_type=policy_type, defaults=defaults)
    if spec.n_action_steps > chunk:
        spec = replace(spec, n_action_steps=chunk)
    return spec
