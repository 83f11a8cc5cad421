#!/usr/bin/env bash
# Creates (or updates) the one pinned environment that serves the product, the tests and LeRobot.
# torch/torchvision are taken from the machine's local wheels (see requirements/constraints.txt);
# LeRobot goes in with --no-deps because its own pins reject that torch (run on CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3

if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating $VENV with $($PY --version)"
  "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
C=(-c requirements/constraints.txt)

echo "== torch (local wheels) and LeRobot"
"${PIP[@]}" install -qq "${C[@]}" torch torchvision
"${PIP[@]}" install -qq --no-deps "${C[@]}" lerobot
echo "== LeRobot dependencies and workspace requirements"
"${PIP[@]}" install -qq "${C[@]}" -r requirements/lerobot.txt -r requirements/workspace.txt
echo "== workspace packages (editable)"
pkgs=()
for setup in src/*/setup.py; do pkgs+=(-e "$(dirname "$setup")"); done
"${PIP[@]}" install -qq --no-deps --no-build-isolation "${pkgs[@]}"
echo "== environment ready: $VENV"
