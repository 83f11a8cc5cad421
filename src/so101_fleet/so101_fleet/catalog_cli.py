"""``so101 fleet index ROOT... --out CATALOG.parquet``: the fleet catalogue (one row per episode)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tqdm import tqdm

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("roots", nargs="+", help="bag roots: local folders or fsspec URLs (scanned recursively)")
    parser.add_argument("--out", type=Path, required=True, help="catalogue to write (Parquet)")


def run(args: argparse.Namespace) -> int:
    import pyarrow.compute as pc

    from so101_fleet.catalog import CatalogError, build_catalog, write_catalog

    start = time.perf_counter()
    with tqdm(unit="episode", desc="index") as bar:
        try:
            table = build_catalog(args.roots, progress=lambda done: bar.update(done - bar.n))
        except CatalogError as err:
            print(f"so101 fleet index: error: {err}", file=sys.stderr)
            return 1
    write_catalog(table, args.out)
    seconds = time.perf_counter() - start
    truncated = pc.sum(table["truncated"]).as_py() or 0
    faults = pc.sum(pc.greater(table["faults"], 0)).as_py() or 0
    duplicates = table["duplicate_of"].null_count
    print(f"wrote {args.out}: {table.num_rows} episodes of {len(pc.unique(table['robot_id']))} arms in {seconds:.1f} s; "
          f"{truncated} truncated, {faults} with faults, {table.num_rows - duplicates} duplicates")
    return 0
