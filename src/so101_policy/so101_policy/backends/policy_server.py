"""A LeRobot ``PolicyServer`` (``lerobot.async_inference``) as a policy: observations out, action chunks back.

LeRobot's async inference runs a policy on another machine (a GPU box) behind a gRPC ``PolicyServer``;
a robot-side client streams observations and receives chunks of timed actions. This backend is that
client for the policy node, speaking LeRobot 0.4.4's protocol with LeRobot's own pieces (no wire format
of ours): the ``AsyncInferenceStub`` of ``lerobot.transport.services_pb2_grpc``, its channel options
(``grpc_channel_options``), ``RemotePolicyConfig`` for ``SendPolicyInstructions``, a
``TimedObservation`` sent with ``send_bytes_in_chunks`` for ``SendObservations``, and the pickled
``TimedAction`` list ``GetActions`` returns.

What goes over the wire is what LeRobot's ``RobotClient`` sends for an ``so101_follower``: the raw
observation ``{"shoulder_pan.pos": deg, …, "gripper.pos": 0..100, "<cam>": HxWx3 uint8 RGB, "task": str}``
and ``lerobot_features`` built from it with LeRobot's ``hw_to_dataset_features``. The server resizes the
images to the policy's inputs and runs LeRobot's pre/post processors; the chunk comes back in the
follower's units and order, which :class:`~so101_policy.spec.PolicySpec` converts to rad.

One request at a time: :meth:`PolicyServerPolicy.predict` sends one observation (``must_go``: the server
runs it, no similarity filter) and waits for its chunk; queueing, alignment to ticks and LeRobot's chunk
aggregation happen in :class:`so101_policy.runner.AsyncPolicyRunner`, the same path as in-process
policies. The policy is loaded on the server at the first observation, once the cameras' sizes are
known (LeRobot's client takes them from its camera configs; here they are the frames' own).

Trust: the protocol is pickle both ways. The server unpickles what the robot sends (the server's own
business, as in LeRobot); the robot unpickles the server's reply with an allow-list (``TimedAction`` and
tensors, whose storages are read by ``torch.load(weights_only=True)``), so a server cannot run code on
the robot computer. No rclpy here.
"""

from __future__ import annotations

import io
import pickle  # nosec B403: replies are read with _ActionChunkUnpickler's allow-list only
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from so101_policy.spec import (
    IMAGE_PREFIX,
    LEROBOT_LANGUAGE_TYPES,
    MissingImageError,
    PolicyError,
    PolicyLoadError,
    PolicyObservation,
    PolicySpec,
)

__all__ = ["PolicyServerSettings", "PolicyServerPolicy", "connect_policy_server", "read_action_chunk"]


@dataclass(frozen=True)
class PolicyServerSettings:
    """Where the server is and what it loads (names as in LeRobot's ``RobotClientConfig``)."""

    server_address: str  # host:port
    policy_type: str  # act, smolvla, pi0, ... (lerobot.async_inference.constants.SUPPORTED_POLICIES)
    pretrained_name_or_path: str  # a checkpoint on the server machine, or a Hub repo id the server fetches
    actions_per_chunk: int
    policy_device: str = "cuda"  # the server's torch device
    timeout_s: float = 10.0  # reaching the server; one chunk's round trip
    load_timeout_s: float = 300.0  # the server loading the policy


