"""Supervised GapONet training from paired datasets: learn the inverse of the real arm's response.

Objective (what the deployed compensator needs): at step ``t`` the policy commands ``c_t``, the
position the sim would reach and hold; the compensator must pick the command ``u_t`` that makes the
*real* arm follow it. From the real side of the data we learn that inverse over a horizon of ``K``
steps (≈ the arm's lag): given the real history up to ``t`` (rows ``[q_i, q̇_i, u_{i−1}]``) and the
trajectory the real arm actually followed next, summarised as its mean position over the horizon
``y = mean(q_{t+1} … q_{t+K})``, predict the command that was sent (``u_t``). The network outputs
``Δ = u_t − y``; at deploy time the target is the policy command held over the horizon
(``y := c_t``) and the compensator sends ``c_t + Δ``.

Why a horizon and not the next step: the one-step inverse of a lagging servo is a gain of
``1/α − 1`` (≈ 4.5 for τ = 100 ms at 50 Hz) on the position error, and the compensator feeds that
back through the measured history: a high-gain loop that rings on any arm that is not exactly the
training arm. Over ``K ≈ τ/dt`` steps the same inverse is a gain near 1. An L2 penalty pulls Δ
toward 0 where the data do not ask for it, and the exported model carries tight Δ bounds, a Δ slew
limit and optional Δ smoothing (applied by the compensator core).
"""

from __future__ import annotations

import datetime
import logging
import math
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from so101_common.paired_dataset import DatasetError, PairedDataset
from so101_common.trajectory import causal_velocity
from so101_gaponet.metadata import HISTORY_FEATURES, GapModelMetadata, Normalisation
from so101_gaponet.models import ArchConfig, build_model

__all__ = ["TrainConfig", "TrainResult", "TrainingError", "build_samples", "train", "git_revision"]

_log = logging.getLogger(__name__)


class TrainingError(ValueError):
    """Training cannot run on the given data or settings."""


@dataclass(frozen=True)
class TrainConfig:
    """Training settings."""

    arch: str = "deeponet"  # "deeponet" or "mlp"
    history: int = 4  # rows of history the model reads
    horizon: int = 5  # steps over which the target trajectory is reached (≈ the arm's lag in steps)
    epochs: int = 30  # passes over the training samples
    batch_size: int = 256
    learning_rate: float = 3e-3
    hidden: int = 64  # width of hidden layers
    seed: int = 0  # torch / numpy seed: same data + seed → same model
    validation_fraction: float = 0.1  # share of samples held out for the validation loss
    delta_bound: float | None = None  # |Δ| limit (rad) for every joint; None: from the data (see _bounds)
    delta_slew: float | None = None  # Δ slew limit (rad/step) for every joint; None: a tenth of each Δ bound
    delta_smoothing_s: float = 0.0  # time constant of the Δ low-pass stored in the model (s); 0 = none
    delta_l2: float = 0.05  # weight of the L2 penalty on Δ (in units of the training Δ's std): Δ → 0 unless needed
    weight_decay: float = 1e-4  # AdamW weight decay on the network's parameters
    progress: bool = True  # tqdm progress bar

    def __post_init__(self) -> None:
        if self.arch not in ("deeponet", "mlp"):
            raise TrainingError(f"unknown arch {self.arch!r}; expected deeponet or mlp")
        if self.history < 1 or self.horizon < 1 or self.epochs < 1 or self.batch_size < 1:
            raise TrainingError("history, horizon, epochs and batch_size must be ≥ 1")
        if not 0 < self.validation_fraction < 0.5:
            raise TrainingError("validation_fraction must be in (0, 0.5)")
        if self.delta_bound is not None and not self.delta_bound > 0:
            raise TrainingError("delta_bound must be > 0")
        if self.delta_slew is not None and not self.delta_slew > 0:
            raise TrainingError("delta_slew must be > 0")
        if not (self.delta_smoothing_s >= 0 and self.delta_l2 >= 0 and self.weight_decay >= 0):
            raise TrainingError("delta_smoothing_s, delta_l2 and weight_decay must be ≥ 0")


