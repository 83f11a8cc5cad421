"""``so101 bench``: every package's control-path benchmarks, printed as JSON lines.

Each line is ``{"name", "value", "unit", "baseline", "baseline_name", "ratio", ...}`` where the
baseline is measured in the same run (see :mod:`so101_common.bench`).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from dataclasses import dataclass

from so101_apps import ros_environment
from so101_bringup.share import models_dir

__all__ = ["BENCHES", "Bench", "add_arguments", "run"]

LOG = logging.getLogger(__name__)

@dataclass(frozen=True)
class Bench:
    """A package's benchmark module, exposing ``benchmarks(...) -> Iterator[BenchResult]``."""

    module: str
    shipped_model: str = ""  # a file of the installed models/ passed as ``model_path`` (the model it times)


BENCHES: tuple[Bench, ...] = (
    Bench("so101_apps.bench_driver"),
    Bench("so101_virtual.bench"),
    Bench("so101_virtual.sysid.bench"),
    Bench("so101_safety.bench"),
    Bench("so101_gaponet.bench", "gaponet_so101_default.onnx"),
    Bench("so101_policy.bench"),
    Bench("so101_recorder.bench"),
    Bench("so101_sim2real.bench"),
    Bench("so101_sim2real.sim_delta.bench", "so101_sim_delta.onnx"),
    Bench("so101_apps.bench_twin", "so101_sim_delta.onnx"),
    Bench("so101_fleet.bench"),
    Bench("so101_apps.bench_chain"),
    Bench("so101_apps.bench_flood"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    ros_environment.add_arguments(parser)
    parser.add_argument("--only", nargs="*", default=None, metavar="MODULE",
                        help="run only these benchmark modules (e.g. so101_apps.bench_driver)")


def run(args: argparse.Namespace) -> int:
    ros_environment.join(args)
    unknown = sorted(set(args.only or ()) - {b.module for b in BENCHES})
    if unknown:
        raise ValueError(f"no benchmark module {unknown}; they are {[b.module for b in BENCHES]}")
    failures = 0
    for bench in BENCHES:
        if args.only and bench.module not in args.only:
            continue
        try:
            module = importlib.import_module(bench.module)
            kwargs = {"model_path": models_dir() / bench.shipped_model} if bench.shipped_model else {}
            for result in module.benchmarks(**kwargs):
                print(result.to_json(), flush=True)
        except Exception as err:  # one broken benchmark must not hide the others' figures
            failures += 1
            print(f"benchmark {bench.module} failed: {err}", file=sys.stderr, flush=True)
            LOG.debug("benchmark failure", exc_info=True)
    return 1 if failures else 0
