"""Train one compensator on many arms (:class:`~so101_gaponet.context.ContextCompensator`), and refine it on one.

The samples are the per-arm trainer's (:mod:`so101_gaponet.train`): at step ``t`` the command rows are the
trajectory the arm followed next, ``q_{t+1} … q_{t+horizon}``, and the label is ``Δ = u_t − q_{t+1}``. What
is new is the history window: it is **drawn from elsewhere in the same arm's recordings** (any episode of
that arm, any time), never the window that ends at ``t``. The window then carries what every stretch of
that arm's response shares — which arm it is — and nothing about the sample's own moment: with the
adjacent window the network would learn to extrapolate the commands it sees sent (the shortcut that made
the previous-command inputs 1.5–10× worse than no compensation; package README).

Arms are told apart by the episode's (or its dataset's) ``profile`` metadata, else by dataset. :func:`train_population` fits a
new network; ``initial`` continues from a fitted one on new data with its normalisation and scales kept
(per-arm refinement, :mod:`so101_gaponet.refine`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from so101_common.paired_dataset import PairedDataset
from so101_common.trajectory import causal_velocity
from so101_gaponet.context import ContextCompensator
from so101_gaponet.metadata import HISTORY_FEATURES, GapModelMetadata, Normalisation
from so101_gaponet.train import TrainingError, _bounds, git_revision

__all__ = ["PopulationConfig", "PopulationSamples", "PopulationResult", "population_samples", "train_population",
           "validation_loss"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PopulationConfig:
    """Training settings of the population compensator."""

    context_rows: int = 50  # history rows the branch reads (1 s at 50 Hz)
    warmup_rows: int = 5  # measured rows the core needs before the model runs (the older rows repeat the first)
    horizon: int = 8  # command rows: the current command and horizon − 1 upcoming ones
    hidden: int = 64
    encoder_hidden: int = 32
    latent: int = 4  # latent size per joint of the branch over the history window; 0: no branch
    # the branch also reads the window's response figures (ContextCompensator.response); measured on the validation
    # arms: the stiffest arm's lift −1 → 26 %, its wrist roll 37 → 68 %
    identification: bool = True
    arm_latent: bool = False  # each joint's trunk also reads the latents' mean over the joints
    epochs: int = 30
    batch_size: int = 256
    learning_rate: float = 3e-3
    weight_decay: float = 1e-4
    seed: int = 0
    validation_fraction: float = 0.1
    feedback_gain: float = 0.05  # the core's integral feedback (per step), as the per-arm trainer's
    direction_play: float = 0.001  # rad, one integral correction per direction of motion
    delta_bound: float | None = None  # |Δ| limit for every joint; None: from the data
    progress: bool = True

    def __post_init__(self) -> None:
        if min(self.context_rows, self.warmup_rows, self.horizon, self.epochs, self.batch_size) < 1 or self.latent < 0:
            raise TrainingError("context_rows, warmup_rows, horizon, epochs and batch_size must be ≥ 1, latent ≥ 0")
        if self.warmup_rows > self.context_rows:
            raise TrainingError("warmup_rows must not exceed context_rows")
        if not 0 < self.validation_fraction < 0.5:
            raise TrainingError("validation_fraction must be in (0, 0.5)")


@dataclass
class PopulationSamples:
    """Every episode's rows on one axis, and which rows make samples and which make windows, per arm."""

    rows: np.ndarray  # (N, 3J) float32: [q_i, q̇_i, u_{i−1}] per step, episodes one after the other
    position: np.ndarray  # (N, J) float32: q_i
    sent: np.ndarray  # (N, J) float32: u_i, the command sent at step i
    samples: np.ndarray  # (S,) int64: steps t with a full look-ahead, outside fault spans
    sample_arm: np.ndarray  # (S,) int64
    windows: list[np.ndarray]  # per arm: steps a full window ends at
    arms: list[str]
    joints: tuple[str, ...]
    rate_hz: float
    datasets: list[str] = field(default_factory=list)


