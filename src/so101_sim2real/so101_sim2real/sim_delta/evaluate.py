"""Held-out evaluation: MuJoCo replay vs the real arm, nominal and with Δ, per joint, in closed loop."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from so101_common.joints import JOINT_NAMES
from so101_gaponet.metadata import GapModelMetadata
from so101_sim2real.sim_delta.filter import SimDeltaFilter
from so101_sim2real.sim_delta.recordings import Recording
from so101_sim2real.sim_delta.rollout import position_rmse, replay

__all__ = ["Evaluation", "evaluate", "ARM_JOINTS"]

ARM_JOINTS = JOINT_NAMES[:5]  # the gripper is reported too, but targets are on the arm joints


@dataclass(frozen=True)
class Evaluation:
    """Position RMSE (rad) pooled over the motions' frames: ``nominal`` and ``with_delta`` per joint."""

    motions: tuple[str, ...]
    nominal: np.ndarray  # (J,)
    with_delta: np.ndarray  # (J,)
    per_motion: dict[str, tuple[np.ndarray, np.ndarray]]  # name -> (nominal, with Δ) RMSE per joint

    @property
    def cut_percent(self) -> np.ndarray:
        return 100.0 * (1.0 - self.with_delta / self.nominal)

    def rows(self) -> list[dict[str, float | str]]:
        return [{"joint": name, "nominal_rmse_rad": float(self.nominal[j]), "delta_rmse_rad": float(self.with_delta[j]),
                 "cut_percent": float(self.cut_percent[j])} for j, name in enumerate(JOINT_NAMES)]


def evaluate(recordings: Sequence[Recording], delta_fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
             metadata: GapModelMetadata, nominal_cache: dict[str, np.ndarray] | None = None,
             progress: bool = False, reset_state: Callable[[], None] | None = None) -> Evaluation:
    """Replay every recording nominal and with the model's Δ (closed loop, the replay's filter; ``reset_state``: a recurrent model's)."""
    squares_nominal, squares_delta, frames = np.zeros(len(JOINT_NAMES)), np.zeros(len(JOINT_NAMES)), 0
    per_motion = {}
    for recording in tqdm(recordings, desc="held-out replays", unit="motion", disable=not progress):
        if nominal_cache is not None and recording.name in nominal_cache:
            nominal = nominal_cache[recording.name]
        else:
            nominal = replay(recording).position
            if nominal_cache is not None:
                nominal_cache[recording.name] = nominal
        corrected = replay(recording, SimDeltaFilter(delta_fn, metadata, recording.time, recording.command, reset_state)).position
        squares_nominal += ((nominal - recording.position) ** 2).sum(axis=0)
        squares_delta += ((corrected - recording.position) ** 2).sum(axis=0)
        frames += len(recording.time)
        per_motion[recording.name] = (position_rmse(nominal, recording.position), position_rmse(corrected, recording.position))
    return Evaluation(tuple(r.name for r in recordings), np.sqrt(squares_nominal / frames), np.sqrt(squares_delta / frames),
                      per_motion)
