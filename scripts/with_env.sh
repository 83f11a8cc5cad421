#!/usr/bin/env bash
# Runs a command inside the workspace environment (.venv on PATH, Hugging Face offline).
# DDS is the caller's ROS environment (ROS_DOMAIN_ID, discovery range, RMW as exported), so what a user runs
# is visible from their other shells; with --isolated first, a private domain on loopback instead, as tests
# and benchmarks use (nothing else on the machine or the network hears it).
# The command runs where it was started: its relative paths are the caller's, not the workspace's.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV=${VENV:-.venv}
export PATH="$ROOT/$VENV/bin:$PATH"
export VIRTUAL_ENV="$ROOT/$VENV"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled
export MPLBACKEND=Agg
unset ROS_LOCALHOST_ONLY  # deprecated in Jazzy (rcl warns on every node while it is set)
if [ "${1:-}" = "--isolated" ]; then
  shift
  # Jazzy's loopback setting alone, and a domain of this run's own
  export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
  export RMW_IMPLEMENTATION=${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}
  export ROS_DOMAIN_ID=$(( ($$ % 100) + 1 ))
fi
exec "$@"