def population_samples(datasets: Sequence[PairedDataset], context_rows: int, horizon: int) -> PopulationSamples:
    """The samples of ``datasets`` (each arm: a dataset, or the episodes of one ``profile`` within it)."""
    if not datasets:
        raise TrainingError("no dataset given")
    joints, rate = tuple(datasets[0].joint_names), float(datasets[0].rate_hz)
    rows, positions, sents, samples, sample_arm = [], [], [], [], []
    windows: dict[str, list[np.ndarray]] = {}
    offset = 0
    for index, dataset in enumerate(datasets):
        if tuple(dataset.joint_names) != joints or not math.isclose(dataset.rate_hz, rate):
            raise TrainingError(f"{dataset.path}: joints/rate differ from the first dataset's {list(joints)} @ {rate} Hz")
        for episode in dataset.episodes:
            arm = str(episode.metadata.get("profile") or dataset.metadata.get("profile") or f"dataset {index}")
            q = episode.real_position
            u = episode.command
            count = len(q)
            if count < context_rows + horizon + 1:
                continue
            qd = np.where(np.isnan(episode.real_velocity), causal_velocity(q, episode.time), episode.real_velocity)
            previous = np.vstack([q[:1], u[:-1]])
            rows.append(np.concatenate([q, qd, previous], axis=1))
            positions.append(q)
            sents.append(u)
            bad = episode.fault_mask() | ~np.isfinite(q).all(axis=1) | ~np.isfinite(u).all(axis=1)
            # a sample at t reads q_{t+1..t+horizon} and u_t; a window ending at t reads rows t−rows+1..t
            ahead = np.lib.stride_tricks.sliding_window_view(bad, horizon + 1)[:count - horizon].any(axis=1)
            steps = np.flatnonzero(~ahead)
            behind = np.lib.stride_tricks.sliding_window_view(bad, context_rows).any(axis=1)
            ends = np.flatnonzero(~behind) + context_rows - 1
            arm_id = list(windows).index(arm) if arm in windows else len(windows)
            windows.setdefault(arm, []).append(ends + offset)
            samples.append(steps + offset)
            sample_arm.append(np.full(len(steps), arm_id))
            offset += count
    if not samples or sum(len(s) for s in samples) < 10:
        raise TrainingError("too few samples: every episode is shorter than the window and the look-ahead")
    per_arm = [np.concatenate(w) for w in windows.values()]
    arm_ids = np.concatenate(sample_arm)
    keep = np.array([len(per_arm[a]) > 0 for a in arm_ids])
    return PopulationSamples(rows=np.concatenate(rows).astype(np.float32), position=np.concatenate(positions).astype(np.float32),
                             sent=np.concatenate(sents).astype(np.float32), samples=np.concatenate(samples)[keep],
                             sample_arm=arm_ids[keep], windows=per_arm, arms=list(windows), joints=joints, rate_hz=rate,
                             datasets=[str(d.path or "") for d in datasets])


