"""``so101 train-gaponet``: train a compensator on paired datasets and export it (ONNX or TorchScript), in this
process or on Ray (``--ray-address``/``--workers``).

Without ``--ray-address`` and ``--workers`` the training runs here (:func:`so101_gaponet.export.train_and_export`).
With either, the same training runs on Ray Train (:mod:`so101_fleet.train`): on the cluster at ``--ray-address``,
or on a local Ray runtime with ``--workers`` CPUs. ``--dataset`` also takes a fleet dataset root
(``so101 fleet process --out``): every episode dataset under it is used.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_arguments", "run", "expand_datasets", "training_settings"]

TORCHSCRIPT_SUFFIXES = (".pt", ".pth", ".ts")  # any other suffix gets ONNX, the data-only format


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from so101_gaponet.models import NETWORK_KINDS
    from so101_gaponet.train import TrainConfig

    d = TrainConfig()  # the trainer's defaults are the one source of these
    parser.add_argument("--dataset", action="append", required=True, type=Path,
                        help="paired dataset folder, or a fleet dataset root (repeatable)")
    parser.add_argument("--arch", choices=NETWORK_KINDS, default=d.arch, help=f"network (default {d.arch})")
    parser.add_argument("--history", type=int, default=d.history, help=f"history rows the model reads (default {d.history})")
    parser.add_argument("--horizon", type=int, default=d.horizon,
                        help=f"command rows: the current command and horizon − 1 upcoming ones (default {d.horizon})")
    parser.add_argument("--epochs", type=int, default=d.epochs, help=f"training epochs (default {d.epochs})")
    parser.add_argument("--hidden", type=int, default=d.hidden, help=f"hidden layer width (default {d.hidden})")
    parser.add_argument("--seed", type=int, default=d.seed, help=f"random seed (default {d.seed})")
    parser.add_argument("--delta-bound", type=float, default=None, help="|Δ| limit in rad for every joint (default: from the data)")
    parser.add_argument("--delta-slew", type=float, default=None,
                        help="Δ slew limit in rad/step for every joint (default: a third of each Δ bound)")
    parser.add_argument("--delta-smoothing", type=float, default=d.delta_smoothing_s,
                        help=f"Δ low-pass time constant in s (default {d.delta_smoothing_s:g}: off)")
    parser.add_argument("--delta-l2", type=float, default=d.delta_l2,
                        help=f"weight of an L2 penalty pulling Δ toward 0 (default {d.delta_l2:g})")
    parser.add_argument("--feedback-gain", type=float, default=d.feedback_gain,
                        help=f"integral feedback of the compensator core per step (default {d.feedback_gain:g})")
    parser.add_argument("--direction-play", type=float, default=d.direction_play,
                        help="play (rad) of the operator that tells the reference's direction: the core keeps one "
                             f"integral correction per direction (default {d.direction_play:g}; 0: one for both)")
    parser.add_argument("--measured-inputs", action="store_true",
                        help="also feed the measured state to the network (rings on arms unlike the training arm)")
    parser.add_argument("--out", type=Path, required=True, help="model file to write, e.g. models/NAME.onnx")
    parser.add_argument("--format", choices=("onnx", "torchscript"), default=None,
                        help="file format (default: from the suffix: .pt/.pth/.ts → torchscript, else onnx). "
                             "ONNX is data; TorchScript files are code (torch.jit.load runs them), shared ones "
                             "are a risk to whoever loads them")
    parser.add_argument("--ray-address", default=None,
                        help="train on this Ray cluster ('auto', HOST:PORT, ray://...) with Ray Train (DDP)")
    parser.add_argument("--workers", type=int, default=None,
                        help="Ray Train workers (default 2 with --ray-address); alone: on a local Ray runtime")
    parser.add_argument("--ray-storage", default=None,
                        help="Ray Train run folder (shared storage on a multi-node cluster; default: temporary)")


def training_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The ``TrainConfig`` fields the options set (one mapping for both places the training runs)."""
    return dict(arch=args.arch, history=args.history, horizon=args.horizon, epochs=args.epochs, hidden=args.hidden,
                seed=args.seed, delta_bound=args.delta_bound, delta_slew=args.delta_slew,
                delta_smoothing_s=args.delta_smoothing, delta_l2=args.delta_l2, feedback_gain=args.feedback_gain,
                direction_play=args.direction_play, measured_inputs=args.measured_inputs)


def expand_datasets(paths: list[Path]) -> list[Path]:
    """Each path as given, or, for a fleet dataset root, the episode datasets under it."""
    out: list[Path] = []
    for path in paths:
        episodes = sorted(p.parent for p in Path(path).glob("episodes/*/*/dataset.json"))
        out.extend(episodes if episodes and not (Path(path) / "dataset.json").is_file() else [path])
    return out


def run(args: argparse.Namespace) -> int:
    from so101_common.paired_dataset import DatasetError
    from so101_gaponet.metadata import ModelFileError
    from so101_gaponet.train import TrainingError

    datasets = expand_datasets(args.dataset)
    file_format = args.format or ("torchscript" if args.out.suffix in TORCHSCRIPT_SUFFIXES else "onnx")
    try:
        if args.ray_address is None and args.workers is None:
            return _train_here(datasets, args, file_format)
        return _train_on_ray(datasets, args, file_format)
    except (DatasetError, TrainingError, ModelFileError, RuntimeError) as err:
        print(f"so101 train-gaponet: error: {err}", file=sys.stderr)
        return 1


def _train_here(datasets: list[Path], args: argparse.Namespace, file_format: str) -> int:
    from so101_gaponet.export import train_and_export

    figures = train_and_export(datasets, args.out, file_format, **training_settings(args))
    print(f"wrote {args.out} ({file_format}, {args.out.stat().st_size} bytes): validation loss "
          f"{figures['initial_validation_loss']:.4f} → {figures['validation_loss']:.4f}, "
          f"export error {figures['export_max_abs_error']:.1e}")
    return 0


def _train_on_ray(datasets: list[Path], args: argparse.Namespace, file_format: str) -> int:
    from so101_fleet.gaponet_adapter import TrainConfig, export
    from so101_fleet.train import train_on_ray

    workers = args.workers if args.workers is not None else 2
    result = train_on_ray(datasets, TrainConfig(**training_settings(args)), workers=workers,
                          ray_address=args.ray_address, storage=args.ray_storage)
    error = export(result.module, result.metadata, args.out, file_format)
    if error > 1e-4:
        raise RuntimeError(f"exported model differs from the trained one by {error:.2e}")
    print(f"wrote {args.out} ({file_format}, {args.out.stat().st_size} bytes) from {workers} Ray Train workers "
          f"({result.backend}): validation loss {result.initial_validation_loss:.4f} → {result.validation_losses[-1]:.4f}, "
          f"export error {error:.1e}")
    return 0
