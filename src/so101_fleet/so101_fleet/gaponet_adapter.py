"""The one place so101_fleet touches :mod:`so101_gaponet` (training samples, model, objective, export).

Distributed training runs GapONet's compensator objective in every Ray Train worker. It uses the same
public steps :func:`so101_gaponet.train.train` is built from (``compensator_samples``,
``normalisation_of``, ``normalised_tensors``, ``delta_loss``, ``compensator_metadata``) and the same
export check (:func:`so101_gaponet.export.write_and_check`), so single-process and distributed runs
share one implementation and write the same model file contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from so101_common.paired_dataset import DatasetError
from so101_gaponet.export import write_and_check
from so101_gaponet.metadata import GapModelMetadata, ModelFileError, Normalisation
from so101_gaponet.train import (
    CompensatorSamples,
    TrainConfig,
    TrainingError,
    compensator_metadata,
    compensator_module,
    compensator_samples,
    delta_loss,
    normalisation_of,
    normalised_tensors,
)

__all__ = ["TrainConfig", "TrainingError", "DatasetError", "ModelFileError", "Prepared", "prepare", "split",
           "build_module", "objective", "model_metadata", "export"]


@dataclass
class Prepared:
    """Normalised training samples of some paired datasets, and what the model file needs of them."""

    samples: CompensatorSamples
    normalisation: Normalisation
    tensors: list[torch.Tensor]  # [history, commands, delta], normalised

    @property
    def size(self) -> int:
        return len(self.samples.history)

    def to(self, device: torch.device) -> None:
        self.tensors = [t.to(device) for t in self.tensors]


def prepare(paths: Sequence[str | Path], config: TrainConfig) -> Prepared:
    """The samples and normalisation ``train()`` fits on (the same arrays, in the same order)."""
    samples = compensator_samples(paths, config)
    norm = normalisation_of(samples.history, samples.commands, samples.delta)
    return Prepared(samples, norm, normalised_tensors(norm, samples.history, samples.commands, samples.delta))


def split(samples: int, config: TrainConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """``(validation, training)`` sample indices, as ``train()`` draws them from the seed."""
    order = np.random.default_rng(config.seed).permutation(samples)
    cut = max(1, int(len(order) * config.validation_fraction))
    return torch.from_numpy(order[:cut]), torch.from_numpy(order[cut:])


def build_module(prepared: Prepared, config: TrainConfig) -> torch.nn.Module:
    """The network, initialised from the seed as ``train()`` does."""
    torch.manual_seed(config.seed)
    return compensator_module(prepared.samples, config, prepared.normalisation)


def objective(module: torch.nn.Module, prepared: Prepared, index: torch.Tensor, config: TrainConfig) -> torch.Tensor:
    """``train()``'s loss on the samples ``index``."""
    return delta_loss(module, prepared.tensors, index, prepared.normalisation, config.delta_l2)


def model_metadata(prepared: Prepared, config: TrainConfig, losses: dict[str, float],
                   extra: dict[str, object]) -> GapModelMetadata:
    """The model file metadata ``train()`` writes, with ``extra`` provenance (e.g. the Ray workers)."""
    return compensator_metadata(prepared.samples, config, prepared.normalisation, losses, dict(extra))


def export(module: torch.nn.Module, metadata: GapModelMetadata, out: Path, file_format: str) -> float:
    """Write the model file, reload it and return the largest difference to the torch module."""
    return write_and_check(module, metadata, out, file_format)
