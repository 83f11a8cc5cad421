"""GapONet networks (torch): DeepONet, Transformer, MLP, per-joint MLP and a per-joint linear (ARX) baseline.

Every network takes normalised ``history (B, H, F·J)`` and ``commands (B, K, J)`` (the current
command first, then ``K − 1`` upcoming ones) and returns normalised ``delta (B, J)``;
normalisation lives in the model file's metadata and is applied by the runtime (as LeRobot keeps
pre/post-processing outside the ``nn.Module``), so the exported graph is the bare network. All of
them script (TorchScript) and export (ONNX, opset 17) without custom ops; attention is written
out with plain matmuls so no fused kernel path differs between torch and the exports.

DeepONet (after GapONet): a *sensor* MLP reads the recent history and predicts the arm's response
to a fixed set of ``probes`` probe actions per joint (a latent, trained end to end: the recordings
hold no probe experiments); the *branch* net encodes those responses into ``basis`` coefficients
per joint; the *trunk* net encodes the command rows into ``basis`` basis values per joint;
``Δ_j = Σ_k branch_jk · trunk_jk + bias_j``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

__all__ = ["NETWORK_KINDS", "ArchConfig", "DeepONet", "HistoryMLP", "HistoryTransformer", "JointMLP", "PerJointLinear", "build_model"]

# The networks build_model makes (the file's model_kind; the population compensator's ``context_mlp`` is built
# with its own input stage by so101_gaponet.context).
NETWORK_KINDS: tuple[str, ...] = ("deeponet", "transformer", "mlp", "joint_mlp", "linear")


@dataclass(frozen=True)
class ArchConfig:
    """Network shape; stored in the model metadata's ``architecture`` record."""

    kind: str  # one of NETWORK_KINDS
    joints: int  # J
    history: int  # H rows
    features: int  # F feature groups per row (columns = F·J)
    future_steps: int = 1  # K command rows
    hidden: int = 64  # width of every hidden layer (MLP, DeepONet); model width (Transformer)
    probes: int = 4  # DeepONet: probe actions per joint the sensor net answers for
    basis: int = 8  # DeepONet: basis terms per joint
    heads: int = 4  # Transformer: attention heads (hidden must be a multiple)
    layers: int = 2  # Transformer: encoder blocks

    def __post_init__(self) -> None:
        if self.kind not in NETWORK_KINDS:
            raise ValueError(f"unknown architecture {self.kind!r}; expected one of {list(NETWORK_KINDS)}")
        for name in ("joints", "history", "features", "future_steps", "hidden", "probes", "basis", "heads", "layers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be ≥ 1, got {getattr(self, name)}")
        if self.kind == "transformer" and self.hidden % self.heads:
            raise ValueError(f"transformer width {self.hidden} is not a multiple of heads {self.heads}")

    def record(self) -> dict[str, Any]:
        return asdict(self)


def _mlp(inputs: int, hidden: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, outputs))


class HistoryMLP(nn.Module):
    """One MLP over the flattened history window and the command rows, beside a linear skip path.

    The skip carries what is linear in the inputs (a lag is), so the hidden layers spend themselves
    on what is not (sag with pose, friction, backlash) and an input outside the training range is
    extrapolated linearly rather than by saturated units. (A per-joint linear skip was measured
    worse on the held-out pan and wrist roll: 36 and 12 % cut against 42 and 17 %.)
    """

    def __init__(self, cfg: ArchConfig) -> None:
        super().__init__()
        inputs = cfg.history * cfg.features * cfg.joints + cfg.future_steps * cfg.joints
        self.net = _mlp(inputs, cfg.hidden, cfg.joints)
        self.skip = nn.Linear(inputs, cfg.joints)

    def forward(self, history: torch.Tensor, commands: torch.Tensor) -> torch.Tensor:
        x = torch.cat((history.flatten(1), commands.flatten(1)), dim=1)
        return self.net(x) + self.skip(x)


class JointMLP(nn.Module):
    """One MLP per joint (with a linear skip) over that joint's own history columns and command rows
    and the first command row of every joint.

    Why: a joint's gap (its lag, friction, backlash) acts on its own motion; one network over every
    joint's rows also learns the correlations of its training motions (excitation moves all joints
    at once) and answers them on motions without them (measured: a still shoulder_pan pushed 6 mrad
    off while the other joints waved). The first row is shared because, behind the compensator's
    input stage, it carries the gravity pose, which couples the joints through the chain.
    """

    def __init__(self, cfg: ArchConfig) -> None:
        super().__init__()
        self.joints, self.features = cfg.joints, cfg.features
        self.history_rows, self.command_rows = cfg.history, cfg.future_steps
        inputs = cfg.history * cfg.features + cfg.future_steps + cfg.joints

        def weight(*shape: int, fan_in: int) -> nn.Parameter:  # nn.Linear's initialisation, per joint
            return nn.Parameter(torch.empty(*shape).uniform_(-1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in)))

        joints, hidden = cfg.joints, cfg.hidden
        self.w1, self.b1 = weight(joints, inputs, hidden, fan_in=inputs), weight(joints, hidden, fan_in=inputs)
        self.w2, self.b2 = weight(joints, hidden, hidden, fan_in=hidden), weight(joints, hidden, fan_in=hidden)
        self.w3, self.b3 = weight(joints, hidden, fan_in=hidden), weight(joints, fan_in=hidden)
        self.skip = weight(joints, inputs, fan_in=inputs)

    def inputs(self, history: torch.Tensor, commands: torch.Tensor) -> torch.Tensor:
        """``(B, J, inputs)``: per joint, its history columns (row-major), its command rows, the first command row."""
        batch, joints = history.shape[0], self.joints
        own = history.reshape(batch, -1, self.features, joints).permute(0, 3, 1, 2).reshape(batch, joints, -1)
        shared = commands[:, :1, :].expand(batch, joints, joints)
        return torch.cat((own, commands.transpose(1, 2), shared), dim=2)

    def forward(self, history: torch.Tensor, commands: torch.Tensor) -> torch.Tensor:
        x = self.inputs(history, commands)
        h = torch.tanh(torch.einsum("bji,jih->bjh", x, self.w1) + self.b1)
        h = torch.tanh(torch.einsum("bjh,jhk->bjk", h, self.w2) + self.b2)
        return (h * self.w3).sum(dim=2) + self.b3 + (x * self.skip).sum(dim=2)


