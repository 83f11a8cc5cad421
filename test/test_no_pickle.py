"""Loading data never unpickles: every ``np.load`` in the workspace says ``allow_pickle=False``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _np_load_calls(tree: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "load" and isinstance(node.func.value, ast.Name)
            and node.func.value.id in ("np", "numpy")]


def _refuses_pickles(call: ast.Call) -> bool:
    return any(k.arg == "allow_pickle" and isinstance(k.value, ast.Constant) and k.value.value is False
               for k in call.keywords)


def test_every_np_load_passes_allow_pickle_false():
    files = [p for folder in ("src", "test", "scripts", "docker") if (ROOT / folder).is_dir()
             for p in (ROOT / folder).rglob("*.py")]
    offenders = [f"{path.relative_to(ROOT)}:{call.lineno}" for path in files
                 for call in _np_load_calls(ast.parse(path.read_text(encoding="utf-8"), str(path)))
                 if not _refuses_pickles(call)]
    assert len(files) > 50 and not offenders, offenders