class PolicyServerPolicy:
    """A :class:`~so101_policy.spec.PolicyModel` whose ``predict`` is one round trip to a LeRobot PolicyServer."""

    def __init__(self, settings: PolicyServerSettings, cameras: Sequence[str], channel: Any) -> None:
        from lerobot.transport import services_pb2, services_pb2_grpc

        self.settings = settings
        self.cameras = tuple(cameras)  # feature keys: observation.images.<cam>
        self._pb2 = services_pb2
        self._channel = channel
        self._stub = services_pb2_grpc.AsyncInferenceStub(channel)
        self._features: dict[str, dict] | None = None  # the lerobot_features the server was set up with
        self.spec = PolicySpec(
            kind="policy_server", source=f"{settings.pretrained_name_or_path} on {settings.server_address}",
            policy_type=settings.policy_type, units="lerobot", chunk_size=settings.actions_per_chunk,
            n_action_steps=settings.actions_per_chunk, uses_task=settings.policy_type in LEROBOT_LANGUAGE_TYPES)

    # ------------------------------------------------------------------ PolicyModel
    def predict(self, obs: PolicyObservation) -> np.ndarray:
        """Send ``obs`` (``must_go``), return its chunk ``(n, 6)`` in LeRobot units and the follower's action order."""
        import grpc
        from lerobot.async_inference.helpers import TimedObservation
        from lerobot.transport.utils import send_bytes_in_chunks

        images = self._camera_frames(obs)
        raw: dict[str, Any] = {name: float(v) for name, v in zip(self.spec.state_names, obs.state, strict=True)}
        features = self._lerobot_features({name: float for name in raw} | {cam: im.shape for cam, im in images.items()})
        if features != self._features:
            self._set_up(features)
        raw |= images
        raw["task"] = obs.task
        timed = TimedObservation(timestamp=time.time(), timestep=int(obs.timestep), observation=raw, must_go=True)
        try:
            self._stub.SendObservations(
                send_bytes_in_chunks(pickle.dumps(timed), self._pb2.Observation, silent=True),
                timeout=self.settings.timeout_s)
            # SendObservations returns once the server queued the observation: the reply to this call is
            # its chunk, or empty when the server failed on it (its log has the exception)
            reply = self._stub.GetActions(self._pb2.Empty(), timeout=self.settings.timeout_s)
        except grpc.RpcError as err:
            if err.code() == grpc.StatusCode.UNAVAILABLE:
                self._features = None  # a restarted server has no policy: set it up again on the next call
            raise PolicyError(f"policy server {self.settings.server_address}: {err.code().name}: "
                              f"{err.details()}") from err
        if not reply.data:
            raise PolicyError(f"policy server {self.settings.server_address} returned no actions for observation "
                              f"#{obs.timestep}: the server's log says why (e.g. a camera the policy does not read, "
                              f"cameras {[k.removeprefix(IMAGE_PREFIX) for k in self.cameras]} sent)")
        return self._chunk_array(read_action_chunk(reply.data), obs.timestep)

    def reset(self) -> None:
        """Flush the server's observation queue (``Ready``); the loaded policy stays."""
        import grpc

        if self._features is None:
            return
        try:
            self._stub.Ready(self._pb2.Empty(), timeout=self.settings.timeout_s)
        except grpc.RpcError:
            self._features = None

    def close(self) -> None:
        self._channel.close()

    # ------------------------------------------------------------------ helpers
    def _camera_frames(self, obs: PolicyObservation) -> dict[str, np.ndarray]:
        """The configured cameras' frames as LeRobot cameras give them: ``{<cam>: HxWx3 uint8 RGB}``."""
        missing = [k for k in self.cameras if k not in obs.images]
        if missing:
            raise MissingImageError(f"policy server observation needs image(s) {missing}; none received yet")
        frames = {}
        for key in self.cameras:
            image = np.asarray(obs.images[key])
            if image.ndim == 2:
                image = image[:, :, None]
            if image.ndim != 3 or image.shape[2] not in (1, 3) or image.dtype != np.uint8:
                raise MissingImageError(f"{key}: expected an HxWx3 (or HxWx1) uint8 image, got {image.dtype} "
                                        f"{image.shape}")
            frames[key.removeprefix(IMAGE_PREFIX)] = np.ascontiguousarray(np.repeat(image, 3, axis=2)
                                                                          if image.shape[2] == 1 else image)
        return frames

    @staticmethod
    def _lerobot_features(hw_features: dict[str, Any]) -> dict[str, dict]:
        from lerobot.datasets.utils import hw_to_dataset_features

        features: dict[str, dict] = hw_to_dataset_features(hw_features, "observation", use_video=False)
        return features

    def _set_up(self, features: dict[str, dict]) -> None:
        """``Ready`` + ``SendPolicyInstructions``: the server (re)loads the policy for these features."""
        import grpc
        from lerobot.async_inference.helpers import RemotePolicyConfig

        s = self.settings
        config = RemotePolicyConfig(s.policy_type, s.pretrained_name_or_path, features, s.actions_per_chunk,
                                    s.policy_device)
        try:
            self._stub.Ready(self._pb2.Empty(), timeout=s.timeout_s)
            self._stub.SendPolicyInstructions(self._pb2.PolicySetup(data=pickle.dumps(config)),
                                              timeout=s.load_timeout_s)
        except grpc.RpcError as err:
            raise PolicyError(f"policy server {s.server_address} could not load {s.policy_type!r} policy "
                              f"{s.pretrained_name_or_path!r} on {s.policy_device}: {err.code().name}: "
                              f"{err.details()}") from err
        self._features = features

    def _chunk_array(self, chunk: list[Any], timestep: int) -> np.ndarray:
        steps = [a.get_timestep() for a in chunk]
        if not chunk or steps != list(range(timestep, timestep + len(chunk))):
            raise PolicyError(f"policy server {self.settings.server_address} answered observation #{timestep} "
                              f"with actions for timesteps {steps}")
        return np.stack([a.get_action().float().numpy() for a in chunk]).astype(np.float64)


