"""The sim-delta network's input stage, inside the exported graph: relative command features.

The file's inputs are the contract's (normalised absolute history and command rows). What the real
arm does to a command depends mostly on where the command goes *relative to where it is* (lag,
friction, backlash act on the change), and only for gravity on the absolute pose. Absolute command
histories make a network extrapolate on poses outside its training range (measured: on the
held-out ``boundary_exploration``, which turns the wrist past the training motions' range, an MLP
on absolute commands made wrist_roll 6× worse than nominal). So this stage hands the inner network

- history: position columns as ``(q(t−k) − a(t)) / scale`` and velocity columns as they are, both
  zeroed unless ``state_inputs`` (see the package README for when state helps), previous-command
  columns as ``(a(t−k) − a(t)) / scale``;
- command rows: row 0 on the joints gravity loads (shoulder_lift, elbow_flex, wrist_flex) MuJoCo's
  gravity torque on the joint at the commanded pose (:class:`GravityTorque`, standardised over the
  training samples), 0 on the others; rows ``k ≥ 1`` as ``(a(t+k) − a(t)) / scale``;

with the same shapes, so every architecture of :mod:`so101_gaponet.models` sits behind it unchanged.

**Gravity torque, not the pose's angles**: the sag a position servo shows under gravity, which the real
servo's stiffness and deadband make differ from MuJoCo's, follows the joint's gravity torque, and for
wrist flex that depends on the lift + elbow + wrist flex angle sum, which a per-joint model does not see
from its own angle. The torque is a bounded function of the pose (within its ``(cos, sin)`` weights
whatever the pose), and a linear model in it is the servo's linear sag (measured in leave-motions-out
cross-validation on the training motions, package README: elbow +3.8, wrist flex +1.1 points over the
commanded angles).

**Play-operator memory** (``play_radii``, the shipped formulation): where a joint rests inside its
backlash/friction band depends on how it got there, often seconds ago, past any history window
(measured: history 50 rows did not help). A play (backlash) operator of radius ``r`` on a joint's
command stream, ``y_t = clip(y_{t−1}, a_t − r, a_t + r)``, carries exactly that: ``y − a`` is
``±r`` after a move in one direction, and stays there through a hold of any length. For each
radius the offsets ``(y − a) / r`` reach the inner network as ``R`` more command rows, one per
radius (so a per-joint model sees its own joint's operators only). The operator's output is the
model's recurrent state (:class:`PlayStateModel`, the exported graph); in training the offsets
come from :func:`..features.play_offsets` over the whole recording, as the inner network's extra
command rows (:meth:`RelativeCommandInputs.forward`, the teacher-forced view).
"""

# no `from __future__ import annotations`: TorchScript reads the buffers' class annotations as objects
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from so101_common.joints import JOINT_NAMES
from so101_gaponet.inputs import GRAVITY_JOINTS
from so101_gaponet.metadata import Normalisation
from so101_gaponet.models import ArchConfig, PerJointLinear

__all__ = ["RelativeCommandInputs", "PlayStateModel", "PerJointMLP", "LinearResidual", "GravityTorque", "GRAVITY_JOINTS"]


