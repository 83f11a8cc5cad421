#!/usr/bin/env bash
# Runs a command inside the workspace environment with DDS kept on loopback (private domain).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
export PATH="$PWD/$VENV/bin:$PATH"
export VIRTUAL_ENV="$PWD/$VENV"
# Jazzy's loopback setting alone: ROS_LOCALHOST_ONLY is deprecated (rcl warns twice per node when it is set)
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
unset ROS_LOCALHOST_ONLY
export RMW_IMPLEMENTATION=${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}
export ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-$(( ($$ % 100) + 1 ))}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled
export MPLBACKEND=Agg
exec "$@"
