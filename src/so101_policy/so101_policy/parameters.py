"""Parameters of the policy node: the one place for their defaults, descriptions and ranges.

``config/policy.yaml`` sets deployment values over these; the node declares every field with a
``ParameterDescriptor`` (``so101_ros.node_params``).
"""

from __future__ import annotations

from dataclasses import dataclass

from so101_common.parameters import parameter

__all__ = ["DEFAULT_RATE_HZ", "PolicyParameters"]

DEFAULT_RATE_HZ = 30.0
"""The publish rate when neither ``rate_hz`` nor the policy's metadata gives one (LeRobot SO-101 datasets)."""


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