class DeepONet(nn.Module):
    """GapONet's operator network: sensor → branch (history) ⊙ trunk (commands), summed over the basis."""

    def __init__(self, cfg: ArchConfig) -> None:
        super().__init__()
        self.joints, self.basis = cfg.joints, cfg.basis
        self.sensor = _mlp(cfg.history * cfg.features * cfg.joints, cfg.hidden, cfg.probes * cfg.joints)
        self.branch = _mlp(cfg.probes * cfg.joints, cfg.hidden, cfg.basis * cfg.joints)
        self.trunk = _mlp(cfg.future_steps * cfg.joints, cfg.hidden, cfg.basis * cfg.joints)
        self.bias = nn.Parameter(torch.zeros(cfg.joints))

    def forward(self, history: torch.Tensor, commands: torch.Tensor) -> torch.Tensor:
        responses = self.sensor(history.flatten(1))
        coefficients = self.branch(responses).view(-1, self.joints, self.basis)
        basis = self.trunk(commands.flatten(1)).view(-1, self.joints, self.basis)
        return (coefficients * basis).sum(dim=2) + self.bias


class _Block(nn.Module):
    """Pre-norm self-attention + feed-forward block with explicit matmuls (exports identically)."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_width = heads, width // heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ff = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, width = x.shape
        qkv = self.qkv(self.norm1(x)).view(batch, tokens, 3, self.heads, self.head_width).permute(2, 0, 3, 1, 4)
        weights = torch.softmax(qkv[0] @ qkv[1].transpose(-1, -2) / math.sqrt(self.head_width), dim=-1)
        attended = (weights @ qkv[2]).transpose(1, 2).reshape(batch, tokens, width)
        x = x + self.proj(attended)
        return x + self.ff(self.norm2(x))


class HistoryTransformer(nn.Module):
    """Encoder over H history-row tokens and K command tokens; Δ is read from the current-command token."""

    def __init__(self, cfg: ArchConfig) -> None:
        super().__init__()
        self.history_len = cfg.history
        self.history_in = nn.Linear(cfg.features * cfg.joints, cfg.hidden)
        self.command_in = nn.Linear(cfg.joints, cfg.hidden)
        self.position = nn.Parameter(torch.zeros(1, cfg.history + cfg.future_steps, cfg.hidden))
        nn.init.normal_(self.position, std=0.02)
        self.blocks = nn.ModuleList([_Block(cfg.hidden, cfg.heads) for _ in range(cfg.layers)])
        self.norm = nn.LayerNorm(cfg.hidden)
        self.out = nn.Linear(cfg.hidden, cfg.joints)

    def forward(self, history: torch.Tensor, commands: torch.Tensor) -> torch.Tensor:
        x = torch.cat((self.history_in(history), self.command_in(commands)), dim=1) + self.position
        for block in self.blocks:
            x = block(x)
        return self.out(self.norm(x[:, self.history_len]))


class PerJointLinear(nn.Module):
    """ARX baseline: Δ_j is an affine function of joint j's own history columns and command rows only."""

    def __init__(self, cfg: ArchConfig) -> None:
        super().__init__()
        self.joints, self.features = cfg.joints, cfg.features
        self.inputs = cfg.history * cfg.features + cfg.future_steps
        self.weight = nn.Parameter(torch.zeros(cfg.joints, self.inputs))
        self.bias = nn.Parameter(torch.zeros(cfg.joints))

    def regressors(self, history: torch.Tensor, commands: torch.Tensor) -> torch.Tensor:
        """``(B, J, H·F + K)``: per joint, its history columns (row-major) then its command rows."""
        batch = history.shape[0]
        own = history.reshape(batch, -1, self.features, self.joints).permute(0, 3, 1, 2).reshape(batch, self.joints, -1)
        return torch.cat((own, commands.transpose(1, 2)), dim=2)

    def forward(self, history: torch.Tensor, commands: torch.Tensor) -> torch.Tensor:
        return (self.regressors(history, commands) * self.weight).sum(dim=2) + self.bias

    @torch.no_grad()
    def fit_ridge(self, history: torch.Tensor, commands: torch.Tensor, delta: torch.Tensor, ridge: float) -> None:
        """Closed-form ridge regression per joint (the bias is not penalised)."""
        x = self.regressors(history, commands).double()
        for j in range(self.joints):
            design = torch.cat((x[:, j], torch.ones(len(x), 1, dtype=torch.float64)), dim=1)
            penalty = ridge * len(x) * torch.eye(design.shape[1], dtype=torch.float64)
            penalty[-1, -1] = 0.0
            solution = torch.linalg.solve(design.T @ design + penalty, design.T @ delta[:, j].double())
            self.weight[j] = solution[:-1].float()
            self.bias[j] = solution[-1].float()


def build_model(cfg: ArchConfig) -> nn.Module:
    """The network for ``cfg.kind``."""
    kinds: dict[str, type[nn.Module]] = {"deeponet": DeepONet, "transformer": HistoryTransformer, "mlp": HistoryMLP,
                                         "joint_mlp": JointMLP, "linear": PerJointLinear}
    return kinds[cfg.kind](cfg)
