"""``so101 fleet report DATASET_ROOT --out REPORT``: gap trends per arm and joint, growing arms, fleet distribution."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", type=Path, help="dataset root written by so101 fleet process")
    parser.add_argument("--out", type=Path, required=True, help="report folder (index.html, PNGs, fleet_report.json)")
    parser.add_argument("--min-growth", type=float, default=1.0,
                        help="gap growth in %% per day from which an arm is listed as growing (default 1)")


def run(args: argparse.Namespace) -> int:
    from so101_fleet.report import ReportError, write_fleet_report

    try:
        report = write_fleet_report(args.dataset, args.out, args.min_growth / 100.0)
    except ReportError as err:
        print(f"so101 fleet report: error: {err}", file=sys.stderr)
        return 1
    print(f"{report['episodes']} episodes of {report['arms']} arms; arms whose gap grows: "
          f"{', '.join(report['growing']) or 'none'}")
    for rank, arm in enumerate(report["ranking"][:10], start=1):
        growth = arm["growth_per_day"]
        print(f"  {rank:2d}. {arm['robot_id']}: {100 * growth:+.2f} %/day" if growth is not None else
              f"  {rank:2d}. {arm['robot_id']}: too few episodes for a trend")
    print(f"report: {args.out / 'index.html'}")
    return 0
