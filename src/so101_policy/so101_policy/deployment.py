"""A policy ready to run from the node's parameters: loaded, warmed up, its rate and cameras decided.

ROS-free: :class:`so101_policy.policy_node.PolicyNode` builds one :class:`PolicyDeployment` and maps it
onto topics, timers and services; the decisions (which backend, which cameras to subscribe, which rate to
publish at, how chunks are aggregated, what to warn about) are made and tested here. The policy runs in
this process (``policy_path``) or on a LeRobot policy server (``server_address``); either way its chunks
go through the same :class:`~so101_policy.runner.AsyncPolicyRunner` and out on the same topic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from so101_common.joints import JOINT_NAMES
from so101_policy.diagnostics import PolicyDiagnostics
from so101_policy.images import parse_image_topics
from so101_policy.loading import load_policy
from so101_policy.parameters import AGGREGATE_FN_NAMES, DEFAULT_RATE_HZ, PolicyParameters
from so101_policy.runner import Aggregate, AsyncPolicyRunner, PolicyRunner
from so101_policy.spec import PolicyLoadError, PolicyModel, PolicySpec

__all__ = ["PolicyDeployment", "deploy_policy", "publish_rate", "aggregate_function", "refill_threshold_for"]

# the parameters that belong to one backend only (PolicyParameters' defaults mean "not set")
_IN_PROCESS_ONLY = ("policy_path", "n_action_steps", "refill_threshold")
_SERVER_ONLY = ("policy_type", "pretrained_name_or_path", "actions_per_chunk")


@dataclass
class PolicyDeployment:
    """What the node runs: the asynchronous runner, its publish rate, the cameras to subscribe (key → topic)."""

    runner: AsyncPolicyRunner
    rate_hz: float
    image_topics: dict[str, str]
    diagnostics: PolicyDiagnostics
    aggregate_fn_name: str = "latest_only"
    warnings: list[str] = field(default_factory=list)  # for the node's log, once at start-up

    @property
    def source(self) -> str:
        """Where the policy comes from: its path, or its checkpoint on the policy server."""
        return self.runner.spec.source

    def summary(self, autostart: bool) -> str:
        d = self.runner.describe()
        return (f"policy {d['policy_type']} ({d['kind']}) from {self.source}: units {d['units']}, chunk "
                f"{d['chunk_size']} (using {d['n_action_steps_used']}, refill at {d['refill_threshold']}, "
                f"{self.aggregate_fn_name}), {self.rate_hz:g} Hz, images {self.image_topics or 'none'}; "
                f"{'running' if autostart else 'stopped: call ~/start'}")


def publish_rate(requested_hz: float, spec: PolicySpec) -> tuple[float, str | None]:
    """The rate to publish at (``requested_hz``; 0: the policy's own, else the default) and a warning when it
    differs from the rate the policy was trained at."""
    rate_hz = requested_hz if requested_hz > 0 else (spec.rate_hz or DEFAULT_RATE_HZ)
    if spec.rate_hz and abs(spec.rate_hz - rate_hz) > 1e-6:
        return rate_hz, (f"rate_hz {rate_hz:g} differs from the rate the policy was trained at "
                         f"({spec.rate_hz:g} Hz): chunks will play back at the wrong speed")
    return rate_hz, None


def aggregate_function(name: str) -> Aggregate | None:
    """LeRobot's chunk aggregation function ``name`` (None for ``latest_only``: the new chunk replaces the queue,
    which is what LeRobot's ``latest_only`` does)."""
    if name not in AGGREGATE_FN_NAMES:
        raise PolicyLoadError(f"aggregate_fn_name {name!r} is not one of LeRobot's {list(AGGREGATE_FN_NAMES)}")
    if name == "latest_only":
        return None
    from lerobot.async_inference.configs import get_aggregate_function

    aggregate: Aggregate = get_aggregate_function(name)
    return aggregate


def refill_threshold_for(chunk_size_threshold: float, actions_per_chunk: int) -> int:
    """LeRobot's ``chunk_size_threshold`` (send when ``queue / chunk <= threshold``) as a queue length."""
    return max(k for k in range(actions_per_chunk + 1) if k / actions_per_chunk <= chunk_size_threshold)


def _check_backend(p: PolicyParameters) -> None:
    defaults = PolicyParameters()
    if p.server_address:
        mixed = [name for name in _IN_PROCESS_ONLY if getattr(p, name) != getattr(defaults, name)]
        if mixed:
            raise PolicyLoadError(f"{mixed} are for a policy run in this process; with server_address set, the "
                                  "server loads pretrained_name_or_path and chunks follow actions_per_chunk and "
                                  "chunk_size_threshold")
    else:
        mixed = [name for name in _SERVER_ONLY if getattr(p, name) != getattr(defaults, name)]
        if mixed:
            raise PolicyLoadError(f"{mixed} are for a LeRobot policy server: set server_address too (or "
                                  "policy_path alone to run the policy here)")


def deploy_policy(p: PolicyParameters) -> PolicyDeployment:
    """Load (or connect to) the policy ``p`` names and build its runner (raises the backends' errors for a bad
    file, server or setting)."""
    _check_backend(p)
    mapped = parse_image_topics(p.image_topics)
    warnings: list[str] = []
    model: PolicyModel
    if p.server_address:
        from so101_policy.backends.policy_server import PolicyServerSettings, connect_policy_server

        settings = PolicyServerSettings(p.server_address, p.policy_type, p.pretrained_name_or_path,
                                        p.actions_per_chunk, p.policy_device, p.server_timeout_s,
                                        p.server_load_timeout_s)
        aggregate_name = p.aggregate_fn_name or "weighted_average"
        aggregate = aggregate_function(aggregate_name)  # a bad name fails before the connection is made
        model = connect_policy_server(settings, cameras=list(mapped))  # the server reads every mapped camera
        images = mapped
        n_action_steps, refill = None, refill_threshold_for(p.chunk_size_threshold, p.actions_per_chunk)
        runner = PolicyRunner(model, task=p.task)  # the server loads the policy at the first observation
    else:
        aggregate_name = p.aggregate_fn_name or "latest_only"
        aggregate = aggregate_function(aggregate_name)
        model = load_policy(p.policy_path, p.policy_kind, p.device, trust_remote_code=p.trust_remote_code,
                            allow_network=p.allow_network)
        spec = model.spec
        spec.require_images(list(mapped))  # a camera the policy needs and nobody mapped is an error
        unused = sorted(set(mapped) - set(spec.image_features))
        if unused:
            warnings.append(f"image_topics {unused} are not inputs of this policy: not subscribed")
        images = {k: v for k, v in mapped.items() if k in spec.image_features}
        n_action_steps, refill = p.n_action_steps or None, p.refill_threshold
        runner = PolicyRunner(model, task=p.task)
        if p.warmup:
            neutral = {k: np.zeros((s[1], s[2], 3), np.uint8) for k, s in spec.image_features.items()}
            runner.infer(np.zeros(len(JOINT_NAMES)), neutral)
            runner.reset()
    rate_hz, rate_warning = publish_rate(p.rate_hz, model.spec)
    if rate_warning:
        warnings.append(rate_warning)
    async_runner = AsyncPolicyRunner(runner, n_action_steps=n_action_steps, refill_threshold=refill,
                                     on_miss=p.on_miss, align_chunks=p.align_chunks, aggregate=aggregate,
                                     max_observation_age_s=p.max_observation_age_s,
                                     extra_latency_s=p.inference_delay_s)
    diagnostics = PolicyDiagnostics(model.spec, rate_hz, async_runner.n_action_steps, p.max_observation_age_s)
    return PolicyDeployment(async_runner, rate_hz, images, diagnostics, aggregate_name, warnings)
