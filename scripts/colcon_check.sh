#!/usr/bin/env bash
# The packages as a robot builds and tests them: this checkout copied (tracked and untracked, not ignored files)
# under a fresh workspace's src/, a plain `colcon build` (copies, not symlinks: installed files are found through
# the ament index, never the checkout), then `colcon test` of every package against the installed copies.
# Runs inside the workspace environment (scripts/with_env.sh --isolated); the workspace is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
WS=$(mktemp -d "${TMPDIR:-/tmp}/so101_colcon_ws.XXXXXX")
trap 'rm -rf "$WS"' EXIT
mkdir -p "$WS/src/so101-sim2real"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp -a --parents -t "$WS/src/so101-sim2real"
COLCON=(colcon --log-base "$WS/log")
PATHS=(--base-paths "$WS/src" --build-base "$WS/build" --install-base "$WS/install")
echo "== colcon build ($WS)"
"${COLCON[@]}" build "${PATHS[@]}" --event-handlers console_cohesion- status- > "$WS/build.out" 2>&1 \
  || { cat "$WS/build.out"; exit 1; }
echo "== colcon test (every package, against the installed copies)"
status=0
"${COLCON[@]}" test "${PATHS[@]}" --test-result-base "$WS/test_results" --executor sequential \
  --return-code-on-test-failure --event-handlers console_direct- status- "$@" || status=$?
verbose=()
[ "$status" -eq 0 ] || verbose=(--verbose)
"${COLCON[@]}" test-result --test-result-base "$WS/test_results" "${verbose[@]}" | tail -n 60
if [ "$status" -ne 0 ]; then
  # colcon's summary cuts a failure's message after a few lines: each failing test's whole text, for the CI log
  python - "$WS/test_results" <<'PY'
import pathlib, sys, xml.etree.ElementTree as ET
for report in sorted(pathlib.Path(sys.argv[1]).rglob("*.xml")):
    for case in ET.parse(report).iter("testcase"):
        for problem in (*case.iter("failure"), *case.iter("error")):
            print(f"\n== {case.get('classname')}::{case.get('name')}\n{problem.get('message', '')}\n{problem.text or ''}")
PY
fi
exit "$status"
