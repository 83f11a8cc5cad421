"""GapONet networks (torch): the DeepONet variant and an MLP baseline.

Both take normalised ``history (B, H, F·J)`` and ``target (B, J)`` and return normalised
``delta (B, J)``; normalisation lives in the model file's metadata and is applied by the runtime
(as LeRobot keeps pre/post-processing outside the ``nn.Module``), so the exported graph is the bare
network.

DeepONet (after GapONet): a *sensor* MLP reads the recent history and predicts the arm's response
to a fixed set of ``probes`` probe actions per joint (a latent, trained end to end here: the
paired datasets hold no probe experiments); the *branch* net encodes those responses into
``basis`` coefficients per joint; the *trunk* net encodes the commanded target into ``basis``
basis values per joint; ``Δ_j = Σ_k branch_jk · trunk_jk + bias_j``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["ArchConfig", "DeepONet", "HistoryMLP", "build_model"]


@dataclass(frozen=True)
class ArchConfig:
    """Network shape; stored in the model metadata as provenance."""

    kind: str  # "deeponet" or "mlp"
    joints: int  # J
    history: int  # H rows
    features: int  # F feature groups per row (columns = F·J)
    hidden: int = 64  # width of every hidden layer
    probes: int = 4  # DeepONet: probe actions per joint the sensor net answers for
    basis: int = 8  # DeepONet: basis terms per joint

    def __post_init__(self) -> None:
        if self.kind not in ("deeponet", "mlp"):
            raise ValueError(f"unknown architecture {self.kind!r}; expected deeponet or mlp")
        for name in ("joints", "history", "features", "hidden", "probes", "basis"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be ≥ 1, got {getattr(self, name)}")


def _mlp(inputs: int, hidden: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, outputs))


class HistoryMLP(nn.Module):
    """Baseline: one MLP over the flattened history window and the target."""

    def __init__(self, cfg: ArchConfig) -> None:
        super().__init__()
        self.net = _mlp(cfg.history * cfg.features * cfg.joints + cfg.joints, cfg.hidden, cfg.joints)

    def forward(self, history: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat((history.flatten(1), target), dim=1))


class DeepONet(nn.Module):
    """GapONet's operator network: sensor → branch (history) ⊙ trunk (target), summed over the basis."""

    def __init__(self, cfg: ArchConfig) -> None:
        super().__init__()
        self.joints, self.basis = cfg.joints, cfg.basis
        self.sensor = _mlp(cfg.history * cfg.features * cfg.joints, cfg.hidden, cfg.probes * cfg.joints)
        self.branch = _mlp(cfg.probes * cfg.joints, cfg.hidden, cfg.basis * cfg.joints)
        self.trunk = _mlp(cfg.joints, cfg.hidden, cfg.basis * cfg.joints)
        self.bias = nn.Parameter(torch.zeros(cfg.joints))

    def forward(self, history: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        responses = self.sensor(history.flatten(1))
        coefficients = self.branch(responses).view(-1, self.joints, self.basis)
        basis = self.trunk(target).view(-1, self.joints, self.basis)
        return (coefficients * basis).sum(dim=2) + self.bias


def build_model(cfg: ArchConfig) -> nn.Module:
    """The network for ``cfg.kind``."""
    return DeepONet(cfg) if cfg.kind == "deeponet" else HistoryMLP(cfg)
