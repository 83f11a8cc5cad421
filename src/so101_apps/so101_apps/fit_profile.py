"""``so101 fit-profile``: identify a gap profile (the virtual SO-101's physical parameters) from
recordings of a real arm, by running the virtual arm's own physics and firmware on the recorded
commands (:mod:`so101_virtual.sysid`). Users run it on their own arm to get its digital twin::

    so101 fit-profile --sage-real output/real/so101/custom --out my_arm.yaml --report fit_report/

Recordings held out of the fit (every 5th in name order by default, or ``--holdout NAME...``) are
replayed with the fitted and the base profile afterwards, and the per-joint table (command→state RMSE
and lag of the real arm and of the virtual one) is printed, written into the profile's header and,
with ``--report``, as ``fit_report.json`` + ``fit_report.png`` (the plot: when recordings are held out).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

from so101_common.cli_args import non_negative_float, non_negative_int, positive_float, positive_int
from so101_common.sage import SageFormatError
from so101_recorder.errors import RecorderError
from so101_sim2real.replay.fit_recordings import (
    COMMAND_TOPIC,
    STATE_TOPIC,
    load_bag_recordings,
    load_sage_recordings,
    split_holdout,
)
from so101_virtual.profiles import ProfileError, load_profile, write_profile
from so101_virtual.sysid.fit import FitConfig, FitError, fit_profile, planned_simulations, simulate_all
from so101_virtual.sysid.recording import RecordingError
from so101_virtual.sysid.report import compare, format_table, write_report

__all__ = ["add_arguments", "run"]

_DEFAULTS = FitConfig()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sage-real", nargs="+", action="extend", default=[], metavar="DIR",
                        help="SAGE real run folders (output/real/<robot>/<source>/<motion>) or folders of them")
    parser.add_argument("--bag", nargs="+", action="extend", default=[], metavar="BAG",
                        help="recorded bags (commands and measured states)")
    parser.add_argument("--command-topic", default=COMMAND_TOPIC, help="bags: the commands the arm received")
    parser.add_argument("--state-topic", default=STATE_TOPIC, help="bags: the measured joint states")
    parser.add_argument("--base", default="default", help="profile to start from: shipped name or YAML file")
    parser.add_argument("--out", required=True, type=Path, help="where to write the fitted profile (YAML)")
    parser.add_argument("--name", help="the fitted profile's name (default: --out's file name)")
    parser.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    parser.add_argument("--report", type=Path, metavar="DIR", help="write fit_report.json here, and fit_report.png when recordings are held out")
    parser.add_argument("--holdout", nargs="+", default=[], metavar="NAME",
                        help="recordings to keep out of the fit (source/motion or motion names)")
    parser.add_argument("--holdout-every", type=non_negative_int, default=5, metavar="N",
                        help="without --holdout: keep every N-th recording in name order out, from the first "
                        "(0: fit on all; default %(default)s)")
    parser.add_argument("--window", type=positive_float, default=_DEFAULTS.window,
                        help="seconds of each recording used for fitting (where its commands sweep widest; "
                        "default %(default)s)")
    parser.add_argument("--lag-weight", type=non_negative_float, default=_DEFAULTS.lag_weight,
                        help="cost of a one-frame time shift between the virtual and the recorded state per "
                        "joint, relative to the joint's state error with the base profile (0: state error only; "
                        "default %(default)s)")
    parser.add_argument("--iterations", type=positive_int, default=_DEFAULTS.iterations,
                        help="Levenberg–Marquardt iterations (default %(default)s)")
    parser.add_argument("--arm-parameters", nargs="*", default=list(_DEFAULTS.arm_parameters), metavar="KEY",
                        help="arm-wide firmware keys to fit (default %(default)s)")
    parser.add_argument("--joint-parameters", nargs="*", default=list(_DEFAULTS.joint_parameters), metavar="KEY",
                        help="per-joint keys to fit on every arm joint (default %(default)s)")


def _command_line(args: argparse.Namespace) -> str:
    words = ["so101", "fit-profile"]
    for flag, values in (("--sage-real", args.sage_real), ("--bag", args.bag)):
        if values:
            words += [flag, *map(str, values)]
    words += ["--base", str(args.base), "--out", str(args.out)]
    if args.name:
        words += ["--name", args.name]
    if args.holdout:
        words += ["--holdout", *args.holdout]
    elif args.holdout_every != 5:
        words += ["--holdout-every", str(args.holdout_every)]
    if args.window != _DEFAULTS.window:
        words += ["--window", f"{args.window:g}"]
    if args.iterations != _DEFAULTS.iterations:
        words += ["--iterations", str(args.iterations)]
    if args.lag_weight != _DEFAULTS.lag_weight:
        words += ["--lag-weight", f"{args.lag_weight:g}"]
    if tuple(args.arm_parameters) != _DEFAULTS.arm_parameters:
        words += ["--arm-parameters", *args.arm_parameters]
    if tuple(args.joint_parameters) != _DEFAULTS.joint_parameters:
        words += ["--joint-parameters", *args.joint_parameters]
    return shlex.join(words)


def run(args: argparse.Namespace) -> int:
    prog = "so101 fit-profile"
    if not args.sage_real and not args.bag:
        print(f"{prog}: error: give recordings to fit: --sage-real DIR... and/or --bag BAG...", file=sys.stderr)
        return 2
    if args.out.exists() and not args.force:
        print(f"{prog}: error: {args.out} already exists; choose a new path or pass --force", file=sys.stderr)
        return 1
    try:
        config = FitConfig(tuple(args.arm_parameters), tuple(args.joint_parameters), iterations=args.iterations,
                           window=args.window, lag_weight=args.lag_weight)
        base = load_profile(args.base)
        recordings = load_sage_recordings(args.sage_real) + load_bag_recordings(args.bag, args.command_topic,
                                                                                args.state_topic)
        fit_on, held_out = split_holdout(recordings, args.holdout_every, args.holdout)
        if not fit_on:
            raise FitError("every recording is held out; nothing is left to fit on")
        minutes = sum(r.duration for r in fit_on) / 60.0
        print(f"{prog}: fitting {base.name!r} on {len(fit_on)} recordings ({minutes:.1f} min), "
              f"{len(held_out)} held out")
        with tqdm(total=planned_simulations(config), unit="sim", desc="fit") as bar:
            result = fit_profile(base, fit_on, config, progress=bar.update)
            bar.total = bar.n
            bar.refresh()
        description = f"fitted to {len(fit_on)} real recordings by so101 fit-profile (base {base.name})"
        profile = result.fitted.apply(base, name=args.name or args.out.stem, description=description)
        rows = []
        fitted_sims: list[np.ndarray] = []
        base_sims: list[np.ndarray] = []
        if held_out:
            for rec in tqdm(held_out, unit="motion", desc="held-out replay"):
                fitted_sims += simulate_all(profile, [rec])
                base_sims += simulate_all(base, [rec])
            rows = compare(held_out, fitted_sims, base_sims)
    except (ProfileError, SageFormatError, RecordingError, RecorderError, FitError, ValueError, OSError) as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 1
    command = _command_line(args)
    table = format_table(rows) if rows else "(no recording held out: nothing to evaluate on)"
    print(table)
    held_names = ", ".join(r.name for r in held_out) or "none"
    header = (f"Fitted by so101 fit-profile from {len(fit_on)} recordings of a real arm, starting from "
              f"{base.name!r}.\nReproduce: {command}\nHeld out (not fitted on): {held_names}\n"
              "Held-out command→state tracking, real vs this profile (✗: outside ±25 % / one frame):\n" + table)
    write_profile(args.out, profile, header)
    print(f"{prog}: wrote {args.out}")
    if args.report is not None:
        for path in write_report(args.report, result, rows, held_out, fitted_sims, base_sims, command):
            print(f"{prog}: wrote {path}")
    if rows and not all(r.rmse_ok and r.lag_ok for r in rows):
        print(f"{prog}: held-out targets not met on: "
              + ", ".join(r.joint for r in rows if not (r.rmse_ok and r.lag_ok)))
    return 0
