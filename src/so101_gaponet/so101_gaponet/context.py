"""The population compensator's network: a feed-forward on the command rows, told by a branch over the
recent response history which arm it drives (GapONet's operator idea: one model across dynamics).

``forward(history, commands)`` takes the file's normalised inputs (:mod:`so101_gaponet.metadata`) and
returns normalised Δ, so it exports and runs like every other compensator network:

- **trunk** (per joint, as :class:`~so101_gaponet.models.JointMLP`): the command rows relative to the current
  command, scaled by Δ's spread, and the commanded pose of the gravity joints (the input stage of
  :class:`~so101_gaponet.inputs.RelativeStateInputs` without measured inputs: a feed-forward);
- **branch** (the context): per joint, the history window's ``command sent − position measured`` and
  ``position − the window's mean`` rows, through a small per-joint encoder into a latent ``z_j``; the
  trunk of joint ``j`` reads ``z_j`` and the latents' mean over the joints (the bus and the supply are the
  whole arm's).

Why the branch cannot become the high-gain loop the measured-state network was (package README): it is
trained on windows drawn from *elsewhere* in the same arm's recordings, never the window that ends where
the sample is (:mod:`so101_gaponet.train_population`). What it can learn is what every window of that arm
shares — how this arm answers a command — and nothing about where the arm is now; the one path from the
present measured state stays the core's slow integral feedback.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from so101_gaponet.inputs import GRAVITY_JOINTS
from so101_gaponet.metadata import GapModelMetadata, ModelFileError, Normalisation

__all__ = ["ContextCompensator"]


def _weight(*shape: int, fan_in: int) -> nn.Parameter:
    """nn.Linear's initialisation, for per-joint weight stacks."""
    return nn.Parameter(torch.empty(*shape).uniform_(-1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in)))


