"""Parameters of the policy node: the one place for their defaults, descriptions and ranges.

``config/policy.yaml`` sets deployment values over these; the node declares every field with a
``ParameterDescriptor`` (``so101_ros.node_params``).
"""

from __future__ import annotations

from dataclasses import dataclass

from so101_common.parameters import parameter

__all__ = ["DEFAULT_RATE_HZ", "PolicyParameters", "AGGREGATE_FN_NAMES"]

DEFAULT_RATE_HZ = 30.0
"""The publish rate when neither ``rate_hz`` nor the policy's metadata gives one (LeRobot SO-101 datasets)."""

AGGREGATE_FN_NAMES = ("weighted_average", "latest_only", "average", "conservative")
"""LeRobot 0.4.4's chunk aggregation functions (``lerobot.async_inference.configs.AGGREGATE_FUNCTIONS``)."""


@dataclass(frozen=True)
class PolicyParameters:
    policy_path: str = parameter("", "LeRobot pretrained_model directory, or a TorchScript (.pt/.ts) / ONNX (.onnx) "
                                 "file with so101_policy metadata")
    policy_kind: str = parameter("auto", "auto (directory = lerobot, by suffix otherwise) | lerobot | torchscript | onnx")
    rate_hz: float = parameter(DEFAULT_RATE_HZ, "publish rate of policy/joint_command (Hz) = the rate the policy was "
                               "trained at; 0 = the rate in the policy's metadata", low=0.0, high=1000.0)
    device: str = parameter("cpu", "torch device for LeRobot/TorchScript policies: cpu, cuda, cuda:0")
    image_topics: list[str] = parameter([], "cameras for policies with observation.images.* inputs: "
                                        "'<cam>=<topic>' (cam = the name after observation.images.)")
    task: str = parameter("", "task string for language-conditioned policies (SmolVLA, pi0, ...); ignored by ACT")
    autostart: bool = parameter(False, "false: start stopped and wait for ~/start")
    on_miss: str = parameter("hold", "inference late and the queue empty: hold the last action (hold) or publish "
                             "nothing (none)")
    n_action_steps: int = parameter(0, "actions used per chunk (0 = the policy's n_action_steps)", low=0, high=10000)
    refill_threshold: int = parameter(-1, "ask for the next chunk when this many queued actions are left "
                                      "(-1 = a quarter of n_action_steps)", low=-1, high=10000)
    align_chunks: bool = parameter(True, "skip the actions of a new chunk whose time passed while the model ran")
    max_observation_age_s: float = parameter(0.5, "no new inference on a joint_states older than this (s); 0 = no "
                                             "check", low=0.0, high=60.0)
    warmup: bool = parameter(True, "one inference on a neutral observation at start-up")
    inference_delay_s: float = parameter(0.0, "extra latency added to every inference (s), to test the chunk "
                                         "alignment", low=0.0, high=10.0)
    diagnostics_period_s: float = parameter(1.0, "period of the /diagnostics status (s)", low=0.05, high=60.0)
    trust_remote_code: bool = parameter(False, "let a LeRobot folder's processors name classes outside LeRobot "
                                        "(runs their code; TorchScript files are code whatever this says)")
    allow_network: bool = parameter(False, "let loading reach the Hugging Face hub (default: forced offline)")
    # a LeRobot PolicyServer instead of policy_path (names as in LeRobot's RobotClientConfig)
    server_address: str = parameter("", "host:port of a LeRobot PolicyServer (python -m "
                                    "lerobot.async_inference.policy_server) that runs the policy; empty = run "
                                    "policy_path in this process")
    policy_type: str = parameter("", "with server_address: the LeRobot policy type the server loads (act, smolvla, "
                                 "pi0, pi05, diffusion, ...)")
    pretrained_name_or_path: str = parameter("", "with server_address: the checkpoint the server loads (a "
                                             "pretrained_model directory on the server machine, or a Hub repo id)")
    policy_device: str = parameter("cuda", "with server_address: the server's torch device (cuda, cuda:1, mps, cpu)")
    actions_per_chunk: int = parameter(0, "with server_address: actions per chunk the server returns (required)",
                                       low=0, high=10000)
    chunk_size_threshold: float = parameter(0.5, "with server_address: send the next observation when the queue "
                                            "holds this fraction of a chunk or less", low=0.0, high=1.0)
    aggregate_fn_name: str = parameter("", "a new chunk's action on a tick the queue already covers: "
                                       "weighted_average (0.3 queued + 0.7 new), latest_only, average, conservative "
                                       "(0.7 queued + 0.3 new); empty = weighted_average with server_address "
                                       "(LeRobot's default), latest_only in process")
    server_timeout_s: float = parameter(10.0, "with server_address: reaching the server, and one chunk's round "
                                        "trip, may take this long (s)", low=0.1, high=600.0)
    server_load_timeout_s: float = parameter(300.0, "with server_address: the server may take this long to load "
                                             "the policy (s)", low=1.0, high=3600.0)
