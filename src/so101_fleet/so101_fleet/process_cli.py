"""``so101 fleet process CATALOG --sim mujoco --out DATASET_ROOT [--ray-address auto|ADDR] [--workers N]``."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from tqdm import tqdm

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("catalog", type=Path, help="fleet catalogue (so101 fleet index --out)")
    parser.add_argument("--sim", default="mujoco", choices=("mujoco",), help="simulator (built-in MuJoCo)")
    parser.add_argument("--out", type=Path, required=True,
                        help="dataset root: episodes/<robot_id>/<episode>/ and run_report.json")
    parser.add_argument("--ray-address", default=None,
                        help="Ray cluster to run on ('auto', HOST:PORT or ray://...); default: a local Ray runtime")
    parser.add_argument("--workers", type=int, default=None,
                        help="parallel episodes (local runtime CPUs; default: all cores); 1 runs in this process")
    parser.add_argument("--rate", type=float, default=50.0, help="grid rate of the paired datasets, Hz (default 50)")


def run(args: argparse.Namespace) -> int:
    from so101_fleet.catalog import CatalogError, read_catalog
    from so101_fleet.episode_job import ProcessConfig
    from so101_fleet.process import process_fleet, tasks_from_catalog

    if args.workers is not None and args.workers < 1:
        print("so101 fleet process: error: --workers must be ≥ 1")
        return 2
    try:
        config = ProcessConfig(sim=args.sim, rate_hz=args.rate)
        tasks = tasks_from_catalog(read_catalog(args.catalog))
    except (CatalogError, ValueError) as err:
        print(f"so101 fleet process: error: {err}", file=sys.stderr)
        return 1
    logging.getLogger("so101_sim2real").setLevel(logging.WARNING)  # one INFO line per saved episode drowns the bar
    with tqdm(total=len(tasks), unit="episode", desc="process") as bar:
        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        report = process_fleet(tasks, args.out, config, workers=args.workers, ray_address=args.ray_address,
                               catalog=str(args.catalog), progress=progress)
    print(f"{report.mode}: {report.done} episodes processed, {report.skipped} done before, {len(report.errors)} "
          f"errors in {report.seconds:.1f} s ({report.episodes_per_s:.2f} episodes/s); report {args.out / 'run_report.json'}")
    for error in report.errors[:20]:
        print(f"  {error['episode_id']}: {error['kind']}: {error['message']}")
    if len(report.errors) > 20:
        print(f"  ... {len(report.errors) - 20} more in the report")
    return 0