def connect_policy_server(settings: PolicyServerSettings, cameras: Sequence[str]) -> PolicyServerPolicy:
    """Check the settings, open a channel and wait until the server answers (:class:`PolicyLoadError` if not)."""
    try:
        import grpc
        from lerobot.async_inference.constants import SUPPORTED_POLICIES
        from lerobot.transport.utils import grpc_channel_options
    except ImportError as err:
        raise PolicyLoadError(f"the policy server client needs LeRobot 0.4.4 and grpcio ({err})") from err
    host, sep, port = settings.server_address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise PolicyLoadError(f"server_address {settings.server_address!r} is not host:port")
    if settings.policy_type not in SUPPORTED_POLICIES:
        raise PolicyLoadError(f"policy_type {settings.policy_type!r}: LeRobot's policy server serves "
                              f"{list(SUPPORTED_POLICIES)}")
    if not settings.pretrained_name_or_path:
        raise PolicyLoadError("pretrained_name_or_path is empty: name the checkpoint the server loads")
    if settings.actions_per_chunk < 1:
        raise PolicyLoadError(f"actions_per_chunk must be at least 1, got {settings.actions_per_chunk}")
    channel = grpc.insecure_channel(settings.server_address, grpc_channel_options())
    try:
        grpc.channel_ready_future(channel).result(timeout=settings.timeout_s)
    except grpc.FutureTimeoutError as err:
        channel.close()
        raise PolicyLoadError(
            f"no LeRobot policy server answers at {settings.server_address} within {settings.timeout_s:g} s; start "
            "one on the GPU machine (python -m lerobot.async_inference.policy_server --host=0.0.0.0 --port=8080)"
        ) from err
    return PolicyServerPolicy(settings, cameras, channel)


# ------------------------------------------------------------------------------ reading a reply safely
_REPLY_GLOBALS = frozenset({
    ("lerobot.async_inference.helpers", "TimedAction"),
    ("torch._utils", "_rebuild_tensor_v2"),
    ("collections", "OrderedDict"),
})


def _load_storage(data: bytes) -> Any:
    """What ``torch.storage._load_from_bytes`` does, without running pickled code (weights_only)."""
    import torch

    return torch.load(io.BytesIO(data), weights_only=True)


class _ActionChunkUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("torch.storage", "_load_from_bytes"):
            return _load_storage
        if (module, name) in _REPLY_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"the policy server's reply names {module}.{name}, which is not part of an "
                                     "action chunk: refused")


def read_action_chunk(data: bytes) -> list[Any]:
    """A ``GetActions`` reply → its ``list[TimedAction]``; anything else in it is an :class:`PolicyError`."""
    try:
        chunk = _ActionChunkUnpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, ValueError, RuntimeError) as err:
        raise PolicyError(f"unreadable reply from the policy server: {err}") from err
    import torch
    from lerobot.async_inference.helpers import TimedAction

    if not isinstance(chunk, list) or not all(isinstance(a, TimedAction) and isinstance(a.action, torch.Tensor)
                                              and a.action.ndim == 1 for a in chunk):
        raise PolicyError("the policy server's reply is not a list of TimedAction with one action vector each")
    return chunk
