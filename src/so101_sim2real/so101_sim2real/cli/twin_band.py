"""``so101 twin-band``: the band of each joint's rolling gap on this arm, for the live twin's ``band_file``.

From bags recorded with the twin running (``--bag``: their ``twin/gap`` topic) and/or paired datasets of
the arm against the nominal MuJoCo (``--dataset``, from ``so101 pair --sim mujoco``). The work is done by
:mod:`so101_sim2real.twin_band`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from so101_common.joints import JOINT_NAMES, SHORT_NAMES
from so101_sim2real.twin import TwinConfig
from so101_sim2real.twin_band import (
    DEFAULT_GAP_TOPIC,
    GapSeries,
    fit_band,
    series_from_bag,
    series_from_dataset,
    write_band,
)

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bag", nargs="+", type=Path, default=[], metavar="BAG",
                        help="bags recorded with the twin running (this arm in good order)")
    parser.add_argument("--dataset", nargs="+", type=Path, default=[], metavar="DIR",
                        help="paired datasets of this arm against the nominal MuJoCo (so101 pair --sim mujoco)")
    parser.add_argument("--out", required=True, type=Path, help="band file to write (YAML)")
    parser.add_argument("--gap-topic", default=DEFAULT_GAP_TOPIC, help=f"the twin's gap topic in the bags "
                                                                       f"(default {DEFAULT_GAP_TOPIC})")
    parser.add_argument("--window", type=float, default=TwinConfig.window_s,
                        help=f"rolling RMSE window, s (the twin's window_s; default {TwinConfig.window_s:g})")
    parser.add_argument("--k", type=float, default=4.0, help="band half-width in standard deviations (default 4)")
    parser.add_argument("--position-margin", type=float, default=0.005,
                        help="least band half-width for the position gap, rad (default 0.005)")
    parser.add_argument("--velocity-margin", type=float, default=0.05,
                        help="least band half-width for the velocity gap, rad/s (default 0.05)")


def run(args: argparse.Namespace) -> int:
    if not args.bag and not args.dataset:
        raise ValueError("give --bag and/or --dataset: recordings of this arm in good order")
    if args.out.exists():
        raise FileExistsError(f"{args.out} already exists; choose a new path")
    series: list[GapSeries] = [series_from_bag(bag, args.gap_topic) for bag in args.bag]
    for dataset in args.dataset:
        series += series_from_dataset(dataset)
    band = fit_band(series, args.window, args.k, args.position_margin, args.velocity_margin)
    write_band(args.out, band)
    print(f"wrote {args.out}: {band.samples} warm samples of {len(series)} recording(s), {band.window_s:g} s window, "
          f"band mean ∓ max({band.k:g}·std, margin)")
    print("   position gap RMSE band [rad]")
    print("   " + "".join(f"{SHORT_NAMES[n]:>16}" for n in JOINT_NAMES))
    print("   " + "".join(f"{band.joints[n].position.low:>7.4f}–{band.joints[n].position.high:<7.4f} " for n in JOINT_NAMES))
    return 0
