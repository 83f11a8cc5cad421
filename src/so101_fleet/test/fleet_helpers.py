"""Hand-made episode bags for the bad-input tests (written with the recorder's own writer)."""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from so101_common.joints import JOINT_NAMES
from so101_fleet.episode_job import EpisodeOutcome, EpisodeTask, ProcessConfig, process_episode
from so101_fleet.recorder_adapter import EpisodeMetadata, EpisodeWriter
from so101_fleet.sim2real_adapter import joint_state_cdr
from so101_fleet.simulate import diagnostics_cdr

START_NS = 1_767_600_000_000_000_000  # 2026-01-05T08:00:00Z


def write_bag(path: Path, robot_id: str = "arm_x", *, times: Sequence[float] | np.ndarray | None = None,
              names: Sequence[str] = JOINT_NAMES, commands: bool = True,
              diagnostic_levels: dict[str, int] | None = None, header_times: Sequence[float] | np.ndarray | None = None) -> Path:
    """A small bag: a gentle motion on /joint_states (+ /joint_command), one /diagnostics message.
    ``times`` are the bag (log) times in s from the start; ``header_times`` the stamps, if different."""
    times = list(np.arange(0, 3.0, 0.02)) if times is None else list(times)
    stamps = times if header_times is None else list(header_times)
    meta = EpisodeMetadata(name=path.name, robot_id=robot_id, task="test", start_time_ns=START_NS, operator="tester")
    with EpisodeWriter(path, meta, clock=itertools.count(step=0.01).__next__) as writer:  # chunks every ~50 writes
        writer.write("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray",
                     diagnostics_cdr(START_NS, levels=diagnostic_levels), START_NS)
        for t, stamp in zip(times, stamps, strict=True):
            q = np.array([0.3 * math.sin(1.3 * t + j) for j in range(len(names))])
            log_ns = START_NS + round(t * 1e9)
            writer.write("/joint_states", "sensor_msgs/msg/JointState",
                         joint_state_cdr(START_NS / 1e9 + stamp, tuple(names), q, q * 0, q * 0), log_ns)
            if commands:
                writer.write("/joint_command", "sensor_msgs/msg/JointState",
                             joint_state_cdr(START_NS / 1e9 + stamp, tuple(names), q), log_ns)
        writer.close(stop_time_ns=START_NS + round(times[-1] * 1e9))
    return path


def crash_worker_on_marked_episode(task: EpisodeTask, out: str, config: ProcessConfig) -> EpisodeOutcome:
    """The pipeline's episode function, except that the worker process dies on the episode named ``killed``."""
    if task.name == "killed":
        os._exit(9)  # as under the OOM killer: no exception, no cleanup
    return process_episode(task, out, config)
