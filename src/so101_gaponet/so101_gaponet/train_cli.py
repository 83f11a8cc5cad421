"""``so101 train-gaponet``: train a compensator on paired datasets and export it (ONNX or TorchScript)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["add_arguments", "run"]

TORCHSCRIPT_SUFFIXES = (".pt", ".pth", ".ts")  # any other suffix gets ONNX, the data-only format


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from so101_gaponet.models import NETWORK_KINDS
    from so101_gaponet.train import TrainConfig

    d = TrainConfig()  # the trainer's defaults are the one source of these
    parser.add_argument("--dataset", action="append", required=True, type=Path, help="paired dataset folder (repeatable)")
    parser.add_argument("--arch", choices=NETWORK_KINDS, default=d.arch,
                        help=f"network (default {d.arch})")
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


def run(args: argparse.Namespace) -> int:
    from so101_common.paired_dataset import DatasetError
    from so101_gaponet.export import train_and_export
    from so101_gaponet.metadata import ModelFileError
    from so101_gaponet.train import TrainingError

    file_format = args.format or ("torchscript" if args.out.suffix in TORCHSCRIPT_SUFFIXES else "onnx")
    try:
        figures = train_and_export(args.dataset, args.out, file_format, arch=args.arch, history=args.history,
                                   horizon=args.horizon, epochs=args.epochs, hidden=args.hidden, seed=args.seed,
                                   delta_bound=args.delta_bound, delta_slew=args.delta_slew,
                                   delta_smoothing_s=args.delta_smoothing, delta_l2=args.delta_l2,
                                   feedback_gain=args.feedback_gain, direction_play=args.direction_play,
                                   measured_inputs=args.measured_inputs)
    except (DatasetError, TrainingError, ModelFileError, RuntimeError) as err:
        print(f"so101 train-gaponet: error: {err}", file=sys.stderr)
        return 1
    print(f"wrote {args.out} ({file_format}, {args.out.stat().st_size} bytes): validation loss "
          f"{figures['initial_validation_loss']:.4f} → {figures['validation_loss']:.4f}, "
          f"export error {figures['export_max_abs_error']:.1e}")
    return 0
