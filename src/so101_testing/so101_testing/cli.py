"""Run one package's CLI module the way ``so101 <command>`` runs it, without the ``so101`` umbrella.

Package tests use this so that a package's tests depend only on packages below it in the
dependency order (the ``so101`` umbrella lives at the top, in ``so101_apps``): in process with
:func:`run_cli`, or in a child process as ``python -m so101_testing.cli <module> <args>``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["run_cli", "main"]


def run_cli(module_name: str, argv: Sequence[str]) -> int:
    """Parse ``argv`` with the module's ``add_arguments`` and return its ``run(args)`` exit code."""
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=module_name)
    module.add_arguments(parser)
    return int(module.run(parser.parse_args(list(argv))))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m so101_testing.cli <module> <args>``: :func:`run_cli` in a process of its own."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m so101_testing.cli <cli module> [arguments]", file=sys.stderr)
        return 2
    return run_cli(args[0], args[1:])


if __name__ == "__main__":
    sys.exit(main())
