"""``so101 analyze``: gap metrics of a paired dataset as JSON and an HTML/PNG report; before/after comparison."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from so101_common.joints import JOINT_NAMES
from so101_common.paired_dataset import DatasetError, PairedDataset
from so101_sim2real.analysis.metrics import MetricsConfig, MetricsError
from so101_sim2real.analysis.report import ReportError, summarize, write_comparison, write_report

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", type=Path, help="paired dataset folder (from 'so101 pair')")
    parser.add_argument("--report", type=Path, default=None, help="write PNG plots, summary.json and report.html here")
    parser.add_argument("--json", action="store_true", help="print the JSON summary on stdout")
    parser.add_argument("--compare", type=Path, default=None, help="second dataset (e.g. with compensation)")
    parser.add_argument("--labels", default="before,after", help="labels of DATASET and --compare, comma-separated")
    parser.add_argument("--gap-threshold", type=float, default=0.05, help="large-gap threshold for positions, rad")


def run(args: argparse.Namespace) -> int:
    labels = [s.strip() for s in args.labels.split(",")]
    if args.compare is not None and len(labels) != 2:
        print(f"so101 analyze: error: --labels needs two comma-separated labels, got {args.labels!r}", file=sys.stderr)
        return 2
    try:
        config = MetricsConfig(large_gap_thresholds={**MetricsConfig().large_gap_thresholds,
                                                     "position": args.gap_threshold})
        dataset = PairedDataset.load(args.dataset)
        summary = summarize(dataset, config, str(args.dataset))
        if args.report is not None:
            page = write_report(dataset, summary, args.report)
        output: dict = summary
        if args.compare is not None:
            other = summarize(PairedDataset.load(args.compare), config, str(args.compare))
            comparison = write_comparison([summary, other], labels, args.report or args.dataset / "comparison")
            output = {"summary": summary, "compare_summary": other, "comparison": comparison}
    except (DatasetError, MetricsError, ReportError) as err:
        print(f"so101 analyze: error: {err}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(output, indent=2))
    else:
        _print_table(summary, args.dataset)
        if args.compare is not None:
            _print_delta(comparison, labels)
        if args.report is not None:
            print(f"report: {page}")
    return 0


def _print_table(summary: dict, source: Path) -> None:
    print(f"{source}: {len(summary['episodes'])} episode(s), position gap (sim − real), mean over episodes")
    print(f"{'joint':<15}{'rmse rad':>10}{'mae rad':>10}{'large gap':>11}{'corr':>8}{'lag s':>10}")
    overall = summary["overall"]["position"]
    for j in JOINT_NAMES:
        cells = [overall[m][j] for m in ("rmse", "mae", "large_gap_ratio", "corr", "max_lag")]
        print(f"{j:<15}" + "".join(f"{_num(v, spec):>{w}}" for v, w, spec in
                                   zip(cells, (10, 10, 11, 8, 10), (".4f", ".4f", ".4f", ".4f", ".3f"), strict=True)))


def _print_delta(comparison: dict, labels: list[str]) -> None:
    entry = comparison["delta"]["position"]["rmse"]
    print(f"position rmse: {labels[0]} → {labels[1]}")
    for j in JOINT_NAMES:
        print(f"{j:<15}{_num(entry['before'][j]):>10} → {_num(entry['after'][j]):<10}"
              f"{_num(entry['change_percent'][j], '+.1f')} %")


def _num(value: float | None, spec: str = ".4f") -> str:
    return "–" if value is None or not np.isfinite(value) else format(value, spec)
