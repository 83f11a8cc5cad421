"""What a loaded policy consumes and produces (:class:`PolicySpec`), its errors and constants. No rclpy, no torch.

A spec describes features, joint order, units, chunking and rate; it converts between the ROS side
(radians, :data:`so101_common.joints.JOINT_NAMES` order) and the policy's units and order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from so101_common.joints import JOINT_NAMES, JointSpecError
from so101_policy.units import lerobot_to_rad, rad_to_lerobot

__all__ = [
    "SCHEMA_VERSION",
    "METADATA_KEY",
    "SIDECAR_NAME",
    "STATE_KEY",
    "ACTION_KEY",
    "IMAGE_PREFIX",
    "ENV_STATE_KEY",
    "UNITS",
    "LEROBOT_CHUNK_TYPES",
    "LEROBOT_NON_POLICY_TYPES",
    "LEROBOT_LANGUAGE_TYPES",
    "PolicyError",
    "PolicyLoadError",
    "FeatureMismatchError",
    "MissingImageError",
    "PolicySpec",
    "PolicyObservation",
    "PolicyModel",
    "ClosablePolicyModel",
    "default_feature_names",
    "joint_order",
]

SCHEMA_VERSION = 1
METADATA_KEY = "so101_policy"  # ONNX metadata_props key; TorchScript extra file is f"{METADATA_KEY}.json"
SIDECAR_NAME = "so101_policy.json"  # optional override inside a LeRobot pretrained directory
STATE_KEY = "observation.state"
ACTION_KEY = "action"
IMAGE_PREFIX = "observation.images."
ENV_STATE_KEY = "observation.environment_state"
UNITS = ("lerobot", "rad")

# LeRobot policy types whose ``predict_action_chunk`` is a pure function of one observation; the others
# (diffusion, tdmpc, vqbet, sac, ...) keep observation/action queues inside and are stepped with
# ``select_action`` (one action per inference; the policy's own queue does its chunking).
LEROBOT_CHUNK_TYPES = frozenset({"act", "smolvla", "pi0", "pi05", "pi0_fast", "groot", "xvla", "wall_x"})
# LeRobot policy types conditioned on a task string (the node's ``task`` parameter).
LEROBOT_LANGUAGE_TYPES = frozenset({"smolvla", "pi0", "pi05", "pi0_fast", "groot", "xvla", "wall_x"})
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
            q = rad_to_lerobot(q)
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
            out = lerobot_to_rad(out)
        return out

    def state_array(self, state: Any) -> np.ndarray:
        """An observation's ``state`` as float32 ``(S,)``, or :class:`FeatureMismatchError` for a wrong length."""
        q = np.asarray(state, dtype=np.float32).reshape(-1)
        if q.shape[0] != len(self.state_names):
            raise FeatureMismatchError(f"{self.source}: observation.state has {q.shape[0]} values, the policy "
                                       f"expects {len(self.state_names)}")
        return q

    def actions_from_output(self, out: Any) -> np.ndarray:
        """A model output as ``(n, A)`` (n ≤ ``n_action_steps``): accepts ``(1, n, A)``, ``(n, A)``, ``(1, A)``, ``(A,)``."""
        a = np.asarray(out, dtype=np.float64)
        if a.ndim == 3 and a.shape[0] == 1:
            a = a[0]
        elif a.ndim == 1:
            a = a[None, :]
        if a.ndim != 2 or a.shape[1] != len(self.action_names):
            raise FeatureMismatchError(f"{self.source}: model output shape {np.shape(out)} is not (1, chunk, "
                                       f"{len(self.action_names)}) / (chunk, {len(self.action_names)})")
        return a[: self.n_action_steps]

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


@dataclass
class PolicyObservation:
    """One observation in the policy's units: ``state`` (S,) float32, images HxWxC uint8 (RGB), task, and the
    control tick it was taken at (``timestep``: the first action of the chunk it yields belongs to that tick)."""

    state: np.ndarray
    images: dict[str, np.ndarray] = field(default_factory=dict)
    task: str = ""
    timestep: int = 0


class PolicyModel(Protocol):
    """What every loader returns."""

    spec: PolicySpec

    def predict(self, obs: PolicyObservation) -> np.ndarray:
        """Actions ``(n, A)`` (n ≤ ``spec.chunk_size``) in the policy's units and action order."""
        ...

    def reset(self) -> None:
        """Forget internal state (queues, ensembles) before a new episode."""
        ...




@runtime_checkable
class ClosablePolicyModel(PolicyModel, Protocol):
    """A model that holds something open (a policy server's connection) until :meth:`close`."""

    def close(self) -> None:
        ...
