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
- command rows: row 0 the absolute current command (normalised) on the joints whose pose changes
  gravity's torque (shoulder_lift, elbow_flex, wrist_flex), 0 on the others; rows ``k ≥ 1`` as
  ``(a(t+k) − a(t)) / scale``;

with the same shapes, so every architecture of :mod:`so101_gaponet.models` sits behind it unchanged.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from so101_common.joints import JOINT_NAMES
from so101_gaponet.metadata import Normalisation

__all__ = ["RelativeCommandInputs", "GRAVITY_JOINTS"]

GRAVITY_JOINTS = ("shoulder_lift", "elbow_flex", "wrist_flex")


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
    absolute_mask: torch.Tensor

    def __init__(self, net: nn.Module, normalisation: Normalisation, relative_scale: np.ndarray, state_inputs: bool) -> None:
        super().__init__()
        joints = len(JOINT_NAMES)
        self.net, self.joints = net, joints
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
        self.register_buffer("absolute_mask", torch.tensor([1.0 if n in GRAVITY_JOINTS else 0.0 for n in JOINT_NAMES]))

    def transform(self, history: torch.Tensor, commands: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        joints = self.joints
        raw_commands = commands * self.command_std + self.command_mean
        current = raw_commands[:, :1, :]
        raw_previous = history[:, :, 2 * joints:] * self.previous_std + self.previous_mean
        previous = (raw_previous - current) * self.inverse_scale
        upcoming = (raw_commands[:, 1:, :] - current) * self.inverse_scale
        raw_position = history[:, :, :joints] * self.position_std + self.position_mean
        position = (raw_position - current) * self.inverse_scale * self.state_mask
        velocity = history[:, :, joints:2 * joints] * self.state_mask
        absolute = commands[:, :1, :] * self.absolute_mask
        return torch.cat((position, velocity, previous), dim=2), torch.cat((absolute, upcoming), dim=1)

    def forward(self, history: torch.Tensor, commands: torch.Tensor) -> torch.Tensor:
        history_in, commands_in = self.transform(history, commands)
        return self.net(history_in, commands_in)
