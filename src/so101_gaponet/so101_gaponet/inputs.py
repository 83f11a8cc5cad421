"""The compensator network's input stage, inside the exported graph: everything relative to the arm.

The file's inputs are the contract's (normalised absolute history rows and command rows). What the
arm needs to be sent depends on where it must go *relative to where it is* (lag, friction and
backlash act on the change) and, for gravity, on its absolute pose. A network fed absolute
positions must learn small differences of large inputs and extrapolates badly on poses outside its
training range, so this stage hands the inner network

- history: position columns as ``(q(t−i) − q(t)) / scale``, velocity columns as they are
  (normalised), previous-command columns zeroed. Why: in the training data the commands are
  smooth, so the previous commands predict the next one by extrapolation alone, a shortcut that
  fits the data to 0.05 % and, in closed loop, has the compensator integrate its own output
  (measured: every joint 1.5–10× worse than no compensation; with only the latest previous command
  still 1.5–3× worse). What the previous command would tell (how hard the servo is pulled against
  friction and gravity) the compensator core's integral feedback supplies;
- command rows: a first row with the measured pose ``q(t)`` (normalised) on the joints whose pose
  changes gravity's torque (shoulder_lift, elbow_flex, wrist_flex; 0 on the others), then every
  command row as ``(c(t+k) − q(t)) / scale``;

so the inner network (any kind of :mod:`so101_gaponet.models`) is built for ``future_steps + 1``
command rows. ``scale`` is a per-joint constant of the graph (the training Δ's spread), not learned.
"""


import numpy as np
import torch
from torch import nn

from so101_gaponet.metadata import Normalisation

__all__ = ["GRAVITY_JOINTS", "RelativeStateInputs"]

GRAVITY_JOINTS = ("shoulder_lift", "elbow_flex", "wrist_flex")


class RelativeStateInputs(nn.Module):
    """``net(transform(history, commands))``; ``net`` takes one more command row than the file."""

    # buffers (constants of the graph, saved with it)
    position_mean: torch.Tensor
    position_std: torch.Tensor
    command_mean: torch.Tensor
    command_std: torch.Tensor
    inverse_scale: torch.Tensor
    absolute_mask: torch.Tensor

    def __init__(self, net: nn.Module, normalisation: Normalisation, joints: tuple[str, ...],
                 relative_scale: np.ndarray, measured_inputs: bool = False) -> None:
        super().__init__()
        count = len(joints)
        self.net, self.joints = net, count
        history_mean = np.asarray(normalisation.history_mean, dtype=np.float32)
        history_std = np.asarray(normalisation.history_std, dtype=np.float32)
        self.register_buffer("position_mean", torch.from_numpy(history_mean[:count]))
        self.register_buffer("position_std", torch.from_numpy(history_std[:count]))
        self.register_buffer("command_mean", torch.tensor(normalisation.command_mean, dtype=torch.float32))
        self.register_buffer("command_std", torch.tensor(normalisation.command_std, dtype=torch.float32))
        self.register_buffer("inverse_scale", torch.from_numpy(1.0 / np.asarray(relative_scale, dtype=np.float32)))
        self.register_buffer("absolute_mask", torch.tensor([1.0 if n in GRAVITY_JOINTS else 0.0 for n in joints]))
        self.measured_inputs = measured_inputs

    def transform(self, history: torch.Tensor, commands: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        joints = self.joints
        position = history[:, :, :joints] * self.position_std + self.position_mean
        raw_commands = commands * self.command_std + self.command_mean
        if self.measured_inputs:
            current = position[:, -1:, :]
            pose = history[:, -1:, :joints] * self.absolute_mask
            relative_position = (position - current) * self.inverse_scale
            velocity = history[:, :, joints:2 * joints]
        else:
            current = raw_commands[:, :1, :]
            pose = (current - self.position_mean) / self.position_std * self.absolute_mask
            relative_position = torch.zeros_like(position)
            velocity = torch.zeros_like(position)
        relative_commands = (raw_commands - current) * self.inverse_scale
        return (torch.cat((relative_position, velocity, torch.zeros_like(relative_position)), dim=2),
                torch.cat((pose, relative_commands), dim=1))

    def forward(self, history: torch.Tensor, commands: torch.Tensor) -> torch.Tensor:
        history_in, commands_in = self.transform(history, commands)
        return self.net(history_in, commands_in)
