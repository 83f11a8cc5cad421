#!/usr/bin/env bash
# Type-check every Python file of the workspace with the settings of pyproject.toml: package code,
# then the tests (package tests, workspace tests) and scripts.
# Tests may dereference an Optional they have just asserted on (an AttributeError fails the test
# anyway), so union-attr is not reported for them. Test folders are not packages, so two files with
# the same name (conftest.py) would be one module to mypy: they are checked in separate runs.
set -uo pipefail
cd "$(dirname "$0")/.."
# the workspace's own packages are read from source (their installed copies have no py.typed marker)
MYPYPATH=$(printf '%s:' src/*/)
export MYPYPATH
status=0
mapfile -t packages < <(for init in src/*/*/__init__.py; do dirname "$init"; done)
python -m mypy "${packages[@]}" || status=1
mapfile -t groups < <(python - <<'PY'
import pathlib
seen: dict[str, int] = {}
groups: list[list[str]] = []
files = sorted(pathlib.Path("src").glob("*/test/**/*.py")) + sorted(pathlib.Path("test").glob("**/*.py")) \
    + sorted(pathlib.Path("scripts").glob("*.py"))
for path in files:
    index = seen.get(path.name, 0)
    seen[path.name] = index + 1
    while len(groups) <= index:
        groups.append([])
    groups[index].append(str(path))
for group in groups:
    print(" ".join(group))
PY
)
for group in "${groups[@]}"; do
  # shellcheck disable=SC2086
  python -m mypy --disable-error-code union-attr $group || status=1
done
exit $status
