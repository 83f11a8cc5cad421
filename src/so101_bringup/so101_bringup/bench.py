"""``so101 bench``: every package's control-path benchmarks, printed as JSON lines.

Each line is ``{"name", "value", "unit", "baseline", "baseline_name", "ratio", ...}`` where the
baseline is measured in the same run (see :mod:`so101_common.bench`).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from so101_testing import apply_private_ros_env

__all__ = ["BENCH_MODULES", "add_arguments", "run"]

LOG = logging.getLogger(__name__)

# Package benchmark modules, each exposing benchmarks() -> Iterator[BenchResult].
BENCH_MODULES: tuple[str, ...] = (
    "so101_virtual.bench",
    "so101_virtual.sysid.bench",
    "so101_safety.bench",
    "so101_gaponet.bench",
    "so101_policy.bench",
    "so101_recorder.bench",
    "so101_sim2real.bench",
    "so101_sim2real.sim_delta.bench",
    "so101_fleet.bench",
    "so101_bringup.bench_chain",
    "so101_bringup.bench_flood",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--only", nargs="*", default=None, metavar="MODULE",
                        help="run only these benchmark modules (e.g. so101_virtual.bench)")


def run(args: argparse.Namespace) -> int:
    apply_private_ros_env()  # some benchmarks start nodes: keep DDS on loopback
    modules = args.only if args.only else BENCH_MODULES
    failures = 0
    for name in modules:
        try:
            module = importlib.import_module(name)
            for result in module.benchmarks():
                print(result.to_json(), flush=True)
        except Exception as err:  # one broken benchmark must not hide the others' figures
            failures += 1
            print(f"benchmark {name} failed: {err}", file=sys.stderr, flush=True)
            LOG.debug("benchmark failure", exc_info=True)
    return 1 if failures else 0