class ContextCompensator(nn.Module):
    """Per-joint feed-forward trunk conditioned on a per-joint latent of the history window (module doc)."""

    position_mean: torch.Tensor
    position_std: torch.Tensor
    sent_mean: torch.Tensor
    sent_std: torch.Tensor
    command_mean: torch.Tensor
    command_std: torch.Tensor
    inverse_scale: torch.Tensor
    absolute_mask: torch.Tensor
    lag_scale: torch.Tensor
    shape_scale: torch.Tensor

    def __init__(self, normalisation: Normalisation, joints: tuple[str, ...], future_steps: int, context_rows: int,
                 relative_scale: np.ndarray, lag_scale: np.ndarray, shape_scale: np.ndarray, hidden: int = 64,
                 encoder_hidden: int = 32, latent: int = 4, identification: bool = False,
                 arm_latent: bool = False) -> None:
        super().__init__()
        count = len(joints)
        self.joints, self.context_rows, self.latent = count, context_rows, latent
        self.identification, self.arm_latent = identification, arm_latent
        history_mean = np.asarray(normalisation.history_mean, dtype=np.float32)
        history_std = np.asarray(normalisation.history_std, dtype=np.float32)
        for name, values in (("position_mean", history_mean[:count]), ("position_std", history_std[:count]),
                             ("sent_mean", history_mean[2 * count:]), ("sent_std", history_std[2 * count:]),
                             ("command_mean", np.asarray(normalisation.command_mean, np.float32)),
                             ("command_std", np.asarray(normalisation.command_std, np.float32)),
                             ("inverse_scale", 1.0 / np.asarray(relative_scale, np.float32)),
                             ("lag_scale", 1.0 / np.asarray(lag_scale, np.float32)),
                             ("shape_scale", 1.0 / np.asarray(shape_scale, np.float32))):
            self.register_buffer(name, torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)))
        self.register_buffer("absolute_mask", torch.tensor([1.0 if n in GRAVITY_JOINTS else 0.0 for n in joints]))
        # branch: per joint, 2 × context_rows → encoder_hidden → latent
        window = (2 * context_rows + 4 * identification) if latent else 0
        self.e1, self.eb1 = _weight(count, window, encoder_hidden, fan_in=window or 1), _weight(count, encoder_hidden, fan_in=window or 1)
        self.e2 = _weight(count, encoder_hidden, latent, fan_in=encoder_hidden)
        self.eb2 = _weight(count, latent, fan_in=encoder_hidden)
        # trunk: per joint, its command rows (pose + future_steps) + every joint's pose + its latent + the mean latent
        inputs = 1 + future_steps + count + (2 if arm_latent else 1) * latent
        self.w1, self.b1 = _weight(count, inputs, hidden, fan_in=inputs), _weight(count, hidden, fan_in=inputs)
        self.w2, self.b2 = _weight(count, hidden, hidden, fan_in=hidden), _weight(count, hidden, fan_in=hidden)
        self.w3, self.b3 = _weight(count, hidden, fan_in=hidden), _weight(count, fan_in=hidden)
        self.skip = _weight(count, inputs, fan_in=inputs)

    @classmethod
    def from_onnx(cls, path: str | Path) -> tuple[ContextCompensator, GapModelMetadata]:
        """The trainable module a ``context_mlp`` model file was exported from (its weights are the graph's named
        initializers), with the file's metadata: what per-arm refinement continues from."""
        from so101_gaponet.model_file import graph_weights, load_model

        metadata = load_model(path).metadata  # the graph loads and passes the probe, not only its metadata
        if metadata.model_kind != "context_mlp":
            raise ModelFileError(f"{path}: a {metadata.model_kind} model, not the population compensator (context_mlp)")
        weights = graph_weights(path)
        arch = metadata.architecture
        try:
            module = cls(metadata.normalisation, metadata.joints, metadata.future_steps, metadata.history,
                         np.asarray(arch["relative_scale"]), np.asarray(arch["lag_scale"]), np.asarray(arch["shape_scale"]),
                         hidden=int(arch["hidden"]), encoder_hidden=int(arch["encoder_hidden"]), latent=int(arch["latent"]),
                         identification=bool(arch.get("identification", False)),
                         arm_latent=bool(arch.get("arm_latent", True)))
            # the buffers come from the metadata (the exporter may merge equal constants); the weights by name
            module.load_state_dict({name: torch.from_numpy(np.array(weights[name]))
                                    for name, _ in module.named_parameters()}, strict=False)
        except (KeyError, ValueError, RuntimeError) as err:
            raise ModelFileError(f"{path}: its graph does not hold a population compensator's weights ({err})") from err
        return module.eval(), metadata

    def record(self) -> dict[str, Any]:
        """The network's shape and fixed scales, for the metadata's ``architecture`` (what :meth:`from_onnx` reads)."""
        return {"kind": "context_mlp", "context_rows": self.context_rows, "hidden": int(self.w1.shape[2]),
                "encoder_hidden": int(self.e1.shape[2]), "latent": self.latent, "identification": self.identification, "arm_latent": self.arm_latent,
                "relative_scale": (1.0 / self.inverse_scale).tolist(), "lag_scale": (1.0 / self.lag_scale).tolist(),
                "shape_scale": (1.0 / self.shape_scale).tolist()}

    def context(self, history: torch.Tensor) -> torch.Tensor:
        """``(B, J, latent)``: what the window says about the arm."""
        joints = self.joints
        window = history[:, -self.context_rows:, :]
        position = window[:, :, :joints] * self.position_std + self.position_mean
        sent = window[:, :, 2 * joints:] * self.sent_std + self.sent_mean
        lag = (sent - position) * self.lag_scale
        shape = (position - position.mean(dim=1, keepdim=True)) * self.shape_scale
        rows = torch.cat((lag, shape), dim=1).transpose(1, 2)  # (B, J, 2·rows)
        if self.identification:
            rows = torch.cat((rows, self.response(position, sent)), dim=2)
        hidden = torch.tanh(torch.einsum("bji,jih->bjh", rows, self.e1) + self.eb1)
        return torch.tanh(torch.einsum("bjh,jhz->bjz", hidden, self.e2) + self.eb2)

    def response(self, position: torch.Tensor, sent: torch.Tensor) -> torch.Tensor:
        """``(B, J, 4)``: the window's response figures per joint, as least squares over its steps: how many
        steps of motion the command runs ahead of the arm (its lag), how much of that lead the arm covers per
        step (its speed of response), the mean lead (a sag or friction offset) and how much it moved (log).
        Ratios a first layer cannot form from the raw rows; a still window gives 0 for the first two."""
        moved = position[:, 1:] - position[:, :-1]  # (B, rows − 1, J): each step's motion
        lead = sent[:, 1:] - position[:, :-1]  # the command in force over that step, ahead of the arm
        floor = 1e-6 * self.context_rows  # (1 mrad)² per step: below it a window did not move
        energy = (moved * moved).sum(dim=1)
        lag_steps = (lead * moved).sum(dim=1) / (energy + floor)
        speed = (lead * moved).sum(dim=1) / ((lead * lead).sum(dim=1) + floor)
        offset = lead.mean(dim=1) * self.lag_scale
        figures = (torch.tanh(lag_steps / 10.0), torch.tanh(4.0 * speed), offset, torch.log(energy + floor))
        return torch.stack(figures, dim=2)

    def forward(self, history: torch.Tensor, commands: torch.Tensor) -> torch.Tensor:
        batch, joints = history.shape[0], self.joints
        raw = commands * self.command_std + self.command_mean
        current = raw[:, :1, :]
        pose = (current - self.position_mean) / self.position_std * self.absolute_mask
        rows = torch.cat((pose, (raw - current) * self.inverse_scale), dim=1).transpose(1, 2)  # (B, J, 1 + K)
        parts = [rows, pose.expand(batch, joints, joints)]
        if self.latent:
            z = self.context(history)
            parts += [z, z.mean(dim=1, keepdim=True).expand_as(z)] if self.arm_latent else [z]
        x = torch.cat(parts, dim=2)
        h = torch.tanh(torch.einsum("bji,jih->bjh", x, self.w1) + self.b1)
        h = torch.tanh(torch.einsum("bjh,jhk->bjk", h, self.w2) + self.b2)
        return (h * self.w3).sum(dim=2) + self.b3 + (x * self.skip).sum(dim=2)
