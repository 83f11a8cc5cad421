"""``so101 fleet simulate --arms N --episodes M --out ROOT``: a simulated fleet's episode bags."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tqdm import tqdm

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arms", type=int, default=4, help="virtual arms in the fleet (default 4)")
    parser.add_argument("--episodes", type=int, default=4, help="episodes per arm (default 4)")
    parser.add_argument("--days", type=int, default=None, help="days the episodes spread over (default: one a day)")
    parser.add_argument("--duration", type=float, default=6.0, help="episode length, simulated s (default 6)")
    parser.add_argument("--rate", type=float, default=50.0, help="control rate, Hz (default 50)")
    parser.add_argument("--seed", type=int, default=0, help="fleet seed: same seed, same fleet (default 0)")
    parser.add_argument("--fast-fraction", type=float, default=0.25, help="share of arms that wear fast (default 0.25)")
    parser.add_argument("--operator", default="fleet-sim", help="operator stored with every episode")
    parser.add_argument("--out", type=Path, required=True, help="fleet root to create (ROOT/<robot_id>/<episode>/)")
    parser.add_argument("--workers", type=int, default=None,
                        help="arms simulated in parallel as Ray tasks on a local runtime (default: in this process)")
    parser.add_argument("--ray-address", default=None, help="simulate the arms on this Ray cluster (shared --out)")


def run(args: argparse.Namespace) -> int:
    from so101_fleet.simulate import FleetConfig, simulate_fleet
    from so101_fleet.wear import WearModel

    try:
        config = FleetConfig(arms=args.arms, episodes=args.episodes, days=args.days, duration_s=args.duration,
                             rate_hz=args.rate, seed=args.seed, operator=args.operator,
                             wear=WearModel(fast_fraction=args.fast_fraction))
    except ValueError as err:
        print(f"so101 fleet simulate: error: {err}", file=sys.stderr)
        return 2
    with tqdm(total=config.arms * config.episodes, unit="episode", desc="simulate") as bar:
        try:
            bags = simulate_fleet(args.out, config, progress=lambda done, _total: bar.update(done - bar.n),
                                  workers=args.workers, ray_address=args.ray_address)
        except FileExistsError as err:
            print(f"so101 fleet simulate: error: {err}", file=sys.stderr)
            return 1
    print(f"wrote {len(bags)} episode bags of {config.arms} arms to {args.out}")
    return 0
