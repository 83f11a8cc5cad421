"""A policy ready to run from the node's parameters: loaded, warmed up, its rate and cameras decided.

ROS-free: :class:`so101_policy.policy_node.PolicyNode` builds one :class:`PolicyDeployment` and maps it
onto topics, timers and services; the decisions (which cameras to subscribe, which rate to publish at,
what to warn about) are made and tested here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from so101_common.joints import JOINT_NAMES
from so101_policy.diagnostics import PolicyDiagnostics
from so101_policy.images import parse_image_topics
from so101_policy.loading import load_policy
from so101_policy.parameters import DEFAULT_RATE_HZ, PolicyParameters
from so101_policy.runner import AsyncPolicyRunner, PolicyRunner
from so101_policy.spec import PolicySpec

__all__ = ["PolicyDeployment", "deploy_policy", "publish_rate"]


@dataclass
class PolicyDeployment:
    """What the node runs: the asynchronous runner, its publish rate, the cameras to subscribe (key → topic)."""

    runner: AsyncPolicyRunner
    rate_hz: float
    image_topics: dict[str, str]
    diagnostics: PolicyDiagnostics
    warnings: list[str] = field(default_factory=list)  # for the node's log, once at start-up

    def summary(self, policy_path: str, autostart: bool) -> str:
        d = self.runner.describe()
        return (f"policy {d['policy_type']} ({d['kind']}) from {policy_path}: units {d['units']}, chunk "
                f"{d['chunk_size']} (using {d['n_action_steps_used']}, refill at {d['refill_threshold']}), "
                f"{self.rate_hz:g} Hz, images {self.image_topics or 'none'}; "
                f"{'running' if autostart else 'stopped: call ~/start'}")


def publish_rate(requested_hz: float, spec: PolicySpec) -> tuple[float, str | None]:
    """The rate to publish at (``requested_hz``; 0: the policy's own, else the default) and a warning when it
    differs from the rate the policy was trained at."""
    rate_hz = requested_hz if requested_hz > 0 else (spec.rate_hz or DEFAULT_RATE_HZ)
    if spec.rate_hz and abs(spec.rate_hz - rate_hz) > 1e-6:
        return rate_hz, (f"rate_hz {rate_hz:g} differs from the rate the policy was trained at "
                         f"({spec.rate_hz:g} Hz): chunks will play back at the wrong speed")
    return rate_hz, None


def deploy_policy(p: PolicyParameters) -> PolicyDeployment:
    """Load the policy ``p`` names and build its runner (raises the loaders' errors for a bad file or setting)."""
    model = load_policy(p.policy_path, p.policy_kind, p.device, trust_remote_code=p.trust_remote_code,
                        allow_network=p.allow_network)
    spec = model.spec
    warnings: list[str] = []
    mapped = parse_image_topics(p.image_topics)
    spec.require_images(list(mapped))  # a camera the policy needs and nobody mapped is an error
    unused = sorted(set(mapped) - set(spec.image_features))
    if unused:
        warnings.append(f"image_topics {unused} are not inputs of this policy: not subscribed")
    runner = PolicyRunner(model, task=p.task)
    if p.warmup:
        neutral = {k: np.zeros((s[1], s[2], 3), np.uint8) for k, s in spec.image_features.items()}
        runner.infer(np.zeros(len(JOINT_NAMES)), neutral)
        runner.reset()
    rate_hz, rate_warning = publish_rate(p.rate_hz, spec)
    if rate_warning:
        warnings.append(rate_warning)
    async_runner = AsyncPolicyRunner(runner, n_action_steps=p.n_action_steps or None,
                                     refill_threshold=p.refill_threshold, on_miss=p.on_miss,
                                     align_chunks=p.align_chunks, max_observation_age_s=p.max_observation_age_s,
                                     extra_latency_s=p.inference_delay_s)
    diagnostics = PolicyDiagnostics(spec, rate_hz, async_runner.n_action_steps, p.max_observation_age_s)
    return PolicyDeployment(async_runner, rate_hz, {k: v for k, v in mapped.items() if k in spec.image_features},
                            diagnostics, warnings)
