"""Parameters of the compensator node (defaults, descriptions, ranges): the one source of their defaults."""

from __future__ import annotations

from dataclasses import dataclass

from so101_common import topics
from so101_common.joints import JOINT_NAMES
from so101_common.parameters import parameter
from so101_gaponet.bounds import COMPENSATOR_MAX_DELTA, COMPENSATOR_MAX_DELTA_RATE

__all__ = ["CompensatorParameters", "CHUNK_TOPIC"]

CHUNK_TOPIC = topics.POLICY_ACTION_CHUNK  # trajectory_msgs/JointTrajectory: the policy's upcoming commands


@dataclass(frozen=True)
class CompensatorParameters:
    model_path: str = parameter("", "GapONet model file (ONNX, or TorchScript: code, only files you trust); '' = passthrough")
    enabled: bool = parameter(True, "false = passthrough (Δ = 0); also switchable with the ~/enable service")
    rate_hz: float = parameter(0.0, "rate of the compensator's own clock (Hz); 0 = the model's rate. A model runs "
                                    "only at its own rate: another value stops the node at start-up",
                               low=0.0, high=1000.0)
    joints: list[str] = parameter(list(JOINT_NAMES), "joint order; must equal the model's joints")
    max_delta: list[float] = parameter([COMPENSATOR_MAX_DELTA] * len(JOINT_NAMES),
                                       "the deployment's hard cap on |Δ| per joint (rad): a model whose delta_bounds "
                                       "ask for more is refused at start-up, delta_bounds may only narrow it")
    max_delta_rate: list[float] = parameter([COMPENSATOR_MAX_DELTA_RATE] * len(JOINT_NAMES),
                                            "the deployment's hard cap on how fast Δ may change per joint (rad/s): a "
                                            "model whose delta_slew_limit asks for more is refused at start-up; a "
                                            "model without one is slew-limited to this")
    delta_bounds: list[float] = parameter([], "|Δ| limit per joint (rad), at most max_delta; empty = the model's",
                                          kind=float)
    delta_slew_limit: list[float] = parameter([], "largest change of Δ per step per joint (rad/step), at most "
                                                  "max_delta_rate / the model's rate; empty = the model's", kind=float)
    delta_smoothing_s: float = parameter(-1.0, "time constant of the first-order low-pass on Δ (s, 0 = off); "
                                               "negative = the model's", low=-1.0, high=10.0)
    feedback_gain: list[float] = parameter([], "integral feedback per joint (share of the tracking error added "
                                               "per step, 0..0.5); empty = the model's", kind=float)
    guard: bool = parameter(False, "per joint, shrink Δ towards zero when compensation is measured to make the "
                                   "tracking error larger than without it (reported on /diagnostics); for a model "
                                   "you do not trust: it also shrinks Δ where compensation helps (see the README)")
    command_timeout: float = parameter(0.5, "s without a policy command after which the compensator stops "
                                            "publishing (the safety filter's watchdog then holds the arm)",
                                       low=0.01, high=60.0)
    diagnostics_period: float = parameter(1.0, "period of the /diagnostics status (s)", low=0.01, high=3600.0)
