#!/usr/bin/env bash
# Entry of the Ray profile's fleet driver (docker/compose.ray.yaml): join the cluster as a node of its own,
# then run the command (so101 ... --ray-address auto).
# A Ray driver attaches to a raylet on its own machine: ray.init(address="ray-head:6379") in a container
# that runs none waits for one (ray 2.60: ray._private.services.get_node_to_connect_for_driver, 60 s) and
# fails. After `ray start --address` this container has that raylet, and `--ray-address auto` finds the
# cluster through it. The node offers no CPUs: the episodes run on the workers.
set -euo pipefail
: "${SO101_RAY_HEAD:?SO101_RAY_HEAD must name the Ray head as host:port}"
ray start --address="$SO101_RAY_HEAD" --num-cpus=0 --disable-usage-stats
exec "$@"
