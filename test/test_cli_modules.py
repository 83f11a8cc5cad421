"""CLI modules only parse arguments and call library functions: no module of the workspace imports one. The
``so101`` table (``so101_apps.cli.SUBCOMMANDS``) and ``so101 fleet``'s (``so101_fleet.cli.STEPS``) name them by
string and import the chosen one when it runs."""

from __future__ import annotations

import ast
from pathlib import Path

from so101_apps.cli import SUBCOMMANDS
from so101_fleet.cli import STEPS

ROOT = Path(__file__).resolve().parents[1]
CLI_MODULES = {c.module for c in SUBCOMMANDS} | {module for module, _summary in STEPS.values()}


def _imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function (``from a import b`` counts ``a`` and ``a.b``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_no_module_imports_a_cli_module() -> None:
    importers = {}
    for path in sorted(ROOT.glob("src/*/so101_*/**/*.py")):
        imported = _imported_modules(path) & CLI_MODULES
        if imported:
            importers[str(path.relative_to(ROOT))] = sorted(imported)
    assert not importers, f"these import a CLI module (move what they need into a library module): {importers}"


def test_the_check_sees_an_import_of_a_cli_module(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from so101_sim2real.cli import replay\n")
    assert "so101_sim2real.cli.replay" in _imported_modules(module) & CLI_MODULES