@dataclass
class TrainResult:
    module: torch.nn.Module
    metadata: GapModelMetadata
    train_losses: list[float] = field(default_factory=list)  # per epoch, normalised MSE
    validation_losses: list[float] = field(default_factory=list)
    initial_validation_loss: float = math.nan  # before the first step


def build_samples(dataset: PairedDataset, history: int, horizon: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(history (S, H, 3J), target (S, J), delta (S, J))`` from every episode, skipping NaN samples."""
    histories, targets, deltas = [], [], []
    for episode in dataset.episodes:
        q = episode.real_position
        estimate = causal_velocity(q, episode.time)  # where the dataset has no measured velocity (NaN)
        qd = np.where(np.isnan(episode.real_velocity), estimate, episode.real_velocity)
        command = episode.command
        previous = np.vstack([q[:1], command[:-1]])  # the command in force when q_i was measured
        rows = np.concatenate([q, qd, previous], axis=1)
        count = len(q) - history - horizon + 1
        if count <= 0:
            continue
        index = np.arange(history - 1, history - 1 + count)
        window = np.lib.stride_tricks.sliding_window_view(rows, history, axis=0)[:count].transpose(0, 2, 1)
        # mean of q[t+1 … t+horizon] for each t in index (the trajectory the command produced)
        ahead = np.lib.stride_tricks.sliding_window_view(q[history:], horizon, axis=0)[:count]
        target = ahead.mean(axis=2)
        delta = command[index] - target
        keep = np.isfinite(window).all(axis=(1, 2)) & np.isfinite(target).all(axis=1) & np.isfinite(delta).all(axis=1)
        histories.append(window[keep])
        targets.append(target[keep])
        deltas.append(delta[keep])
    if not histories or sum(len(h) for h in histories) < 10:
        raise TrainingError(f"{dataset.path}: too few samples for history {history} and horizon {horizon}")
    return np.concatenate(histories), np.concatenate(targets), np.concatenate(deltas)


def _stats(values: np.ndarray, axis: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    mean = values.mean(axis=axis)
    std = values.std(axis=axis)
    return mean, np.where(std > 1e-6, std, 1.0)  # constant features (an unmoved joint) stay unscaled


MAX_DEFAULT_BOUND = 0.1  # rad: cap of data-derived Δ bounds; a compensator is a correction, not a controller


def _bounds(delta: np.ndarray, fixed: float | None) -> tuple[float, ...]:
    """|Δ| limits: given, or 1.5 × the 99.9th percentile of the training Δ, within [0.005, 0.1] rad."""
    if fixed is not None:
        return (float(fixed),) * delta.shape[1]
    return tuple(float(b) for b in np.clip(1.5 * np.percentile(np.abs(delta), 99.9, axis=0), 0.005, MAX_DEFAULT_BOUND))


def git_revision() -> str:
    """The workspace's git commit, or '' outside a checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _load(paths: Sequence[str | Path]) -> list[PairedDataset]:
    if not paths:
        raise TrainingError("no dataset given")
    datasets = [PairedDataset.load(p) for p in paths]
    first = datasets[0]
    for other in datasets[1:]:
        if other.joint_names != first.joint_names or not math.isclose(other.rate_hz, first.rate_hz):
            raise DatasetError(f"{other.path}: joints/rate {other.joint_names}@{other.rate_hz} Hz differ from "
                               f"{first.path}: {first.joint_names}@{first.rate_hz} Hz")
    return datasets


def train(dataset_paths: Sequence[str | Path], config: TrainConfig) -> TrainResult:
    """Train on the paired datasets; returns the torch module and the metadata for export."""
    datasets = _load(dataset_paths)
    parts = [build_samples(d, config.history, config.horizon) for d in datasets]
    history = np.concatenate([p[0] for p in parts]).astype(np.float32)
    target = np.concatenate([p[1] for p in parts]).astype(np.float32)
    delta = np.concatenate([p[2] for p in parts]).astype(np.float32)
    joints = datasets[0].joint_names
    h_mean, h_std = _stats(history, (0, 1))
    t_mean, t_std = _stats(target, (0,))
    d_mean, d_std = _stats(delta, (0,))

    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    order = rng.permutation(len(history))
    split = max(1, int(len(order) * config.validation_fraction))
    tensors = [torch.from_numpy(a) for a in ((history - h_mean) / h_std, (target - t_mean) / t_std, (delta - d_mean) / d_std)]
    val_idx, train_idx = torch.from_numpy(order[:split]), torch.from_numpy(order[split:])

    arch = ArchConfig(kind=config.arch, joints=len(joints), history=config.history, features=len(HISTORY_FEATURES), hidden=config.hidden)
    module = build_model(arch)
    optimiser = torch.optim.AdamW(module.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, T_max=config.epochs)
    loss_fn = torch.nn.MSELoss()
    zero_delta = torch.from_numpy(-d_mean / d_std)  # Δ = 0 in normalised units

    def objective(index: torch.Tensor) -> torch.Tensor:
        predicted = module(tensors[0][index], tensors[1][index])
        return loss_fn(predicted, tensors[2][index]) + config.delta_l2 * torch.mean((predicted - zero_delta) ** 2)

    def evaluate() -> float:
        module.eval()
        with torch.no_grad():
            loss = objective(val_idx).item()
        module.train()
        return loss

    result = TrainResult(module, None, initial_validation_loss=evaluate())  # type: ignore[arg-type]
    generator = torch.Generator().manual_seed(config.seed)
    bar = tqdm(range(config.epochs), desc=f"train {config.arch}", unit="epoch", disable=not config.progress)
    for _epoch in bar:
        total = 0.0
        for batch in torch.split(train_idx[torch.randperm(len(train_idx), generator=generator)], config.batch_size):
            optimiser.zero_grad()
            loss = objective(batch)
            loss.backward()
            optimiser.step()
            total += loss.item() * len(batch)
        scheduler.step()
        result.train_losses.append(total / len(train_idx))
        result.validation_losses.append(evaluate())
        bar.set_postfix(train=f"{result.train_losses[-1]:.4f}", val=f"{result.validation_losses[-1]:.4f}")
    module.eval()

    profiles = sorted({str(d.metadata.get("profile", "")) for d in datasets} - {""})
    bounds = _bounds(delta, config.delta_bound)
    result.metadata = GapModelMetadata(
        model_kind=config.arch, joints=tuple(joints), history=config.history, rate_hz=float(datasets[0].rate_hz),
        horizon=config.horizon, history_features=HISTORY_FEATURES,
        normalisation=Normalisation(tuple(map(float, h_mean)), tuple(map(float, h_std)), tuple(map(float, t_mean)),
                                    tuple(map(float, t_std)), tuple(map(float, d_mean)), tuple(map(float, d_std))),
        delta_bounds=bounds,
        delta_slew_limit=tuple(config.delta_slew if config.delta_slew is not None else b / 10 for b in bounds),
        delta_smoothing_s=config.delta_smoothing_s,
        provenance={
            "datasets": [Path(p).name for p in dataset_paths], "profile": ",".join(profiles),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "git_rev": git_revision(),
            "samples": len(history), "epochs": config.epochs, "seed": config.seed,
            "objective": "inverse real response over the horizon: delta = command_t - mean(real_position_{t+1..t+horizon})",
            "delta_l2": config.delta_l2, "weight_decay": config.weight_decay,
            "initial_validation_loss": result.initial_validation_loss,
            "final_train_loss": result.train_losses[-1], "final_validation_loss": result.validation_losses[-1],
        },
        architecture={"kind": arch.kind, "hidden": arch.hidden, "probes": arch.probes, "basis": arch.basis},
    )
    _log.info("trained %s on %d samples: validation loss %.4f → %.4f", config.arch, len(history),
              result.initial_validation_loss, result.validation_losses[-1])
    return result
