"""The deployment's caps on a gap model's Δ, and what a model file may ask within them.

Bounds belong to the deployment: the compensator's configuration (``max_delta``, ``max_delta_rate``)
and the replay's options cap |Δ| and its rate of change. A model's metadata (``delta_bounds``,
``delta_slew_limit``) may narrow them, never widen them: a file asking for more is refused with one line
naming the file and the key. A model without a slew limit gets the deployment's rate cap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from so101_gaponet.metadata import GapModelMetadata, ModelFileError

__all__ = ["COMPENSATOR_MAX_DELTA", "COMPENSATOR_MAX_DELTA_RATE", "SIM_DELTA_MAX_DELTA", "RELATIVE_TOLERANCE", "per_joint",
           "check_model_within_caps"]

COMPENSATOR_MAX_DELTA = 0.3
"""rad: the deployment's cap on a compensator's |Δ| per joint (the largest bound training derives from data:
a compensator is a correction, not a controller)."""
COMPENSATOR_MAX_DELTA_RATE = 5.0
"""rad/s: the deployment's cap on how fast a compensator's Δ may change per joint (training's default slew
limit, a third of the bound per step, is at most 0.1 rad/step = 5 rad/s at 50 Hz)."""
SIM_DELTA_MAX_DELTA = 0.5
"""rad: the replay's cap on a sim-delta model's |Δ| per joint (Δ must express ~100 ms of lag on fast motions)."""

# A bound written from the cap itself is not above it: metadata values pass through float32 (training), whose
# rounding is up to 6e-8 relative.
RELATIVE_TOLERANCE = 1e-6


def per_joint(value: float | Sequence[float], joints: Sequence[str], what: str) -> tuple[float, ...]:
    """``value`` for every joint (one number, or one per joint); finite and > 0, else :class:`ValueError`."""
    values = (float(value),) * len(joints) if isinstance(value, int | float) else tuple(float(v) for v in value)
    if len(values) != len(joints):
        raise ValueError(f"{what} needs one value or {len(joints)} (one per joint of {list(joints)}), got {len(values)}")
    if not all(math.isfinite(v) and v > 0 for v in values):
        raise ValueError(f"{what} must be finite and > 0, got {list(values)}")
    return values


def check_model_within_caps(metadata: GapModelMetadata, source: object, max_delta: Sequence[float],
                            max_delta_rate: Sequence[float] | None = None) -> None:
    """Refuse (:class:`ModelFileError`, one line naming ``source`` and the key) a model whose ``delta_bounds``
    exceed ``max_delta`` (rad, per joint of the metadata) or whose ``delta_slew_limit`` (rad/step at its rate)
    exceeds ``max_delta_rate`` (rad/s)."""
    for joint, bound, cap in zip(metadata.joints, metadata.delta_bounds, max_delta, strict=True):
        if bound > cap * (1 + RELATIVE_TOLERANCE):
            raise ModelFileError(f"{source}: delta_bounds: {joint} asks for |Δ| up to {bound:g} rad, above the "
                                 f"deployment's cap max_delta {cap:g} rad (a model file may narrow a bound, never widen it)")
    if max_delta_rate is None or metadata.delta_slew_limit is None:
        return
    for joint, slew, cap in zip(metadata.joints, metadata.delta_slew_limit, max_delta_rate, strict=True):
        rate = slew * metadata.rate_hz
        if rate > cap * (1 + RELATIVE_TOLERANCE):
            raise ModelFileError(f"{source}: delta_slew_limit: {joint} asks for {slew:g} rad/step ({rate:g} rad/s at "
                                 f"{metadata.rate_hz:g} Hz), above the deployment's cap max_delta_rate {cap:g} rad/s "
                                 "(a model file may narrow a bound, never widen it)")
