"""The shipped sim-delta network folded for export: the same function in a graph a third the size.

A replay calls the model once per 20 ms tick with a batch of one, so what a call costs is the number
of graph nodes the runtime walks, not arithmetic (measured: ~1 µs a node). Everything between the
file's inputs and the per-joint MLP's first layer is affine once the play operators' offsets and the
gravity torque are known: the inputs' normalisation, the relative command features, the per-joint
gather of :class:`.network.PerJointMLP` and the per-joint linear model. :func:`fold` multiplies that
affine map into the first layer (and into the linear model's weights), keeps per joint only the input
columns with a non-zero weight, and leaves a graph of: the play step, the links' pitch terms
(``cos``/``sin``, which the gravity torque is linear in), one gather, three layers. Outputs equal the unfolded module's to float32 rounding (tested).
"""

# no `from __future__ import annotations`: TorchScript reads the buffers' class annotations as objects
import copy
from typing import cast

import torch
from torch import nn

from so101_sim2real.sim_delta.network import LinearResidual, PerJointMLP, PlayStateModel, RelativeCommandInputs

__all__ = ["FoldedPlayStateModel", "foldable", "fold"]


def foldable(module: nn.Module) -> bool:
    """Whether :func:`fold` applies: the play-state model over a per-joint linear model plus per-joint MLP residual."""
    if not isinstance(module, PlayStateModel):
        return False
    net = module.inputs.net
    return isinstance(net, LinearResidual) and isinstance(net.residual, PerJointMLP) and _layers(net.residual) is not None


def _layers(mlp: PerJointMLP) -> tuple[nn.Linear, nn.Linear, nn.Linear] | None:
    """The residual's three linear layers, when it is Linear-Tanh-Linear-Tanh-Linear."""
    kinds = [type(m) for m in mlp.net]
    if kinds != [nn.Linear, nn.Tanh, nn.Linear, nn.Tanh, nn.Linear]:
        return None
    return cast(nn.Linear, mlp.net[0]), cast(nn.Linear, mlp.net[2]), cast(nn.Linear, mlp.net[4])


