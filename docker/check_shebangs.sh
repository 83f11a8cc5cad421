#!/usr/bin/env bash
# Usage: check_shebangs.sh INSTALL_BASE VENV
# Fails unless every Python console script colcon installed (INSTALL_BASE/<pkg>/bin/* and
# INSTALL_BASE/<pkg>/lib/<pkg>/*) starts with VENV's interpreter: a script on another Python (e.g.
# /usr/bin/python3 from the system's colcon) cannot import what is installed in the venv.
set -euo pipefail
install_base=${1:?usage: check_shebangs.sh INSTALL_BASE VENV}
venv=${2:?usage: check_shebangs.sh INSTALL_BASE VENV}
want="#!${venv%/}/bin/python"

checked=0
wrong=0
while IFS= read -r -d '' script; do
  first=$(head -n 1 "$script" | tr -d '\0')
  case $first in
    '#!'*python*) ;;
    *) continue ;;  # not a Python script (shell hooks, data)
  esac
  checked=$((checked + 1))
  case $first in
    "$want" | "$want"[0-9]*) ;;  # python, python3, python3.12
    *) echo "check_shebangs: $script starts with '$first', not $want" >&2; wrong=$((wrong + 1)) ;;
  esac
done < <(find "$install_base" -mindepth 3 -maxdepth 3 -type f -path "$install_base/*/bin/*" -print0
         find "$install_base" -mindepth 4 -maxdepth 4 -type f -path "$install_base/*/lib/*/*" \
              ! -path "$install_base/*/lib/python*" -print0)

if [ "$checked" -eq 0 ]; then
  echo "check_shebangs: no Python console scripts under $install_base" >&2
  exit 1
fi
if [ "$wrong" -ne 0 ]; then
  echo "check_shebangs: $wrong of $checked console scripts do not run on $want" >&2
  exit 1
fi
echo "check_shebangs: $checked console scripts run on $want"
