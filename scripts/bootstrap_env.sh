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
# pip's own conflict report would print lerobot's pins (torch<2.11, torchvision<0.26, torchcodec) as an ERROR on
# every run: they are expected (the torch here is the machine's local 2.14.1, on CPU; torchcodec decodes
# video datasets, which this workspace does not read). The check below reports any other conflict.
"${PIP[@]}" install -qq --no-warn-conflicts "${C[@]}" -r requirements/lerobot.txt -r requirements/workspace.txt
EXPECTED_CONFLICTS='^lerobot [0-9.]+ (requires torchcodec|has requirement (torch|torchvision)[<>=])'
unexpected=$("${PIP[@]}" check 2>&1 | grep -Ev "$EXPECTED_CONFLICTS|^No broken requirements" || true)
if [ -n "$unexpected" ]; then
  echo "WARNING: dependency conflicts besides lerobot's expected torch pins:" >&2
  echo "$unexpected" >&2
fi
if [ ! -x /usr/bin/chromium ]; then
  # the web view's browser test (src/so101_apps/test/test_web_view.py) runs Debian's headless chromium through
  # playwright (playwright's own browser download needs the network); installed where apt can, else the test
  # fails saying so
  if command -v apt-get >/dev/null; then
    SUDO=()
    [ "$(id -u)" -eq 0 ] || SUDO=(sudo -n)
    echo "== Debian's chromium (the web view's browser test)"
    "${SUDO[@]}" apt-get install -y -qq chromium >/dev/null 2>&1 \
      || { "${SUDO[@]}" apt-get update -qq >/dev/null 2>&1 && "${SUDO[@]}" apt-get install -y -qq chromium >/dev/null 2>&1; } \
      || echo "WARNING: could not install chromium with apt-get (root or sudo needed): the web view's browser test will fail" >&2
  else
    echo "WARNING: no /usr/bin/chromium and no apt-get: install Debian's chromium for the web view's browser test" >&2
  fi
fi
echo "== workspace packages (editable)"
pkgs=()
for setup in src/*/setup.py; do pkgs+=(-e "$(dirname "$setup")"); done
"${PIP[@]}" install -qq --no-deps --no-build-isolation "${pkgs[@]}"
# colcon run from a workspace holding this checkout under src/ must not take the venv's ROS wheels for packages
touch "$VENV/COLCON_IGNORE"
echo "== environment ready: $VENV"
