"""Replay a source in the in-process MuJoCo backend, optionally through a GapONet delta model.

The library behind ``so101 replay --sim mujoco``: no DDS, faster than real time. ``delta_model``
applies a GapONet model's Δ to every command from the simulated state (ASAP-style delta action: the
sim is driven with ``command + Δ``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tqdm import tqdm

from so101_common.joints import JOINT_NAMES
from so101_common.trajectory import JointTrajectory
from so101_sim2real.replay.core import ReplayError, ReplaySource
from so101_sim2real.replay.mujoco_backend import CommandFilter, MujocoSim, MujocoSimConfig

__all__ = ["delta_filter", "replay_in_mujoco"]


def delta_filter(model_path: Path, control_rate_hz: float | None,
                 command: JointTrajectory) -> tuple[CommandFilter, float]:
    """A closed-loop command filter ``target + Δ`` from a GapONet model, and the control rate it runs at.

    A ``sim_delta`` model (ASAP's delta action) reads the simulated state and the command stream,
    current and upcoming; a ``compensator`` model runs through the deploy-side compensator core
    (what the sim does with the compensator in front of it).
    """
    from so101_gaponet.compensator import Compensator, CompensatorConfig, CompensatorError
    from so101_gaponet.metadata import ModelFileError
    from so101_gaponet.model_file import load_model
    from so101_sim2real.sim_delta.filter import SimDeltaFilter

    try:
        model = load_model(model_path, joints=JOINT_NAMES, rate_hz=control_rate_hz)
        if model.metadata.role == "sim_delta":
            ordered = command.reordered(JOINT_NAMES)
            return (SimDeltaFilter(model.delta, model.metadata, ordered.time, ordered.position, model.reset_state),
                    float(model.metadata.rate_hz))
        compensator = Compensator(CompensatorConfig(joints=JOINT_NAMES), model)
    except (ModelFileError, CompensatorError, OSError) as err:
        raise ReplayError(f"cannot load delta model {model_path}: {err}") from err

    def apply(time: float, target: np.ndarray, position: np.ndarray, velocity: np.ndarray) -> np.ndarray:
        compensator.update_measured(position, velocity, stamp=time)
        return compensator.compensate(target, now=time).command

    return apply, float(model.metadata.rate_hz)


def replay_in_mujoco(source: ReplaySource, physics_dt: float = MujocoSimConfig.physics_dt,
                     control_rate_hz: float | None = None, kp: float | None = None, kd: float | None = None,
                     delta_model: Path | None = None, progress: bool = True) -> tuple[JointTrajectory, JointTrajectory]:
    """``(applied command, sim state)`` of ``source`` replayed in the in-process MuJoCo backend.

    ``kp``/``kd`` override the official servo gains for every joint; with ``delta_model`` the sim is
    driven with ``command + Δ`` at the model's rate (the applied command is then what it got).
    """
    command_filter: CommandFilter | None = None
    control_rate = control_rate_hz
    if delta_model is not None:
        command_filter, control_rate = delta_filter(delta_model, control_rate, source.command)
    defaults = MujocoSimConfig()
    config = MujocoSimConfig(physics_dt=physics_dt, control_rate_hz=control_rate,
                             kp=defaults.kp if kp is None else kp, kd=defaults.kd if kd is None else kd)
    sim = MujocoSim(config)
    applied_rows: list[tuple[float, list[float]]] = []

    def recording_filter(time: float, target: np.ndarray, position: np.ndarray, velocity: np.ndarray) -> np.ndarray:
        assert command_filter is not None
        value = command_filter(time, target, position, velocity)
        applied_rows.append((time, list(value)))
        return value

    with tqdm(total=1, unit="step", desc=f"mujoco {source.name}", leave=False, disable=not progress) as bar:
        def show(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        state = sim.simulate(source.command, source.initial_position,
                             command_filter=recording_filter if command_filter else None, progress=show)
    if not applied_rows:
        return source.command, state
    times, rows = zip(*applied_rows, strict=True)
    return JointTrajectory(list(times), list(rows)), state
