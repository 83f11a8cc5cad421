"""``so101 train-gaponet``: train a compensator on paired datasets and export it (ONNX or TorchScript)."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np

__all__ = ["add_arguments", "run", "train_and_export"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", action="append", required=True, type=Path, help="paired dataset folder (repeatable)")
    parser.add_argument("--arch", choices=("deeponet", "transformer", "mlp", "linear"), default="deeponet",
                        help="network (default deeponet)")
    parser.add_argument("--history", type=int, default=4, help="history rows the model reads (default 4)")
    parser.add_argument("--horizon", type=int, default=5,
                        help="steps over which the target trajectory is reached, ≈ the arm's lag in steps (default 5)")
    parser.add_argument("--epochs", type=int, default=30, help="training epochs (default 30)")
    parser.add_argument("--hidden", type=int, default=64, help="hidden layer width (default 64)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--delta-bound", type=float, default=None, help="|Δ| limit in rad for every joint (default: from the data)")
    parser.add_argument("--delta-slew", type=float, default=None,
                        help="Δ slew limit in rad/step for every joint (default: a tenth of each Δ bound)")
    parser.add_argument("--delta-smoothing", type=float, default=0.0, help="Δ low-pass time constant in s (default 0: off)")
    parser.add_argument("--delta-l2", type=float, default=0.05, help="weight of the L2 penalty pulling Δ toward 0 (default 0.05)")
    parser.add_argument("--out", type=Path, required=True, help="model file to write, e.g. models/NAME.onnx")
    parser.add_argument("--format", choices=("onnx", "torchscript"), default=None,
                        help="file format (default: from the suffix: .onnx → onnx, else torchscript)")


def train_and_export(datasets: list[Path], out: Path, file_format: str, **settings: object) -> dict[str, float]:
    """Train, export, reload the file and check it reproduces the torch module; returns loss figures."""
    import torch

    from so101_gaponet.model_file import load_model, save_onnx, save_torchscript
    from so101_gaponet.train import TrainConfig, train

    result = train(datasets, TrainConfig(**settings))  # type: ignore[arg-type]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit deprecation notices
        (save_onnx if file_format == "onnx" else save_torchscript)(result.module, result.metadata, out)
        model = load_model(out)
    meta = result.metadata
    rng = np.random.default_rng(0)
    history = rng.standard_normal((8, meta.history, meta.history_columns)).astype(np.float32)
    commands = rng.standard_normal((8, meta.future_steps, meta.num_joints)).astype(np.float32)
    with torch.no_grad():
        expected = result.module(torch.from_numpy(history), torch.from_numpy(commands)).numpy()
    got = np.vstack([model.run_normalised(history[i:i + 1], commands[i:i + 1]) for i in range(len(history))])
    error = float(np.max(np.abs(got - expected)))
    if error > 1e-4:
        raise RuntimeError(f"exported model differs from the trained one by {error:.2e}")
    return {"initial_validation_loss": result.initial_validation_loss, "validation_loss": result.validation_losses[-1],
            "train_loss": result.train_losses[-1], "export_max_abs_error": error}


def run(args: argparse.Namespace) -> int:
    from so101_gaponet.metadata import ModelFileError
    from so101_gaponet.paired_data import DatasetError
    from so101_gaponet.train import TrainingError

    file_format = args.format or ("onnx" if args.out.suffix == ".onnx" else "torchscript")
    try:
        figures = train_and_export(args.dataset, args.out, file_format, arch=args.arch, history=args.history,
                                   horizon=args.horizon, epochs=args.epochs, hidden=args.hidden, seed=args.seed,
                                   delta_bound=args.delta_bound, delta_slew=args.delta_slew,
                                   delta_smoothing_s=args.delta_smoothing, delta_l2=args.delta_l2)
    except (DatasetError, TrainingError, ModelFileError, RuntimeError) as err:
        print(f"error: {err}")
        return 1
    print(f"wrote {args.out} ({file_format}, {args.out.stat().st_size} bytes): validation loss "
          f"{figures['initial_validation_loss']:.4f} → {figures['validation_loss']:.4f}, "
          f"export error {figures['export_max_abs_error']:.1e}")
    return 0
