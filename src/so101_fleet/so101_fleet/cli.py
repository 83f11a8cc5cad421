"""``so101 fleet <step>``: the fleet pipeline's subcommands (simulate, index, process, report).

Like ``so101_bringup.cli``, an explicit table of step → module; each module has
``add_arguments(parser)`` and ``run(args) -> int`` and is imported only when chosen.
"""

from __future__ import annotations

import argparse
import importlib

__all__ = ["STEPS", "add_arguments", "run"]

STEPS: dict[str, tuple[str, str]] = {
    "simulate": ("so101_fleet.simulate_cli", "record a fleet of virtual SO-101s (episode bags, simulated time)"),
    "index": ("so101_fleet.catalog_cli", "scan bag folders into a Parquet catalogue (one row per episode)"),
    "process": ("so101_fleet.process_cli", "replay → pair → analyse every catalogued episode as Ray tasks"),
    "report": ("so101_fleet.report_cli", "gap trends per arm and joint, arms whose gap grows, fleet distribution"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    steps = parser.add_subparsers(dest="step", metavar="<step>", required=True)
    for name, (module, summary) in STEPS.items():
        sub = steps.add_parser(name, help=summary, description=summary)
        importlib.import_module(module).add_arguments(sub)


def run(args: argparse.Namespace) -> int:
    return int(importlib.import_module(STEPS[args.step][0]).run(args))
