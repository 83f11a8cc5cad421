"""The one place so101_fleet touches :mod:`so101_sim2real` (MuJoCo replay, pairing, gap metrics).

One function per step of the per-episode pipeline; re-point these imports when so101_sim2real's
modules move (replay/pairing/analysis). Nothing else in this package imports ``so101_sim2real``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from so101_common.paired_dataset import DatasetError, FaultSpan, PairedDataset
from so101_common.trajectory import JointTrajectory
from so101_sim2real.analysis.metrics import MetricsError
from so101_sim2real.analysis.report import ReportError, summarize
from so101_sim2real.pairing.align import AlignConfig, AlignmentError
from so101_sim2real.pairing.pair import PairError, Run, mujoco_replayer, pair_runs
from so101_sim2real.replay.core import joint_state_cdr
from so101_sim2real.replay.mujoco_backend import MujocoSim, MujocoSimError

__all__ = ["PIPELINE_ERRORS", "PairedDataset", "joint_state_cdr", "pair_with_mujoco", "gap_summary"]

PIPELINE_ERRORS: tuple[type[Exception], ...] = (PairError, AlignmentError, DatasetError, MujocoSimError, ReportError,
                                                MetricsError)
"""What replay, pairing and analysis raise for data they cannot use (reported per episode)."""


def pair_with_mujoco(name: str, state: JointTrajectory, command: JointTrajectory, rate_hz: float,
                     metadata: dict[str, Any], faults: Sequence[FaultSpan] = ()) -> PairedDataset:
    """Replay ``command`` in the built-in MuJoCo from the real initial state and pair it with ``state``:
    a one-episode paired dataset (``so101 pair --sim mujoco`` on one bag; ``faults``: the bag's servo-fault
    spans, marked in the episode as pairing marks them)."""
    run = Run(name, state, command, None, metadata, list(faults))
    return pair_runs([run], mujoco_replayer(_process_sim()), AlignConfig(rate_hz=rate_hz), progress=False)


@cache
def _process_sim() -> MujocoSim:
    """This process's MuJoCo arm, compiled once: compiling the model costs ~80 ms, several times a
    minute-long episode's replay; a replay resets the simulator completely, so reusing it changes no
    result. A Ray worker process runs one task at a time, so one simulator per process is never shared."""
    return MujocoSim()


def gap_summary(dataset: PairedDataset, source: str | Path) -> dict[str, Any]:
    """The gap summary of ``so101 analyze`` (per episode, quantity, metric and joint)."""
    return summarize(dataset, source=str(source))