class _Batches:
    """Raw (history window, command rows, Δ) tensors for sample indices, each with a window of its arm."""

    def __init__(self, data: PopulationSamples, context_rows: int, horizon: int) -> None:
        self.data, self.context_rows, self.horizon = data, context_rows, horizon
        self._window_offsets = np.arange(-context_rows + 1, 1)
        self._ahead_offsets = np.arange(1, horizon + 1)

    def raw(self, index: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        data = self.data
        t = data.samples[index]
        arms = data.sample_arm[index]
        ends = np.array([data.windows[a][rng.integers(len(data.windows[a]))] for a in arms])
        history = data.rows[ends[:, None] + self._window_offsets]
        commands = data.position[t[:, None] + self._ahead_offsets]
        delta = data.sent[t] - data.position[t + 1]
        return history, commands, delta


def _normalisation(batches: _Batches, rng: np.random.Generator, count: int = 20000) -> Normalisation:
    index = rng.integers(len(batches.data.samples), size=min(count, len(batches.data.samples)))
    history, commands, delta = batches.raw(index, rng)

    def stats(values: np.ndarray, axis: tuple[int, ...]) -> tuple[tuple[float, ...], tuple[float, ...]]:
        std = values.std(axis=axis)
        return tuple(map(float, values.mean(axis=axis))), tuple(float(s) if s > 1e-6 else 1.0 for s in std)

    h_mean, h_std = stats(history, (0, 1))
    c_mean, c_std = stats(commands, (0, 1))
    d_mean, d_std = stats(delta, (0,))
    return Normalisation(history_mean=h_mean, history_std=h_std, command_mean=c_mean, command_std=c_std,
                         delta_mean=d_mean, delta_std=d_std)


def _scales(batches: _Batches, rng: np.random.Generator, count: int = 20000) -> dict[str, np.ndarray]:
    """The fixed per-joint scales of the graph: Δ's spread (relative command rows), and the spread of the
    window's lag and shape rows (the branch's inputs)."""
    index = rng.integers(len(batches.data.samples), size=min(count, len(batches.data.samples)))
    history, _, delta = batches.raw(index, rng)
    joints = delta.shape[1]
    position, sent = history[:, :, :joints], history[:, :, 2 * joints:]
    shape = position - position.mean(axis=1, keepdims=True)
    return {"relative_scale": np.maximum(delta.std(axis=0), 1e-3),
            "lag_scale": np.maximum((sent - position).std(axis=(0, 1)), 1e-3),
            "shape_scale": np.maximum(shape.std(axis=(0, 1)), 1e-3)}


def _tensors(norm: Normalisation, history: np.ndarray, commands: np.ndarray, delta: np.ndarray) -> list[torch.Tensor]:
    return [torch.from_numpy(((a - np.asarray(m, np.float32)) / np.asarray(s, np.float32)).astype(np.float32))
            for a, m, s in ((history, norm.history_mean, norm.history_std),
                            (commands, norm.command_mean, norm.command_std), (delta, norm.delta_mean, norm.delta_std))]


@dataclass
class PopulationResult:
    module: ContextCompensator
    metadata: GapModelMetadata
    train_losses: list[float] = field(default_factory=list)
    validation_losses: list[float] = field(default_factory=list)
    initial_validation_loss: float = math.nan


def validation_loss(module: ContextCompensator, normalisation: Normalisation, data: PopulationSamples, config: PopulationConfig,
                    seed: int = 0, count: int = 4096) -> float:
    """Normalised MSE of Δ of ``module`` on (a seeded draw of up to ``count``) samples of ``data``."""
    rng = np.random.default_rng(seed)
    batches = _Batches(data, config.context_rows, config.horizon)
    index = rng.permutation(len(data.samples))[:count]
    history, commands, delta = _tensors(normalisation, *batches.raw(index, rng))
    module.eval()
    with torch.no_grad():
        return float(torch.nn.functional.mse_loss(module(history, commands), delta).item())


def train_population(datasets: Sequence[PairedDataset], config: PopulationConfig = PopulationConfig(),
                     initial: PopulationResult | None = None, provenance: dict[str, Any] | None = None) -> PopulationResult:
    """Fit the population compensator on ``datasets`` (``initial``: continue from that model, keeping its
    normalisation, scales and bounds)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small networks on shared cores (see so101_gaponet.train.fit_network)
    try:
        return _train(datasets, config, initial, provenance or {})
    finally:
        torch.set_num_threads(threads)


def _train(datasets: Sequence[PairedDataset], config: PopulationConfig, initial: PopulationResult | None,
           provenance: dict[str, Any]) -> PopulationResult:
    data = population_samples(datasets, config.context_rows, config.horizon)
    rng = np.random.default_rng(config.seed)
    batches = _Batches(data, config.context_rows, config.horizon)
    torch.manual_seed(config.seed)
    if initial is None:
        norm = _normalisation(batches, rng)
        module = ContextCompensator(norm, data.joints, config.horizon, config.context_rows, **_scales(batches, rng),
                                    hidden=config.hidden, encoder_hidden=config.encoder_hidden, latent=config.latent,
                                    identification=config.identification, arm_latent=config.arm_latent)
        bounds = _bounds(batches.raw(np.arange(len(data.samples)), rng)[2], config.delta_bound)
    else:
        norm, module, bounds = initial.metadata.normalisation, initial.module, initial.metadata.delta_bounds
    order = rng.permutation(len(data.samples))
    split = max(1, int(len(order) * config.validation_fraction))
    val_idx, train_idx = order[:split], order[split:]
    validation = _tensors(norm, *batches.raw(val_idx, np.random.default_rng(config.seed + 1)))

    def evaluate() -> float:
        module.eval()
        with torch.no_grad():
            loss = float(torch.nn.functional.mse_loss(module(validation[0], validation[1]), validation[2]).item())
        module.train()
        return loss

    result = PopulationResult(module, _metadata(data, config, norm, bounds, module, provenance),
                              initial_validation_loss=evaluate())
    optimiser = torch.optim.AdamW(module.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, T_max=config.epochs)
    bar = tqdm(range(config.epochs), desc="train population compensator", unit="epoch", disable=not config.progress)
    for _epoch in bar:
        total = 0.0
        for start in range(0, len(train_idx), config.batch_size):
            batch = rng.permutation(train_idx)[:config.batch_size] if start == 0 else None
            batch = train_idx[rng.integers(len(train_idx), size=config.batch_size)] if batch is None else batch
            history, commands, delta = _tensors(norm, *batches.raw(batch, rng))
            optimiser.zero_grad()
            loss = torch.nn.functional.mse_loss(module(history, commands), delta)
            loss.backward()
            optimiser.step()
            total += loss.item() * len(batch)
        scheduler.step()
        result.train_losses.append(total / max(len(train_idx), 1))
        result.validation_losses.append(evaluate())
        bar.set_postfix(train=f"{result.train_losses[-1]:.4f}", val=f"{result.validation_losses[-1]:.4f}")
    module.eval()
    result.metadata = _metadata(data, config, norm, bounds, module, {
        **provenance, "initial_validation_loss": result.initial_validation_loss,
        "final_train_loss": result.train_losses[-1], "final_validation_loss": result.validation_losses[-1]})
    _log.info("trained the population compensator on %d arms, %d samples: validation loss %.4f → %.4f", len(data.arms),
              len(data.samples), result.initial_validation_loss, result.validation_losses[-1])
    return result


def _metadata(data: PopulationSamples, config: PopulationConfig, norm: Normalisation, bounds: tuple[float, ...],
              module: ContextCompensator, provenance: dict[str, Any]) -> GapModelMetadata:
    import datetime

    joints = len(data.joints)
    return GapModelMetadata(
        role="compensator", model_kind="context_mlp", joints=data.joints, history=config.context_rows,
        warmup_rows=config.warmup_rows, future_steps=config.horizon, rate_hz=data.rate_hz, horizon=config.horizon,
        history_features=HISTORY_FEATURES, normalisation=norm, delta_bounds=tuple(bounds),
        delta_slew_limit=tuple(b / 3 for b in bounds), delta_smoothing_s=0.0,
        feedback_gain=(config.feedback_gain,) * joints if config.feedback_gain > 0 else None,
        direction_play=config.direction_play,
        provenance={"datasets": [Path(d).name for d in data.datasets if d], "arms": len(data.arms),
                    "samples": int(len(data.samples)),
                    "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "git_rev": git_revision(),
                    "epochs": config.epochs, "seed": config.seed,
                    "objective": "look-ahead inverse of the real response: rows real_position_{t+1..t+horizon}, "
                                 "delta = command_t - real_position_{t+1}; history window from elsewhere in the "
                                 "same arm's recordings", **provenance},
        architecture={"joints": joints, "future_steps": config.horizon, **module.record()},
    )
