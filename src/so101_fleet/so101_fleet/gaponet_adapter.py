"""The one place so101_fleet touches :mod:`so101_gaponet` (training data, model, metadata, export).

Distributed training runs GapONet's training objective in every Ray Train worker, so it needs the
pieces :func:`so101_gaponet.train.train` is built from: the samples and their normalisation
(:func:`prepare`), the network (:func:`build_module`), the objective (:func:`objective`) and the
model file metadata (:func:`model_metadata`). ``so101_gaponet.train`` keeps them inside ``train()``;
this module re-assembles them from its helpers and mirrors its metadata block, so the single-process
and the distributed runs write the same model file contract. When ``so101_gaponet`` exposes these
steps itself, this module shrinks to imports.
"""

from __future__ import annotations

import datetime
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from so101_common.paired_dataset import DatasetError
from so101_gaponet.metadata import HISTORY_FEATURES, GapModelMetadata, ModelFileError, Normalisation
from so101_gaponet.model_file import load_model, save_onnx, save_torchscript
from so101_gaponet.models import ArchConfig, build_model
from so101_gaponet.train import TrainConfig, TrainingError, build_samples, git_revision
from so101_gaponet.train import _bounds as delta_bounds
from so101_gaponet.train import _load as load_datasets
from so101_gaponet.train import _stats as feature_stats

__all__ = ["TrainConfig", "TrainingError", "DatasetError", "ModelFileError", "Prepared", "prepare", "split",
           "build_module", "objective", "model_metadata", "export"]


@dataclass
class Prepared:
    """Normalised training samples of some paired datasets, and what the model file needs of them."""

    history: torch.Tensor  # (S, H, 3J) normalised
    target: torch.Tensor  # (S, J)
    delta: torch.Tensor  # (S, J)
    raw_delta: np.ndarray  # (S, J) rad, for the Δ bounds
    normalisation: Normalisation
    joints: tuple[str, ...]
    rate_hz: float
    datasets: list[str]
    profiles: list[str]


def prepare(paths: Sequence[str | Path], config: TrainConfig) -> Prepared:
    """What ``train()`` builds before its first step (the same arrays, in the same order)."""
    datasets = load_datasets(paths)
    parts = [build_samples(d, config.history, config.horizon) for d in datasets]
    history = np.concatenate([p[0] for p in parts]).astype(np.float32)
    target = np.concatenate([p[1] for p in parts]).astype(np.float32)
    delta = np.concatenate([p[2] for p in parts]).astype(np.float32)
    h_mean, h_std = feature_stats(history, (0, 1))
    t_mean, t_std = feature_stats(target, (0,))
    d_mean, d_std = feature_stats(delta, (0,))
    norm = Normalisation(*(tuple(map(float, a)) for a in (h_mean, h_std, t_mean, t_std, d_mean, d_std)))
    return Prepared(torch.from_numpy((history - h_mean) / h_std), torch.from_numpy((target - t_mean) / t_std),
                    torch.from_numpy((delta - d_mean) / d_std), delta, norm, tuple(datasets[0].joints),
                    float(datasets[0].rate_hz), [d.path.name for d in datasets],
                    sorted({d.profile for d in datasets} - {""}))


def split(samples: int, config: TrainConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """``(validation, training)`` sample indices, as ``train()`` draws them from the seed."""
    order = np.random.default_rng(config.seed).permutation(samples)
    cut = max(1, int(len(order) * config.validation_fraction))
    return torch.from_numpy(order[:cut]), torch.from_numpy(order[cut:])


def build_module(prepared: Prepared, config: TrainConfig) -> torch.nn.Module:
    """The network, initialised from the seed as ``train()`` does."""
    torch.manual_seed(config.seed)
    return build_model(ArchConfig(kind=config.arch, joints=len(prepared.joints), history=config.history,
                                  features=len(HISTORY_FEATURES), hidden=config.hidden))


def objective(module: torch.nn.Module, prepared: Prepared, index: torch.Tensor, config: TrainConfig) -> torch.Tensor:
    """``train()``'s loss on the samples ``index``: MSE of Δ plus the L2 pull of Δ toward 0."""
    zero_delta = torch.tensor([-m / s for m, s in zip(prepared.normalisation.delta_mean,
                                                      prepared.normalisation.delta_std, strict=True)])
    predicted = module(prepared.history[index], prepared.target[index])
    loss = torch.nn.functional.mse_loss(predicted, prepared.delta[index])
    return loss + config.delta_l2 * torch.mean((predicted - zero_delta) ** 2)


def model_metadata(prepared: Prepared, config: TrainConfig, losses: dict[str, float],
                   extra: dict[str, object]) -> GapModelMetadata:
    """The model file metadata ``train()`` writes, with ``extra`` provenance (e.g. the Ray workers)."""
    arch = ArchConfig(kind=config.arch, joints=len(prepared.joints), history=config.history,
                      features=len(HISTORY_FEATURES), hidden=config.hidden)
    bounds = delta_bounds(prepared.raw_delta, config.delta_bound)
    return GapModelMetadata(
        model_kind=config.arch, joints=prepared.joints, history=config.history, rate_hz=prepared.rate_hz,
        horizon=config.horizon, history_features=HISTORY_FEATURES, normalisation=prepared.normalisation,
        delta_bounds=bounds,
        delta_slew_limit=tuple(config.delta_slew if config.delta_slew is not None else b / 10 for b in bounds),
        delta_smoothing_s=config.delta_smoothing_s,
        provenance={
            "datasets": prepared.datasets, "profile": ",".join(prepared.profiles),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "git_rev": git_revision(),
            "samples": len(prepared.history), "epochs": config.epochs, "seed": config.seed,
            "objective": "inverse real response over the horizon: delta = command_t - mean(real_position_{t+1..t+horizon})",
            "delta_l2": config.delta_l2, "weight_decay": config.weight_decay, **losses, **extra,
        },
        architecture={"kind": arch.kind, "hidden": arch.hidden, "probes": arch.probes, "basis": arch.basis},
    )


def export(module: torch.nn.Module, metadata: GapModelMetadata, out: Path, file_format: str) -> float:
    """Write the model file, reload it and return the largest difference to the torch module."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit deprecation notices
        (save_onnx if file_format == "onnx" else save_torchscript)(module, metadata, out)
        model = load_model(out)
    rng = np.random.default_rng(0)
    history = rng.standard_normal((8, metadata.history, metadata.history_columns)).astype(np.float32)
    target = rng.standard_normal((8, metadata.num_joints)).astype(np.float32)
    with torch.no_grad():
        expected = module(torch.from_numpy(history), torch.from_numpy(target)).numpy()
    got = np.vstack([model.run_normalised(history[i:i + 1], target[i:i + 1]) for i in range(len(history))])
    return float(np.max(np.abs(got - expected)))
