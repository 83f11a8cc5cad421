"""``so101 demo``: the sim-to-real loop end to end on the embedded default robot, judged held-out.

1. start the virtual SO-101 (a gap profile) on a pseudo-terminal;
2. run the deploy graph in-process — scripted motion (the policy's place, with its future as the
   action chunk) → GapONet compensator → safety filter → driver (real ``scservo_sdk`` over the pty) —
   printing live joint states; every motion is recorded as its own rosbag2 (MCAP) episode;
3. replay the recorded commands in the built-in MuJoCo simulator, pair real and sim, and write the
   gap reports (HTML + PNG).

By default the demo closes the loop on motions the compensator never saw: excitation episodes
(``excitation-<seed>``) and the evaluation motions without compensation → paired datasets → a GapONet
compensator trained on the excitation episodes only → the evaluation motions again, compensated →
before/after comparison on the evaluation motions (``comparison/comparison.json``, HTML + PNG, and a
printed per-joint table). ``--single`` runs one motion once (with the shipped model unless
``--no-compensation``).
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import subprocess
import sys
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import JointState

from so101_bringup.children import raise_for_child, run_child
from so101_bringup.composition import ComposedGraph, GraphOptions, deploy_graph
from so101_bringup.motion_player_node import MotionPlayerNode
from so101_bringup.motions import EXCITATION_PREFIX, load_motion
from so101_bringup.share import config_dir
from so101_common.joints import JOINT_NAMES
from so101_common.paired_dataset import PairedDataset
from so101_testing import apply_private_ros_env, wait_for

__all__ = ["add_arguments", "run"]

_SHORT = {"shoulder_pan": "pan", "shoulder_lift": "lift", "elbow_flex": "elbow", "wrist_flex": "wflex",
          "wrist_roll": "wroll", "gripper": "grip"}


DEFAULT_EVAL_MOTIONS = ("multisine", "chirp_sweep")  # config/motions/<name>.txt: real SAGE motions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default="default", help="gap profile of the virtual arm (name or YAML file)")
    parser.add_argument("--eval-motion", nargs="+", default=None, metavar="FILE",
                        help="evaluation motions, never trained on (SAGE motion files or built-in names; default "
                             f"config/motions/{{{','.join(DEFAULT_EVAL_MOTIONS)}}}.txt)")
    parser.add_argument("--excitation", type=int, default=2, help="excitation episodes the compensator is trained on")
    parser.add_argument("--excitation-seconds", type=float, default=30.0, help="seconds per excitation episode")
    parser.add_argument("--motion", default="sweep", help="with --single: built-in motion (sweep, wave, hold), "
                                                          "excitation-<seed> or SAGE motion file")
    parser.add_argument("--duration", type=float, default=0.0, help="seconds of a built-in motion (default 12)")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default runs/demo-<time>)")
    parser.add_argument("--single", action="store_true",
                        help="one episode only (shipped GapONet model) instead of baseline → train → compensated")
    parser.add_argument("--no-compensation", action="store_true", help="with --single: policy straight into safety")
    parser.add_argument("--gaponet-model", type=Path, default=None,
                        help="with --single: this compensator model instead of the shipped one (ONNX, or "
                             "TorchScript: that is code, torch.jit.load runs it; use only files you trust)")
    parser.add_argument("--epochs", type=int, default=30, help="GapONet training epochs in the loop (default 30)")
    parser.add_argument("--print-period", type=float, default=1.0, help="seconds between live joint-state lines")
    parser.add_argument("--no-analysis", action="store_true", help="stop after recording (no replay/pair/report)")


class _Monitor:
    """Latest measured and commanded positions, for the live table."""

    def __init__(self, node: Node) -> None:
        self.measured = np.full(len(JOINT_NAMES), np.nan)
        self.commanded = np.full(len(JOINT_NAMES), np.nan)
        node.create_subscription(JointState, "/joint_states", lambda m: self._store(m, self.measured), 10)
        node.create_subscription(JointState, "/policy/joint_command", lambda m: self._store(m, self.commanded), 10)

    def at_commanded(self, tolerance: float = 0.25) -> bool:
        """Every joint measured within ``tolerance`` rad of its command (the gap profile's sag included)."""
        offset = np.abs(self.measured - self.commanded)
        return bool(np.all(np.isfinite(offset)) and offset.max() < tolerance)

    @staticmethod
    def _store(msg: JointState, target: np.ndarray) -> None:
        for name, value in zip(msg.name, msg.position, strict=False):
            if name in JOINT_NAMES:
                target[JOINT_NAMES.index(name)] = value


def _start_virtual_arm(profile: str, folder: Path) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """``so101 virtual-bus`` in its own process (as the launch files start it): its physics thread
    then never competes with the driver for this interpreter's GIL. Returns (process, link, calibration)."""
    folder.mkdir(parents=True, exist_ok=True)
    cli = [sys.executable, "-m", "so101_bringup.cli", "virtual-bus"]
    run_child([*cli, "--write-calibration", str(folder)], "the virtual SO-101 could not write its calibration")
    link = folder / "so101_follower"
    log_path = folder / "virtual_bus.log"
    log = log_path.open("wb")
    process = subprocess.Popen([*cli, "--link", str(link), "--profile", profile], stdout=log, stderr=subprocess.STDOUT)
    if not wait_for(lambda: link.exists() or process.poll() is not None, timeout=60.0) or process.poll() is not None:
        process.kill()
        process.wait()
        log.close()
        raise_for_child("the virtual SO-101 did not start", process.returncode,
                        log_path.read_text(errors="replace"), log_path)
    return process, link, folder / "virtual_follower.json"


def _run_session(label: str, opts: GraphOptions, motions: list[tuple[str, str, float]],
                 print_period: float) -> dict[str, Path]:
    """Play ``motions`` (``(name, source, seconds)``, seconds of a built-in motion, 0 = its default) one after
    the other on one virtual arm and graph, each recorded as its own episode (task = the motion's name);
    returns the bag of each motion."""
    print(f"\n== {label}: virtual SO-101 (profile {opts.gap_profile}), compensation "
          f"{'on' if opts.compensation else 'off'}: {', '.join(name for name, _, _ in motions)}")
    arm, link, calibration = _start_virtual_arm(opts.gap_profile, Path(opts.bag_root).parent / "virtual_arm")
    bags: dict[str, Path] = {}
    try:
        opts = replace(opts, port=str(link), calibration_file=str(calibration), motion=motions[0][1])
        with ComposedGraph(deploy_graph(opts)) as graph:
            player = graph.nodes["MotionPlayerNode"]
            assert isinstance(player, MotionPlayerNode)
            monitor = _Monitor(player)
            recorder = graph.nodes["RecorderNode"]
            for name, source, seconds in motions:
                motion = load_motion(source, duration=seconds)
                player.set_motion(motion)
                bags[name] = _record_motion(name, motion.duration, player, monitor, recorder, Path(opts.bag_root),
                                            print_period)
    finally:
        arm.send_signal(signal.SIGINT)
        try:
            arm.wait(10)
        except subprocess.TimeoutExpired:
            arm.kill()
    return bags


def _record_motion(name: str, duration: float, player: MotionPlayerNode, monitor: _Monitor, recorder: Any,
                   bag_root: Path, print_period: float) -> Path:
    # The arm first moves to the motion's start pose (the player holds it) and the recorder discovers
    # every topic; the episode then starts at rest, as a policy rollout would.
    topics = {"/joint_states", "/joint_command", "/policy/joint_command"}
    if not wait_for(lambda: monitor.at_commanded() and topics <= set(recorder.subscribed), timeout=60.0):
        raise RuntimeError(f"not ready to record {name}: arm at {monitor.measured} for {monitor.commanded}, "
                           f"recorder subscribed to {sorted(recorder.subscribed)}")
    recorder.recorder.config.update({"task": name})
    before = set(bag_root.iterdir()) if bag_root.is_dir() else set()
    ok, message = recorder.start_episode()
    if not ok:
        raise RuntimeError(f"recorder did not start: {message}")
    player.restart()
    print(f"\n   {name} ({duration:.1f} s)")
    print("   t[s] | " + "  ".join(f"{_SHORT[n]:>15}" for n in JOINT_NAMES) + "   measured (command - measured), rad")
    start = time.monotonic()
    while (elapsed := time.monotonic() - start) < duration + 1.0:
        time.sleep(print_period)
        cells = "  ".join(f"{m:+6.3f} ({c - m:+6.3f})" for m, c in zip(monitor.measured, monitor.commanded, strict=True))
        print(f" {elapsed:6.1f} | {cells}", flush=True)
    ok, message = recorder.stop_episode()
    if not ok:
        raise RuntimeError(f"recorder did not stop cleanly: {message}")
    print(f"   recorded: {message}")
    new = sorted(p for p in set(bag_root.iterdir()) - before if p.is_dir())
    if len(new) != 1:
        raise RuntimeError(f"expected one new bag for {name} under {bag_root}, found {[p.name for p in new]}")
    return new[0]


def _pair(bags: dict[str, Path], out: Path) -> PairedDataset:
    """One paired dataset of the recorded motions (episodes named after the motions) beside a MuJoCo replay."""
    from so101_sim2real.pairing.align import AlignConfig
    from so101_sim2real.pairing.pair import load_runs, mujoco_replayer, pair_runs

    # The sim replays what the policy asked for (not the compensated command the driver got): the gap
    # is then "real arm vs what the sim would have done", the quantity compensation exists to close.
    runs = [dataclasses.replace(run, name=name) for name, bag in bags.items()
            for run in load_runs(bag, "real", "/joint_states", "/policy/joint_command")]
    dataset = pair_runs(runs, mujoco_replayer(), AlignConfig(), progress=False)
    dataset.save(out / "dataset")
    return dataset


def _analyse(bags: dict[str, Path], out: Path) -> dict:
    from so101_sim2real.analysis.report import summarize, write_report

    dataset = _pair(bags, out)
    summary = summarize(dataset, source=str(out / "dataset"))
    page = write_report(dataset, summary, out / "report")
    print(f"   paired with a MuJoCo replay: {out / 'dataset'}; report {page}")
    return summary


def _train(dataset: Path, out: Path, epochs: int) -> Path:
    from so101_gaponet.export import train_and_export

    model = out / "gaponet_trained.onnx"
    print(f"\n== training a GapONet compensator on {dataset} ({epochs} epochs; the evaluation motions are not in it)")
    figures = train_and_export([dataset], model, "onnx", epochs=epochs, progress=False)
    print(f"   wrote {model}: validation loss {figures['initial_validation_loss']:.4f} → "
          f"{figures['validation_loss']:.4f}")
    return model


def _options(folder: Path, args: argparse.Namespace, compensation: bool, model: Path | None, task: str) -> GraphOptions:
    opts = GraphOptions(port="", compensation=compensation, motion=args.motion, motion_duration=args.duration,
                        autostart_motion=False, hold_start_pose=True, record=True,
                        bag_root=str(folder / "bags"), task=task, gap_profile=args.profile)
    return replace(opts, gaponet_model=str(model)) if model is not None else opts


def _eval_motions(args: argparse.Namespace) -> list[tuple[str, str, float]]:
    sources = args.eval_motion or [str(config_dir() / "motions" / f"{name}.txt") for name in DEFAULT_EVAL_MOTIONS]
    motions = [(Path(source).stem, source, args.duration) for source in sources]
    if len({name for name, _, _ in motions}) != len(motions):
        raise ValueError(f"evaluation motions need distinct names (file stems): {[n for n, _, _ in motions]}")
    return motions


def run(args: argparse.Namespace) -> int:
    apply_private_ros_env()
    out = args.out or Path("runs") / f"demo-{datetime.now():%Y%m%d-%H%M%S}"
    if args.single or args.no_analysis:
        label = "uncompensated" if args.no_compensation else "compensated"
        name = Path(args.motion).stem
        bags = _run_session(label, _options(out / label, args, not args.no_compensation, args.gaponet_model, name),
                            [(name, args.motion, args.duration)], args.print_period)
        if not args.no_analysis:
            _analyse(bags, out / label)
        print(f"\ndone: everything is under {out}")
        return 0

    from so101_sim2real.analysis.report import write_comparison

    evaluation = _eval_motions(args)
    excitation = [(f"{EXCITATION_PREFIX}{seed}", f"{EXCITATION_PREFIX}{seed}", args.excitation_seconds)
                  for seed in range(args.excitation)]
    if {n for n, _, _ in excitation} & {n for n, _, _ in evaluation}:
        raise ValueError("an evaluation motion may not be an excitation (training) motion")
    recorded = _run_session("uncompensated: excitation, then the evaluation motions",
                            _options(out / "uncompensated", args, False, None, "demo"),
                            [*excitation, *evaluation], args.print_period)
    print("\n== pairing the excitation episodes with a MuJoCo replay")
    _pair({name: recorded[name] for name, _, _ in excitation}, out / "excitation")
    baseline = _analyse({name: recorded[name] for name, _, _ in evaluation}, out / "baseline")
    model = _train(out / "excitation" / "dataset", out, args.epochs)
    compensated_bags = _run_session("compensated: the evaluation motions", _options(out / "compensated", args, True, model,
                                                                                  "demo"),
                                    evaluation, args.print_period)
    compensated = _analyse(compensated_bags, out / "compensated")
    comparison = write_comparison([baseline, compensated], ["baseline", "compensated"], out / "comparison")
    _print_comparison(comparison, [name for name, _, _ in evaluation])
    print(f"\ndone: everything is under {out}; before/after report in {out / 'comparison'}")
    return 0


def _print_comparison(comparison: dict, motions: list[str]) -> None:
    """Per-joint position RMSE (real vs MuJoCo replay) before and after compensation."""
    rmse = comparison["delta"]["position"]["rmse"]
    print(f"\n   position gap to the MuJoCo replay on motions not trained on ({', '.join(motions)}), rmse [rad]")
    print("   " + "".join(f"{_SHORT[n]:>9}" for n in JOINT_NAMES))
    for key, label in (("before", "baseline"), ("after", "compensated"), ("change_percent", "change %")):
        print("   " + "".join(f"{_format(rmse[key].get(n)):>9}" for n in JOINT_NAMES) + f"   {label}")


def _format(value: object) -> str:
    return f"{value:+.4f}" if isinstance(value, (int, float)) else "-"
