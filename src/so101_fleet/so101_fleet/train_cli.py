"""``so101 train-gaponet``: GapONet training, in this process or on Ray (``--ray-address``/``--workers``).

Without ``--ray-address`` and ``--workers`` this is exactly ``so101_gaponet.train_cli`` (the options
are its own). With either, the same training runs on Ray Train (:mod:`so101_fleet.train`): on the
cluster at ``--ray-address``, or on a local Ray runtime with ``--workers`` CPUs. ``--dataset`` also
takes a fleet dataset root (``so101 fleet process --out``): every episode dataset under it is used.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from so101_gaponet import train_cli as single

__all__ = ["add_arguments", "run", "expand_datasets"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    single.add_arguments(parser)
    parser.add_argument("--ray-address", default=None,
                        help="train on this Ray cluster ('auto', HOST:PORT, ray://...) with Ray Train (DDP)")
    parser.add_argument("--workers", type=int, default=None,
                        help="Ray Train workers (default 2 with --ray-address); alone: on a local Ray runtime")
    parser.add_argument("--ray-storage", default=None,
                        help="Ray Train run folder (shared storage on a multi-node cluster; default: temporary)")


def expand_datasets(paths: list[Path]) -> list[Path]:
    """Each path as given, or, for a fleet dataset root, the episode datasets under it."""
    out: list[Path] = []
    for path in paths:
        episodes = sorted(p.parent for p in Path(path).glob("episodes/*/*/dataset.json"))
        out.extend(episodes if episodes and not (Path(path) / "dataset.json").is_file() else [path])
    return out


def run(args: argparse.Namespace) -> int:
    args.dataset = expand_datasets(args.dataset)
    if args.ray_address is None and args.workers is None:
        return single.run(args)
    from so101_fleet.gaponet_adapter import DatasetError, ModelFileError, TrainConfig, TrainingError, export
    from so101_fleet.train import train_on_ray

    workers = args.workers if args.workers is not None else 2
    file_format = args.format or ("onnx" if args.out.suffix == ".onnx" else "torchscript")
    try:
        config = TrainConfig(arch=args.arch, history=args.history, horizon=args.horizon, epochs=args.epochs,
                             hidden=args.hidden, seed=args.seed, delta_bound=args.delta_bound,
                             delta_slew=args.delta_slew, delta_smoothing_s=args.delta_smoothing, delta_l2=args.delta_l2,
                             feedback_gain=args.feedback_gain, measured_inputs=args.measured_inputs)
        result = train_on_ray(args.dataset, config, workers=workers, ray_address=args.ray_address,
                              storage=args.ray_storage)
        error = export(result.module, result.metadata, args.out, file_format)
    except (DatasetError, TrainingError, ModelFileError) as err:
        print(f"error: {err}")
        return 1
    if error > 1e-4:
        print(f"error: exported model differs from the trained one by {error:.2e}")
        return 1
    print(f"wrote {args.out} ({file_format}, {args.out.stat().st_size} bytes) from {workers} Ray Train workers "
          f"({result.backend}): validation loss {result.initial_validation_loss:.4f} → {result.validation_losses[-1]:.4f}, "
          f"export error {error:.1e}")
    return 0