class FoldedPlayStateModel(nn.Module):
    """``forward(history, commands, state) -> (delta, next_state)``, as :class:`.network.PlayStateModel`."""

    pitch_weight: torch.Tensor  # (J, links) the links' pitches from the normalised command row
    pitch_bias: torch.Tensor  # (links,)
    gather: torch.Tensor  # (J, N) per joint, its input columns of the flat input row
    first_weight: torch.Tensor  # (J, N, hidden) the first layer on the gathered columns
    first_bias: torch.Tensor  # (J, 1, hidden)
    second_weight: torch.Tensor  # (hidden, hidden)
    second_bias: torch.Tensor  # (hidden,)
    last_weight: torch.Tensor  # (hidden, 1) times the residual scale
    linear_weight: torch.Tensor  # (J, N) the per-joint linear model on the gathered columns
    bias: torch.Tensor  # (J,) the linear model's bias plus the scaled last layer's

    def __init__(self, play: PlayStateModel, gather: torch.Tensor, first_weight: torch.Tensor, first_bias: torch.Tensor,
                 linear_weight: torch.Tensor, bias: torch.Tensor, second: nn.Linear, last: nn.Linear, residual_scale: float) -> None:
        super().__init__()
        # its play step runs as it is; its network's weights come along unused (the ONNX export drops them)
        self.play = copy.deepcopy(play)
        core = self.play.inputs
        pitch_map = core.gravity.pitch_map()
        self.register_buffer("pitch_weight", core.command_std.unsqueeze(1) * pitch_map)
        self.register_buffer("pitch_bias", core.command_mean @ pitch_map)
        self.register_buffer("gather", gather)
        self.register_buffer("first_weight", first_weight.float())
        self.register_buffer("first_bias", first_bias.float())
        self.register_buffer("second_weight", second.weight.detach().T.contiguous().float())
        self.register_buffer("second_bias", second.bias.detach().clone().float())
        self.register_buffer("last_weight", (residual_scale * last.weight.detach().T).contiguous().float())
        self.register_buffer("linear_weight", linear_weight.float())
        self.register_buffer("bias", bias.float())

    def forward(self, history: torch.Tensor, commands: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        offsets, next_state = self.play.play_step(history, commands, state)
        pitch = commands[:, 0, :] @ self.pitch_weight + self.pitch_bias
        row = torch.cat((history.flatten(1), commands.flatten(1), offsets.flatten(1), torch.cos(pitch), torch.sin(pitch)), dim=1)
        own = row[:, self.gather]  # (B, J, N)
        hidden = torch.tanh(own.unsqueeze(2) @ self.first_weight + self.first_bias)  # (B, J, 1, hidden)
        hidden = torch.tanh(hidden @ self.second_weight + self.second_bias)
        residual = (hidden @ self.last_weight).flatten(1)  # (B, J)
        return residual + (own * self.linear_weight).sum(dim=2) + self.bias, next_state


@torch.no_grad()
def fold(play: PlayStateModel) -> FoldedPlayStateModel:
    """The folded equivalent of a :func:`foldable` model (which it leaves as it is)."""
    if not foldable(play):
        raise ValueError("only a play-state model over a linear + per-joint MLP residual folds")
    exact = copy.deepcopy(play).double()
    core: RelativeCommandInputs = exact.inputs
    net = cast(LinearResidual, core.net)
    mlp = cast(PerJointMLP, net.residual)
    first, second, last = cast(tuple[nn.Linear, nn.Linear, nn.Linear], _layers(mlp))
    joints, links = core.joints, core.gravity.cos_weight.shape[0]
    shapes = ((mlp.history, mlp.features * joints), (core.future_steps, joints), (core.plays, joints), (2, links))
    sizes = [rows * columns for rows, columns in shapes]
    width = sum(sizes)
    # the affine map from the flat input row to each joint's MLP row and linear regressors, probed at 0 and each unit row
    probes = torch.cat((torch.zeros(1, width, dtype=torch.float64), torch.eye(width, dtype=torch.float64)))
    parts = [chunk.reshape(-1, *shape) for chunk, shape in zip(probes.split(sizes, dim=1), shapes, strict=True)]
    history, commands, offsets, pitch_terms = parts
    torque = (core.gravity.from_terms(pitch_terms[:, :1], pitch_terms[:, 1:]) - core.torque_mean) * core.torque_inverse_std
    history_in, commands_in = core.relative_features(history, commands, offsets, torque)
    mlp_rows = mlp.inputs(history_in, commands_in)  # (1 + width, J, D)
    regressors = net.linear.regressors(history_in, commands_in)  # (1 + width, J, D_linear)
    first_weight = torch.einsum("hd,ujd->jhu", first.weight, mlp_rows[1:] - mlp_rows[:1])  # (J, hidden, width)
    first_bias = torch.einsum("hd,jd->jh", first.weight, mlp_rows[0]) + first.bias
    linear_weight = torch.einsum("jd,ujd->ju", net.linear.weight, regressors[1:] - regressors[:1])  # (J, width)
    scale = float(net.residual_scale)
    bias = (net.linear.weight * regressors[0]).sum(dim=1) + net.linear.bias + scale * last.bias
    used = (first_weight.abs().amax(dim=1) > 0) | (linear_weight.abs() > 0)  # (J, width)
    count = int(used.sum(dim=1).max())
    gather = torch.zeros(joints, count, dtype=torch.long)
    gathered_first = torch.zeros(joints, count, first_weight.shape[1], dtype=torch.float64)
    gathered_linear = torch.zeros(joints, count, dtype=torch.float64)
    for j in range(joints):
        columns = torch.nonzero(used[j]).flatten()
        gather[j, :len(columns)] = columns  # the rest: column 0 at zero weight
        gathered_first[j, :len(columns)] = first_weight[j][:, columns].T
        gathered_linear[j, :len(columns)] = linear_weight[j, columns]
    return FoldedPlayStateModel(play, gather, gathered_first, first_bias.unsqueeze(1), gathered_linear, bias, second, last, scale)
