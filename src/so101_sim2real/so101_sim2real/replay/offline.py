"""Replay a source in the in-process MuJoCo backend, optionally through a GapONet delta model.

The library behind ``so101 replay --sim mujoco``: no DDS, faster than real time. ``delta_model``
applies a GapONet model's Δ to every command from the simulated state (ASAP-style delta action: the
sim is driven with ``command + Δ``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
from tqdm import tqdm

from so101_common.joints import JOINT_NAMES
from so101_common.trajectory import JointTrajectory
from so101_sim2real.replay.core import ReplayError, ReplaySource
from so101_sim2real.replay.mujoco_backend import CommandFilter, MujocoSim, MujocoSimConfig

__all__ = ["delta_filter", "replay_in_mujoco"]

_LOG = logging.getLogger(__name__)


def delta_filter(model_path: Path, control_rate_hz: float | None, command: JointTrajectory,
                 max_delta: float | None = None) -> tuple[CommandFilter, float, Callable[[], str]]:
    """A closed-loop command filter ``target + Δ`` from a GapONet model, the control rate it runs at, and a
    function that says, once the replay ran, how often the model's Δ left its bounds ('' if never).

    A ``sim_delta`` model (ASAP's delta action) reads the simulated state and the command stream,
    current and upcoming; a ``compensator`` model runs through the deploy-side compensator core
    (what the sim does with the compensator in front of it). ``max_delta`` (rad, every joint) caps |Δ|: a
    model whose ``delta_bounds`` ask for more is refused (default: :data:`SIM_DELTA_MAX_DELTA` for a
    sim-delta model, the compensator's deployment cap for a compensator). A non-finite Δ stops the replay
    (:class:`ReplayError`): the result would be an uncompensated replay presented as a compensated one.
    """
    from so101_gaponet.bounds import COMPENSATOR_MAX_DELTA, SIM_DELTA_MAX_DELTA, check_model_within_caps, per_joint
    from so101_gaponet.compensator import Compensator, CompensatorConfig, CompensatorError
    from so101_gaponet.metadata import ModelFileError
    from so101_gaponet.model_file import load_model
    from so101_sim2real.sim_delta.filter import SimDeltaFault, SimDeltaFilter

    try:
        model = load_model(model_path, joints=JOINT_NAMES, rate_hz=control_rate_hz)
        meta = model.metadata
        if meta.role == "sim_delta":
            caps = per_joint(SIM_DELTA_MAX_DELTA if max_delta is None else max_delta, JOINT_NAMES, "--max-delta")
            check_model_within_caps(meta, model_path, caps)
            ordered = command.reordered(JOINT_NAMES)
            sim_delta = SimDeltaFilter(model.delta, meta, ordered.time, ordered.position, model.reset_state,
                                       stop_on_fault=True)

            def apply_sim_delta(time: float, target: np.ndarray, position: np.ndarray, velocity: np.ndarray) -> np.ndarray:
                try:
                    return sim_delta(time, target, position, velocity)
                except SimDeltaFault as err:
                    raise ReplayError(f"delta model {model_path}: {err}; stopped (a replay without its Δ is not "
                                      "the compensated replay asked for)") from None

            return apply_sim_delta, float(meta.rate_hz), lambda: _beyond(sim_delta.out_of_bounds, len(sim_delta.deltas))
        compensator = Compensator(CompensatorConfig(
            joints=JOINT_NAMES, max_delta=COMPENSATOR_MAX_DELTA if max_delta is None else max_delta), model)
    except (ModelFileError, CompensatorError, OSError, ValueError) as err:
        text = str(err).removeprefix(f"{model_path}: ")  # the file is named once
        raise ReplayError(f"cannot load delta model {model_path}: {text}") from err

    def apply(time: float, target: np.ndarray, position: np.ndarray, velocity: np.ndarray) -> np.ndarray:
        compensator.update_measured(position, velocity, stamp=time)
        result = compensator.compensate(target, now=time)
        if result.fault:
            raise ReplayError(f"delta model {model_path}: {compensator.status()['last_fault']}; stopped (a replay "
                              "without its Δ is not the compensated replay asked for)")
        return result.command

    def beyond() -> str:
        status = compensator.status()
        return _beyond(status["model_out_of_bounds_steps"], status["compensated_steps"])

    return apply, float(meta.rate_hz), beyond


def _beyond(count: int, ticks: int) -> str:
    return f"the model asked for a Δ beyond its bounds on {count} of {ticks} control ticks (clipped)" if count else ""


def replay_in_mujoco(source: ReplaySource, physics_dt: float = MujocoSimConfig.physics_dt,
                     control_rate_hz: float | None = None, kp: float | None = None, kd: float | None = None,
                     delta_model: Path | None = None, progress: bool = True,
                     max_delta: float | None = None) -> tuple[JointTrajectory, JointTrajectory]:
    """``(applied command, sim state)`` of ``source`` replayed in the in-process MuJoCo backend.

    ``kp``/``kd`` override the official servo gains for every joint; with ``delta_model`` the sim is
    driven with ``command + Δ`` at the model's rate (the applied command is then what it got), |Δ| capped
    by ``max_delta`` (see :func:`delta_filter`).
    """
    command_filter: CommandFilter | None = None
    control_rate = control_rate_hz
    beyond_bounds: Callable[[], str] = str
    if delta_model is not None:
        command_filter, control_rate, beyond_bounds = delta_filter(delta_model, control_rate, source.command, max_delta)
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
    if beyond_bounds():
        _LOG.warning("%s: %s", delta_model, beyond_bounds())
    if not applied_rows:
        return source.command, state
    times, rows = zip(*applied_rows, strict=True)
    return JointTrajectory(list(times), list(rows)), state
