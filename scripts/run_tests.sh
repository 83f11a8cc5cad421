#!/usr/bin/env bash
# What `make test` and CI run: lint, type check, every package built and tested as a robot does (colcon, the
# checkout under a workspace's src/), then the whole-workspace tests of test/ (arguments go to that pytest run).
set -uo pipefail
cd "$(dirname "$0")/.."
run() { bash scripts/with_env.sh --isolated "$@"; }

echo "== ruff"
run ruff check . || exit 1

echo "== mypy"
run bash scripts/run_mypy.sh || exit 1

run bash scripts/colcon_check.sh || exit 1

echo "== pytest test/ (whole-workspace tests)"
run python -m pytest test "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit "$rc"
