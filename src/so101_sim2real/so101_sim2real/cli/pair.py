"""``so101 pair``: align real and sim runs (bags, SAGE folders, or the built-in MuJoCo) into a paired dataset.

``--real`` is a bag, one SAGE real run folder, or a SAGE root holding many (every motion becomes one
episode). ``--sim`` is a bag, a SAGE sim folder/root (motions matched by name), or ``mujoco``: the
in-process MuJoCo backend replays each real command stream from the real initial state. The work is
done by :mod:`so101_sim2real.pairing.pair` and :mod:`so101_sim2real.analysis.report`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from so101_common import topics
from so101_common.paired_dataset import DatasetError
from so101_common.sage import SageFormatError
from so101_sim2real.analysis.report import ReportError, summarize, write_report
from so101_sim2real.pairing.align import AlignConfig, AlignmentError
from so101_sim2real.pairing.pair import PairError, pair_inputs

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--real", required=True, type=Path, help="real run: bag, SAGE run folder or SAGE real root")
    parser.add_argument("--sim", required=True, help="sim run: bag, SAGE sim folder/root, or 'mujoco'")
    parser.add_argument("--out", required=True, type=Path, help="paired dataset folder to write")
    parser.add_argument("--force", action="store_true", help="replace --out if it exists")
    parser.add_argument("--rate", type=float, default=50.0, help="grid rate of the dataset, Hz (default 50)")
    parser.add_argument("--real-topic", default=topics.absolute(topics.JOINT_STATES), help="real JointState topic in a bag")
    parser.add_argument("--command-topic", default=topics.absolute(topics.JOINT_COMMAND), help="real command topic in a bag")
    parser.add_argument("--sim-topic", default=topics.SIM_STATES, help="sim JointState topic in a bag")
    parser.add_argument("--sim-command-topic", default=topics.SIM_COMMAND, help="sim command topic in a bag")
    parser.add_argument("--max-offset", type=float, default=None, help="bound on the clock offset searched, s")
    parser.add_argument("--no-drift", action="store_true", help="fit a clock offset only, no drift")
    parser.add_argument("--report", type=Path, default=None,
                        help="also write the gap report (HTML + PNG) here, as 'so101 analyze DATASET --report' does")


def run(args: argparse.Namespace) -> int:
    if args.out.exists() and not args.force:
        print(f"so101 pair: error: {args.out} already exists; choose a new path or pass --force", file=sys.stderr)
        return 1
    try:
        config = AlignConfig(rate_hz=args.rate, max_offset_s=args.max_offset, fit_drift=not args.no_drift)
        dataset = pair_inputs(args.real, args.sim, config, args.real_topic, args.command_topic, args.sim_topic,
                              args.sim_command_topic)
        dataset.save(args.out)
    except (PairError, AlignmentError, DatasetError, SageFormatError) as err:
        print(f"so101 pair: error: {err}", file=sys.stderr)
        return 1
    print(f"wrote {len(dataset)} episode(s) at {dataset.rate_hz:g} Hz to {args.out}")
    for episode in dataset:  # said where the user looks, not only in a log
        for note in episode.metadata.get("truncated", []):
            print(f"so101 pair: warning: episode {episode.name} was paired from a truncated bag: {note}",
                  file=sys.stderr)
    for episode in dataset:
        clock = episode.metadata["clock"]
        print(f"  {episode.name}: {len(episode)} samples, clock offset {clock['offset']:.6f} s, "
              f"drift {clock['drift'] * 1e6:.1f} ppm ({clock['method']}, score {clock['score']:.3f})")
    if args.report is not None:
        try:
            page = write_report(dataset, summarize(dataset, source=str(args.out)), args.report)
        except ReportError as err:
            print(f"so101 pair: error: {err}", file=sys.stderr)
            return 1
        print(f"report: {page}")
    return 0
