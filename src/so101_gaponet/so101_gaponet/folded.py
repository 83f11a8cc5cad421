"""The per-joint compensator written for export so that the runtime folds its input stage into the first layer.

The compensator runs once per control step with a batch of one, so what a step of the graph costs is the number of
nodes the runtime walks (measured: 25 nodes after onnxruntime's own optimisation, two of them ``Einsum``, ~50 µs of a
~190 µs step), not arithmetic. Everything between the file's inputs and the first layer's pre-activation is affine:
the input stage of :class:`~so101_gaponet.inputs.RelativeStateInputs` and the per-joint gather of
:class:`~so101_gaponet.models.JointMLP`. :class:`FoldedJointInputs` computes, from the module's own parameters and
buffers, that affine map (probed at zero and at each unit input, in float64) multiplied into the first layer and the
skip path, and then runs the network as one matrix product over the flat input row. That weight computation reads
only constants, so onnxruntime folds it when it loads the file (the torch exporter's own folding is off for this
module: the file keeps the trainable weights under their names, which :func:`so101_gaponet.train.load_start`
rebuilds the network from for per-arm refinement). What runs per step: a dozen nodes. Outputs equal the unfolded
module's to float32 rounding (:func:`so101_gaponet.export.write_and_check` checks every file it writes).

Unlike :mod:`so101_sim2real.sim_delta.folded` (which writes the folded weights as the file's only weights), the fold
here happens at load, so a file stays a start point for training.
"""

# no `from __future__ import annotations`: TorchScript reads the buffers' class annotations as objects
from typing import cast

import numpy as np
import torch
from torch import nn

from so101_gaponet.inputs import RelativeStateInputs
from so101_gaponet.metadata import GapModelMetadata
from so101_gaponet.models import JointMLP

__all__ = ["FoldedJointInputs", "exported_module"]


class FoldedJointInputs(RelativeStateInputs):
    """:class:`RelativeStateInputs` around a :class:`JointMLP`, the same parameters and buffers under the same names,
    ``forward`` written as the folded network (module doc)."""

    def forward(self, history: torch.Tensor, commands: torch.Tensor) -> torch.Tensor:
        net = cast(JointMLP, self.net)
        first_weight, first_bias, skip_weight, bias = self.folded_weights()
        flat = torch.cat((history.flatten(1), commands.flatten(1)), dim=1)
        hidden = torch.tanh(flat @ first_weight + first_bias).reshape(-1, net.joints, 1, net.w2.shape[1])
        hidden = torch.tanh(hidden @ net.w2 + net.b2.unsqueeze(1))  # (B, J, 1, hidden)
        return (hidden @ net.w3.unsqueeze(2)).flatten(1) + flat @ skip_weight + bias

    def folded_weights(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """From the parameters and buffers alone (constants of the graph), in float32: the first layer's weight
        ``(width, J·hidden)`` and bias ``(J·hidden,)`` on the flat input row (history, then commands), the skip
        path's weight ``(width, J)`` and the output's bias ``(J,)``."""
        net = cast(JointMLP, self.net)
        joints = net.joints
        history_size = net.history_rows * net.features * joints
        width = history_size + (net.command_rows - 1) * joints  # the file's command rows: one fewer than the net's
        # the input stage and the gather at zero and at each unit input; affine, so the differences are its matrix
        # (the exporter writes the probes as constants: 120 kB in the file for the shipped model's 120 inputs)
        probes = torch.cat((torch.zeros(1, width, dtype=torch.float64), torch.eye(width, dtype=torch.float64)))
        history = probes[:, :history_size].reshape(-1, net.history_rows, net.features * joints)
        commands = probes[:, history_size:].reshape(-1, net.command_rows - 1, joints)
        rows = net.inputs(*self.transform(history, commands)).double()  # (1 + width, J, inputs)
        offset, matrix = rows[0], rows[1:] - rows[:1]
        w1, skip = net.w1.double(), net.skip.double()
        first_weight = torch.einsum("uji,jih->ujh", matrix, w1).reshape(width, -1)
        first_bias = (torch.einsum("ji,jih->jh", offset, w1) + net.b1.double()).reshape(-1)
        skip_weight = torch.einsum("uji,ji->uj", matrix, skip)
        bias = (offset * skip).sum(dim=1) + net.b3.double()
        return first_weight.float(), first_bias.float(), skip_weight.float(), bias.float()


def exported_module(module: nn.Module, metadata: GapModelMetadata) -> tuple[nn.Module, bool]:
    """What an ONNX file of ``module`` holds, and whether the exporter must leave its constants unfolded:
    :class:`FoldedJointInputs` for a :class:`JointMLP` behind the relative input stage, else ``module`` itself."""
    if not (isinstance(module, RelativeStateInputs) and isinstance(module.net, JointMLP)):
        return module, False
    scale = 1.0 / module.inverse_scale.detach().double().numpy()
    folded = FoldedJointInputs(module.net, metadata.normalisation, metadata.joints, np.asarray(scale),
                               measured_inputs=module.measured_inputs)
    folded.load_state_dict(module.state_dict())  # the buffers exactly as trained (not re-derived from the metadata)
    return folded.eval(), True
