#!/usr/bin/env bash
# Lint, type-check, then every test of every package and of the whole workspace (what `make test` and CI run).
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
run() { bash scripts/with_env.sh "$@"; }

echo "== ruff"
run ruff check . || exit 1

echo "== mypy"
run bash scripts/run_mypy.sh || exit 1

echo "== pytest"
run python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit "$rc"
