"""Train a compensator on paired datasets, export it to a model file and check the file reproduces it.

The library behind ``so101 train-gaponet``, the demo and ``make_default`` (CLI modules only parse
arguments and call this).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["reproduction_error", "train_and_export", "write_and_check"]


def write_and_check(module: Any, metadata: Any, out: Path, file_format: str) -> float:
    """Write the model file (ONNX: the module folded for export where it folds, :mod:`so101_gaponet.folded`),
    reload it and return the largest difference to the torch module's output."""
    from so101_gaponet.folded import exported_module
    from so101_gaponet.model_file import load_model, save_onnx, save_torchscript

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit deprecation notices
        if file_format == "onnx":
            exported, folds = exported_module(module, metadata)
            save_onnx(exported, metadata, out, fold_constants=not folds)
        else:
            save_torchscript(module, metadata, out)
        model = load_model(out)
    return reproduction_error(module, metadata, model)


def reproduction_error(module: Any, metadata: Any, model: Any) -> float:
    """The largest difference between the torch ``module``'s output and the model file's (``model``, loaded) on
    eight random normalised inputs of ``metadata``'s shape."""
    import torch

    rng = np.random.default_rng(0)
    history = rng.standard_normal((8, metadata.history, metadata.history_columns)).astype(np.float32)
    commands = rng.standard_normal((8, metadata.future_steps, metadata.num_joints)).astype(np.float32)
    with torch.no_grad():
        expected = module(torch.from_numpy(history), torch.from_numpy(commands)).numpy()
    got = np.vstack([model.run_normalised(history[i:i + 1], commands[i:i + 1]) for i in range(len(history))])
    return float(np.max(np.abs(got - expected)))


def train_and_export(datasets: list[Path], out: Path, file_format: str, **settings: object) -> dict[str, float]:
    """Train, export, reload the file and check it reproduces the torch module; returns loss figures."""
    from so101_gaponet.train import TrainConfig, train

    result = train(datasets, TrainConfig(**settings))  # type: ignore[arg-type]
    error = write_and_check(result.module, result.metadata, out, file_format)
    if error > 1e-4:
        raise RuntimeError(f"exported model differs from the trained one by {error:.2e}")
    return {"initial_validation_loss": result.initial_validation_loss, "validation_loss": result.validation_losses[-1],
            "train_loss": result.train_losses[-1], "export_max_abs_error": error}
