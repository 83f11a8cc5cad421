"""Run one package's CLI module the way ``so101 <command>`` runs it, without importing ``so101_bringup``.

Package tests use this so that a package's tests depend only on packages below it in the
dependency order (the ``so101`` umbrella lives at the top, in ``so101_bringup``).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

__all__ = ["run_cli"]


def run_cli(module_name: str, argv: Sequence[str]) -> int:
    """Parse ``argv`` with the module's ``add_arguments`` and return its ``run(args)`` exit code."""
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=module_name)
    module.add_arguments(parser)
    return int(module.run(parser.parse_args(list(argv))))
