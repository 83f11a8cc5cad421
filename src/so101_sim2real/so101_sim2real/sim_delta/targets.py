"""Supervised Δ targets by inverse dynamics: per frame, the sim command that makes MuJoCo follow the real arm.

MuJoCo's position servo applies ``kp·(u − q) − kv·q̇`` (clipped to the force range). With the real
trajectory smoothed and differentiated (Savitzky–Golay: the real encoder is quantised to
0.0015 rad, so raw second differences are noise), ``mj_inverse`` gives per frame the joint torque
``τ`` the motion needs (gravity, inertia, Coriolis, the model's passive damping and friction), hence
``u = q + (τ + kv·q̇) / kp``. The command is held over a control period, so the frame's target is
the inverse command at the middle of that period (mean of the two ends). ``Δ* = u* − a``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import mujoco
import numpy as np
from scipy.signal import savgol_filter

from so101_common.joints import JOINT_NAMES
from so101_gaponet.inputs import GRAVITY_JOINTS

if TYPE_CHECKING:
    from so101_sim2real.replay.mujoco_backend import MujocoSim

__all__ = ["SmoothedMotion", "smooth_motion", "inverse_commands", "gravity_coefficients"]

SMOOTHING_WINDOW = 9  # frames (180 ms at 50 Hz): wide enough for the quantisation, shorter than the motions' features
SMOOTHING_ORDER = 3
GRAVITY_FIT_POSES = 2000  # uniformly drawn over the joint ranges (seeded: the same weights on every training run)


@dataclass(frozen=True)
class SmoothedMotion:
    position: np.ndarray  # (N, J) rad
    velocity: np.ndarray  # (N, J) rad/s
    acceleration: np.ndarray  # (N, J) rad/s²


def smooth_motion(position: np.ndarray, dt: float, window: int = SMOOTHING_WINDOW, order: int = SMOOTHING_ORDER) -> SmoothedMotion:
    """Savitzky–Golay smoothed position and its first two derivatives (same length, edges fitted)."""
    window = min(window, len(position) - (1 - len(position) % 2))
    return SmoothedMotion(*(savgol_filter(position, window, order, deriv=d, delta=dt, axis=0, mode="interp")
                            for d in (0, 1, 2)))


def inverse_commands(sim: MujocoSim, motion: SmoothedMotion) -> np.ndarray:
    """``(N, J)`` sim targets (rad) that make ``sim`` (a :class:`so101_sim2real.replay.mujoco_backend.MujocoSim`) follow ``motion``."""
    model, data = sim.model, mujoco.MjData(sim.model)
    qpos = np.array([model.jnt_qposadr[model.joint(name).id] for name in JOINT_NAMES])
    dof = np.array([model.jnt_dofadr[model.joint(name).id] for name in JOINT_NAMES])
    kp = np.asarray(sim.config.kp)
    kv = np.asarray(sim.config.kd)
    limit = np.asarray(sim.config.force_limit)
    torque = np.empty_like(motion.position)
    for i in range(len(motion.position)):
        data.qpos[qpos] = motion.position[i]
        data.qvel[dof] = motion.velocity[i]
        data.qacc[dof] = motion.acceleration[i]
        mujoco.mj_inverse(model, data)
        torque[i] = data.qfrc_inverse[dof]
    torque = np.clip(torque, -limit, limit)  # the servo cannot give more; the residual stays a gap
    instant = motion.position + (torque + kv * motion.velocity) / kp
    held = instant.copy()
    held[:-1] = 0.5 * (instant[:-1] + instant[1:])
    return held


def gravity_coefficients(sim: MujocoSim) -> np.ndarray:
    """``(3, 2)``: per pitch link ``k`` (what ``GRAVITY_JOINTS[k]`` moves, minus what the next one moves), the
    ``(cos, sin)`` weights of its gravity torque, N·m, so that at rest the torque on gravity joint ``j`` is
    ``Σ_{k ≥ j} c_k cos(s_k) + d_k sin(s_k)`` with ``s_k`` the sum of the gravity joints' angles up to ``k``
    (their axes are parallel and horizontal).

    That is exact for a chain of parallel axes (the pan axis is vertical); the wrist roll and the
    gripper move the last link's centre of mass a little (residual ~0.002 N·m of 0.08). Fitted by least
    squares to MuJoCo's own bias force (``qfrc_bias`` at zero velocity) on uniformly drawn poses.
    """
    model, data = sim.model, mujoco.MjData(sim.model)
    qpos = np.array([model.jnt_qposadr[model.joint(name).id] for name in JOINT_NAMES])
    dof = np.array([model.jnt_dofadr[model.joint(name).id] for name in JOINT_NAMES])
    lower, upper = (model.jnt_range[[model.joint(name).id for name in JOINT_NAMES], i] for i in (0, 1))
    poses = np.random.default_rng(0).uniform(lower, upper, (GRAVITY_FIT_POSES, len(JOINT_NAMES)))
    pitch_index = [JOINT_NAMES.index(name) for name in GRAVITY_JOINTS]
    torque = np.empty((len(poses), len(GRAVITY_JOINTS)))
    for i, pose in enumerate(poses):
        data.qpos[qpos] = pose
        data.qvel[:] = 0.0
        mujoco.mj_forward(model, data)
        torque[i] = data.qfrc_bias[dof[pitch_index]]
    pitch = np.cumsum(poses[:, pitch_index], axis=1)
    links = len(GRAVITY_JOINTS)
    # joint j's torque: the sum of the terms of links j..; one (cos, sin) weight pair per link, shared by the joints
    design = np.zeros((len(poses), links, 2 * links))
    for j in range(links):
        for k in range(j, links):
            design[:, j, 2 * k], design[:, j, 2 * k + 1] = np.cos(pitch[:, k]), np.sin(pitch[:, k])
    solution, *_ = np.linalg.lstsq(design.reshape(-1, 2 * links), torque.reshape(-1), rcond=None)
    return solution.reshape(links, 2)
