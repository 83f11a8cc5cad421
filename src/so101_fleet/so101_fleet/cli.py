"""``so101 fleet <step>``: the fleet pipeline's subcommands (simulate, index, process, report).

Like ``so101_apps.cli``, an explicit table of step → module; each module has
``add_arguments(parser)`` and ``run(args) -> int`` and is imported only when its step is chosen.
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
    parser.epilog = "steps: " + "; ".join(f"{name}: {summary}" for name, (_m, summary) in STEPS.items())
    parser.add_argument("step", choices=tuple(STEPS), help="pipeline step ('so101 fleet STEP --help' for its options)")
    parser.add_argument("options", nargs=argparse.REMAINDER, help="the step's options")


def run(args: argparse.Namespace) -> int:
    module_name, summary = STEPS[args.step]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"so101 fleet {args.step}", description=summary)
    module.add_arguments(parser)
    return int(module.run(parser.parse_args(args.options)))
