"""GapONet training on Ray Train: the same objective as ``so101 train-gaponet``, data-parallel (DDP).

:func:`train_on_ray` runs a :class:`ray.train.torch.TorchTrainer` with ``workers`` workers (gloo on
CPU; NCCL when every worker gets a GPU). Every worker prepares the same samples, normalisation,
validation split and initial weights from the seed (:mod:`so101_fleet.gaponet_adapter`, the pieces of
``so101_gaponet.train.train``), draws the same shuffled global batches, and trains on its share of
each one (rank ``r`` of ``n`` takes every ``n``-th sample of the batch); DDP averages the gradients,
so a step sees the same global batch as the single-process run. The validation loss is computed on
the whole held-out split. Rank 0 checkpoints the weights at the end; the driver loads them and builds
the model file metadata as ``train()`` does. Memory per worker: the samples of the given datasets
(the paired datasets are small next to the bags: 50 Hz × 6 joints).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from so101_fleet.gaponet_adapter import (
    TrainConfig,
    TrainingError,
    build_module,
    model_metadata,
    objective,
    prepare,
    split,
)
from so101_fleet.ray_runtime import ray_session

__all__ = ["DistributedResult", "train_on_ray"]

_WEIGHTS = "weights.pt"


@dataclass
class DistributedResult:
    module: torch.nn.Module
    metadata: Any  # GapModelMetadata
    workers: int
    backend: str
    train_losses: list[float] = field(default_factory=list)
    validation_losses: list[float] = field(default_factory=list)
    initial_validation_loss: float = math.nan


def _train_loop(loop_config: dict[str, Any]) -> None:
    """One Ray Train worker (see the module doc)."""
    import ray.train
    import ray.train.torch

    config = TrainConfig(**loop_config["config"])
    context = ray.train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    prepared = prepare(loop_config["paths"], config)
    validation, training = split(prepared.size, config)
    module = build_module(prepared, config)
    model = ray.train.torch.prepare_model(module, move_to_device=loop_config["use_gpu"])
    device = ray.train.torch.get_device()
    prepared.to(device)
    optimiser = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, T_max=config.epochs)
    wrapped = getattr(model, "module", model)  # DDP keeps the network as .module (one worker: no wrapper)
    local: torch.nn.Module = wrapped if isinstance(wrapped, torch.nn.Module) else model

    def evaluate() -> float:
        local.eval()
        with torch.no_grad():
            loss = objective(local, prepared, validation, config).item()
        local.train()
        return loss

    initial = evaluate()
    generator = torch.Generator().manual_seed(config.seed)
    train_losses, validation_losses = [], []
    for epoch in range(config.epochs):
        total, count = 0.0, 0
        for batch in torch.split(training[torch.randperm(len(training), generator=generator)], config.batch_size):
            if len(batch) < world:
                continue  # every rank must take part in every step (DDP): a batch too small for all is dropped
            shard = batch[rank::world]
            optimiser.zero_grad()
            loss = objective(model, prepared, shard, config)
            loss.backward()
            optimiser.step()
            total += loss.item() * len(shard)
            count += len(shard)
        scheduler.step()
        train_losses.append(total / max(count, 1))
        validation_losses.append(evaluate())
        metrics: dict[str, Any] = {"epoch": epoch + 1, "train_loss": train_losses[-1],
                                   "validation_loss": validation_losses[-1]}
        if epoch + 1 < config.epochs:
            ray.train.report(metrics)
            continue
        metrics |= {"train_losses": train_losses, "validation_losses": validation_losses,
                    "initial_validation_loss": initial}
        with tempfile.TemporaryDirectory() as folder:
            checkpoint = None
            if rank == 0:
                torch.save({k: v.cpu() for k, v in local.state_dict().items()}, Path(folder) / _WEIGHTS)
                checkpoint = ray.train.Checkpoint.from_directory(folder)
            ray.train.report(metrics, checkpoint=checkpoint)


def train_on_ray(dataset_paths: Sequence[str | Path], config: TrainConfig, *, workers: int,
                 ray_address: str | None = None, storage: str | Path | None = None) -> DistributedResult:
    """Train on ``workers`` Ray Train workers; ``storage`` holds Ray Train's run folder (shared storage on a
    multi-node cluster; default a temporary folder, for a local runtime)."""
    if workers < 1:
        raise TrainingError(f"workers must be ≥ 1, got {workers}")
    paths = [str(Path(p).resolve()) for p in dataset_paths]
    prepared = prepare(paths, config)  # fails here, with the dataset's own message, before any worker starts
    with ray_session(ray_address, cpus=workers) as ray, tempfile.TemporaryDirectory(prefix="so101_train_") as tmp:
        from ray.train import RunConfig, ScalingConfig
        from ray.train.torch import TorchConfig, TorchTrainer

        use_gpu = ray.cluster_resources().get("GPU", 0) >= workers
        backend = "nccl" if use_gpu else "gloo"
        trainer = TorchTrainer(
            _train_loop,
            train_loop_config={"paths": paths, "config": asdict(config) | {"progress": False}, "use_gpu": use_gpu},
            scaling_config=ScalingConfig(num_workers=workers, use_gpu=use_gpu),
            torch_config=TorchConfig(backend=backend),
            run_config=RunConfig(name="so101_gaponet", storage_path=str(Path(storage or tmp).resolve())),
        )
        result = trainer.fit()
        if result.error is not None:
            raise TrainingError(f"distributed training failed: {result.error}")
        if result.checkpoint is None:
            raise TrainingError("distributed training ended without a checkpoint from rank 0")
        with result.checkpoint.as_directory() as folder:
            weights = torch.load(Path(folder) / _WEIGHTS, weights_only=True)
        metrics = dict(result.metrics or {})
    module = build_module(prepared, config)
    module.load_state_dict(weights)
    module.eval()
    losses = {"initial_validation_loss": float(metrics["initial_validation_loss"]),
              "final_train_loss": float(metrics["train_loss"]), "final_validation_loss": float(metrics["validation_loss"])}
    metadata = model_metadata(prepared, config, losses, {"ray_train_workers": workers, "ray_train_backend": backend})
    return DistributedResult(module, metadata, workers, backend, list(metrics["train_losses"]),
                             list(metrics["validation_losses"]), losses["initial_validation_loss"])