class GravityTorque(nn.Module):
    """MuJoCo's gravity torque (N·m) on each gravity joint at a pose ``(B, 1, J)`` (rad), 0 on the other joints.

    ``coefficients (3, 2)``: :func:`.targets.gravity_coefficients` (per pitch link, the ``(cos, sin)`` weights);
    the torque on gravity joint ``j`` sums the terms of the links ``k ≥ j``, each at its pitch ``s_k``, the sum
    of the gravity joints' angles up to ``k``. Bounded by the weights whatever the pose.
    """

    select: torch.Tensor  # (J, 3) the gravity joints' angles from a pose
    cumulative: torch.Tensor  # (3, 3) their running sums: each link's pitch
    cos_weight: torch.Tensor  # (3,)
    sin_weight: torch.Tensor  # (3,)
    place: torch.Tensor  # (3, J) link k's term on the gravity joints j ≤ k

    def __init__(self, coefficients: np.ndarray) -> None:
        super().__init__()
        links = len(GRAVITY_JOINTS)
        columns = [JOINT_NAMES.index(name) for name in GRAVITY_JOINTS]
        select = np.zeros((len(JOINT_NAMES), links), dtype=np.float32)
        place = np.zeros((links, len(JOINT_NAMES)), dtype=np.float32)
        for k, column in enumerate(columns):
            select[column, k] = 1.0
            place[k, columns[:k + 1]] = 1.0
        coefficients = np.asarray(coefficients, dtype=np.float32).reshape(links, 2)
        self.register_buffer("select", torch.from_numpy(select))
        self.register_buffer("cumulative", torch.triu(torch.ones(links, links)))
        self.register_buffer("cos_weight", torch.from_numpy(coefficients[:, 0].copy()))
        self.register_buffer("sin_weight", torch.from_numpy(coefficients[:, 1].copy()))
        self.register_buffer("place", torch.from_numpy(place))

    def forward(self, pose: torch.Tensor) -> torch.Tensor:
        pitch = pose @ self.pitch_map()
        return self.from_terms(torch.cos(pitch), torch.sin(pitch))

    def pitch_map(self) -> torch.Tensor:
        """``(J, 3)``: each link's pitch from a pose, a linear map."""
        return self.select @ self.cumulative

    def from_terms(self, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """The torques from the links' ``cos``/``sin`` of pitch ``(..., 3)``: a linear map."""
        return (cos * self.cos_weight + sin * self.sin_weight) @ self.place


class RelativeCommandInputs(nn.Module):
    """``net(transform(history, commands))``; ``net`` is any GapONet network of the same input shapes."""

    # buffers (constants of the graph, saved with it)
    position_mean: torch.Tensor
    position_std: torch.Tensor
    previous_mean: torch.Tensor
    previous_std: torch.Tensor
    command_mean: torch.Tensor
    command_std: torch.Tensor
    inverse_scale: torch.Tensor
    state_mask: torch.Tensor
    radii: torch.Tensor  # (R, 1) rad
    inverse_radii: torch.Tensor
    torque_mean: torch.Tensor  # (J,) N·m
    torque_inverse_std: torch.Tensor  # (J,) 1/(N·m), 0 on the joints gravity does not load

    def __init__(self, net: nn.Module, normalisation: Normalisation, relative_scale: np.ndarray, state_inputs: bool,
                 future_steps: int, gravity: GravityTorque, torque_mean: np.ndarray, torque_std: np.ndarray,
                 play_radii: Sequence[float] = ()) -> None:
        """``torque_mean``/``torque_std (J,)``: the gravity torque's standardisation (over the training samples)."""
        super().__init__()
        joints = len(JOINT_NAMES)
        self.net, self.joints, self.future_steps, self.gravity = net, joints, future_steps, gravity
        loaded = np.array([1.0 if n in GRAVITY_JOINTS else 0.0 for n in JOINT_NAMES], dtype=np.float32)
        self.register_buffer("torque_mean", torch.from_numpy(np.asarray(torque_mean, dtype=np.float32) * loaded))
        self.register_buffer("torque_inverse_std", torch.from_numpy(loaded / np.maximum(np.asarray(torque_std, dtype=np.float32), 1e-6)))
        radii = np.asarray(play_radii, dtype=np.float32).reshape(-1, 1)
        if (radii <= 0).any():
            raise ValueError(f"play radii must be > 0, got {list(play_radii)}")
        self.plays = len(radii)
        self.register_buffer("radii", torch.from_numpy(radii))
        self.register_buffer("inverse_radii", torch.from_numpy(1.0 / np.maximum(radii, 1e-9)))
        history_mean = np.asarray(normalisation.history_mean, dtype=np.float32)
        history_std = np.asarray(normalisation.history_std, dtype=np.float32)
        self.register_buffer("position_mean", torch.from_numpy(history_mean[:joints]))
        self.register_buffer("position_std", torch.from_numpy(history_std[:joints]))
        self.register_buffer("previous_mean", torch.from_numpy(history_mean[2 * joints:]))
        self.register_buffer("previous_std", torch.from_numpy(history_std[2 * joints:]))
        self.register_buffer("command_mean", torch.tensor(normalisation.command_mean, dtype=torch.float32))
        self.register_buffer("command_std", torch.tensor(normalisation.command_std, dtype=torch.float32))
        self.register_buffer("inverse_scale", torch.from_numpy(1.0 / np.asarray(relative_scale, dtype=np.float32)))
        self.register_buffer("state_mask", torch.tensor(1.0 if state_inputs else 0.0))

    def raw_commands(self, commands: torch.Tensor) -> torch.Tensor:
        return commands * self.command_std + self.command_mean

    def transform(self, history: torch.Tensor, commands: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The inner network's inputs in the teacher-forced view: ``commands`` holds the ``future_steps``
        command rows, then (with play radii) the ``R`` play offsets ``y − a`` (rad) in the commands' normalisation."""
        steps = self.future_steps
        return self.features(history, commands[:, :steps], self.raw_commands(commands[:, steps:]))

    def features(self, history: torch.Tensor, commands: torch.Tensor, play_offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``history``/``commands`` normalised as in the file, ``play_offsets (B, R, J)`` in rad."""
        return self.relative_features(history, commands, play_offsets, self.torque_feature(self.raw_commands(commands[:, :1, :])))

    def torque_feature(self, current: torch.Tensor) -> torch.Tensor:
        """``(B, 1, J)``: the standardised gravity torque at the raw commanded pose ``current (B, 1, J)`` (0 off the gravity joints)."""
        return (self.gravity(current) - self.torque_mean) * self.torque_inverse_std

    def relative_features(self, history: torch.Tensor, commands: torch.Tensor, play_offsets: torch.Tensor,
                          torque: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`features` with the torque row given: an affine function of all four inputs."""
        joints = self.joints
        raw_commands = self.raw_commands(commands)
        current = raw_commands[:, :1, :]
        raw_previous = history[:, :, 2 * joints:] * self.previous_std + self.previous_mean
        previous = (raw_previous - current) * self.inverse_scale
        upcoming = (raw_commands[:, 1:, :] - current) * self.inverse_scale
        raw_position = history[:, :, :joints] * self.position_std + self.position_mean
        position = (raw_position - current) * self.inverse_scale * self.state_mask
        velocity = history[:, :, joints:2 * joints] * self.state_mask
        plays = play_offsets * self.inverse_radii
        return torch.cat((position, velocity, previous), dim=2), torch.cat((torque, upcoming, plays), dim=1)

    def forward(self, history: torch.Tensor, commands: torch.Tensor) -> torch.Tensor:
        """Teacher-forced view (training; the exported graph of a model without play radii)."""
        history_in, commands_in = self.transform(history, commands)
        return self.net(history_in, commands_in)


class PlayStateModel(nn.Module):
    """The exported graph of a model with play radii: ``forward(history, commands, state) -> (delta, next_state)``.

    ``state (B, R·J + 1)``: the play offsets ``y − a`` of the previous step (rad, radius-major),
    then a flag that is 0 before the first step. The previous output ``y_{t−1}`` is the previous
    command (the history's last row) plus its offset; on the first step it is the arm's position
    (the history's last row too), so a joint that starts off its command starts on that side of its band.
    """

    def __init__(self, inputs: RelativeCommandInputs) -> None:
        super().__init__()
        self.inputs = inputs

    def forward(self, history: torch.Tensor, commands: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        offsets, next_state = self.play_step(history, commands, state)
        history_in, commands_in = self.inputs.features(history, commands, offsets)
        return self.inputs.net(history_in, commands_in), next_state

    def play_step(self, history: torch.Tensor, commands: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The play operators' step: ``(offsets (B, R, J) rad, next_state)``."""
        core = self.inputs
        joints, plays = core.joints, core.plays
        current = core.raw_commands(commands[:, :1, :])  # (B, 1, J)
        last = history[:, -1:, :]
        position = last[:, :, :joints] * core.position_std + core.position_mean
        previous_command = last[:, :, 2 * joints:] * core.previous_std + core.previous_mean
        started = state[:, -1:].unsqueeze(2)  # (B, 1, 1)
        previous_offsets = state[:, :-1].reshape(-1, plays, joints)
        # y_{t−1} − a_t, and the operator's step: y_t − a_t = clip(y_{t−1} − a_t, −r, r)
        previous_output = position - current + started * (previous_command + previous_offsets - position)
        offsets = torch.minimum(torch.maximum(previous_output, -core.radii), core.radii)
        return offsets, torch.cat((offsets.flatten(1), torch.ones_like(state[:, -1:])), dim=1)


class PerJointMLP(nn.Module):
    """One MLP shared by the joints, each joint's Δ from its own inputs: its history columns and command
    rows (relative commands, play offsets), the gravity joints' torques (row 0: the pose) and which joint it is.

    No joint reads another joint's motion, so a joint that holds still while others move is not moved by
    them (the full networks leak: measured, see the package README).
    """

    def __init__(self, cfg: ArchConfig) -> None:
        super().__init__()
        self.joints, self.features, self.history = cfg.joints, cfg.features, cfg.history
        own = cfg.history * cfg.features + cfg.future_steps
        self.net = nn.Sequential(nn.Linear(own + 2 * cfg.joints, cfg.hidden), nn.Tanh(), nn.Linear(cfg.hidden, cfg.hidden),
                                 nn.Tanh(), nn.Linear(cfg.hidden, 1))
        self.register_buffer("identity", torch.eye(cfg.joints))

    identity: torch.Tensor

    def forward(self, history: torch.Tensor, commands: torch.Tensor) -> torch.Tensor:
        return self.net(self.inputs(history, commands)).squeeze(2)

    def inputs(self, history: torch.Tensor, commands: torch.Tensor) -> torch.Tensor:
        """``(B, J, D)``: each joint's input row of the shared MLP."""
        batch = history.shape[0]
        own = history.reshape(batch, -1, self.features, self.joints).permute(0, 3, 1, 2).reshape(batch, self.joints, -1)
        pose = commands[:, :1, :].expand(batch, self.joints, self.joints)
        return torch.cat((own, commands.transpose(1, 2), pose, self.identity.expand(batch, self.joints, self.joints)), dim=2)


class LinearResidual(nn.Module):
    """A fitted per-joint linear model (frozen) plus a network trained on what it leaves.

    The residual network's last layer starts at zero, so training starts from the linear model's answer.
    ``residual_scale`` (1 while training) shrinks the trained residual toward the linear model when it is
    set below 1 afterwards (:func:`..trainer.train_sim_delta` sets it; the measured reason is in the README).
    """

    residual_scale: torch.Tensor

    def __init__(self, linear: PerJointLinear, residual: nn.Module) -> None:
        super().__init__()
        self.linear, self.residual = linear, residual
        self.register_buffer("residual_scale", torch.tensor(1.0))
        for parameter in self.linear.parameters():
            parameter.requires_grad_(False)
        last = [m for m in residual.modules() if isinstance(m, nn.Linear)][-1]
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)

    def forward(self, history: torch.Tensor, commands: torch.Tensor) -> torch.Tensor:
        return self.linear(history, commands) + self.residual_scale * self.residual(history, commands)
