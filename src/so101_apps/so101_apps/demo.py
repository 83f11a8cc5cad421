"""``so101 demo``: the sim-to-real loop end to end on the embedded default robot, judged held-out.

1. start the virtual SO-101 (a gap profile) on a pseudo-terminal;
2. run the deploy graph (its driver in its own process) — scripted motion (the policy's place, with its future as the
   action chunk) → GapONet compensator → safety filter → driver (real ``scservo_sdk`` over the pty) —
   printing live joint states; every motion is recorded as its own rosbag2 (MCAP) episode;
3. replay the recorded commands in the built-in MuJoCo simulator, pair real and sim, and write the
   gap reports (HTML + PNG).

By default the demo closes the loop on motions the compensator never saw: the evaluation motions without
compensation (the baseline), then excitation episodes (``excitation-<seed>``), each paired with a MuJoCo
replay as it ends, with a GapONet compensator trained on the episodes so far (a new network, or from
``--start-model``), until the next episode's
validation says more excitation no longer helps (``so101_gaponet.refine``; at most ``--excitation`` episodes,
and none once one more episode and the evaluation motions would heat a servo to its overheat protection; a
progress line per episode says why it stopped) → the evaluation motions again, compensated → before/after
comparison on the evaluation motions (``comparison/comparison.json``, HTML + PNG, and a printed per-joint
table). ``--single`` runs one motion once (with the shipped model unless
``--no-compensation``).

Faults are not gaps: a servo fault (overload, overheat, voltage, lost servo) stops the motion, keeps what
was recorded, prints the joint and the fault and ends the demo with exit status 1
(:class:`so101_apps.motion_runs.ServoFaultStop`); it never reaches pairing or training as a "gap". Servos lost
for a moment that answer again (a dropout of the bus: :func:`so101_apps.session.answering_again`) have their
motion recorded once more instead.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import numpy as np

from so101_apps import ros_environment
from so101_apps.motion_runs import PHYSICS_LAG_WARN_MS, MotionSpec, RecordedMotion, physics_lagged
from so101_apps.session import run_session
from so101_bringup.node_specs import GraphOptions
from so101_bringup.share import config_dir
from so101_common import topics
from so101_common.cli_args import non_negative_float, positive_float, positive_int
from so101_common.joints import JOINT_NAMES, SHORT_NAMES
from so101_common.paired_dataset import PairedDataset
from so101_feetech.control_table import Register
from so101_gaponet.metadata import GapModelMetadata
from so101_gaponet.refine import RefineSettings
from so101_policy.motions import EXCITATION_PREFIX, excitation_seed
from so101_virtual.servo_memory import FACTORY_DEFAULTS

__all__ = ["add_arguments", "run", "unseen_seed"]

DEFAULT_EVAL_MOTIONS = ("multisine", "chirp_sweep")  # config/motions/<name>.txt: real SAGE motions
COLLECTION = RefineSettings(max_episodes=4)  # the demo's excitation: 2 to 4 episodes of 30 s (≤ 5 min in all)
# °C: an STS3215's overheat protection (Max_Temperature_Limit as shipped; LeRobot's servo settings keep it)
OVERHEAT_C = float(FACTORY_DEFAULTS[Register.Max_Temperature_Limit])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    ros_environment.add_arguments(parser)
    parser.add_argument("--profile", default="default", help="gap profile of the virtual arm (name or YAML file)")
    parser.add_argument("--eval-motion", nargs="+", default=None, metavar="FILE",
                        help="evaluation motions, never trained on (SAGE motion files or built-in names; default "
                             f"config/motions/{{{','.join(DEFAULT_EVAL_MOTIONS)}}}.txt)")
    parser.add_argument("--excitation", type=positive_int, default=COLLECTION.max_episodes,
                        help="most excitation episodes the compensator is trained on (collection stops earlier when "
                             f"the next episode's validation improves by less than {COLLECTION.tolerance * 100:g} %%; at least 2)")
    parser.add_argument("--excitation-seconds", type=positive_float, default=30.0, help="seconds per excitation episode")
    parser.add_argument("--motion", default="sweep", help="with --single: built-in motion (sweep, wave, hold), "
                                                          "excitation-<seed> or SAGE motion file")
    parser.add_argument("--duration", type=non_negative_float, default=0.0, help="seconds of a built-in motion (default 12)")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default runs/demo-<time>)")
    parser.add_argument("--single", action="store_true",
                        help="one episode only (shipped GapONet model) instead of baseline → train → compensated")
    parser.add_argument("--no-compensation", action="store_true", help="with --single: policy straight into safety")
    parser.add_argument("--gaponet-model", type=Path, default=None,
                        help="with --single: this compensator model instead of the shipped one (ONNX, or "
                             "TorchScript: that is code, torch.jit.load runs it; use only files you trust)")
    parser.add_argument("--epochs", type=positive_int, default=30, help="GapONet training epochs in the loop (default 30)")
    parser.add_argument("--start-model", type=Path, default=None, metavar="FILE",
                        help="per-arm compensator (ONNX, e.g. the shipped gaponet_so101_default.onnx) the loop's "
                             "training starts from, instead of a new network; it also judges the first excitation "
                             "episode")
    parser.add_argument("--print-period", type=positive_float, default=1.0, help="seconds between live joint-state lines")
    parser.add_argument("--no-analysis", action="store_true", help="stop after recording (no replay/pair/report)")
    parser.add_argument("--web", action="store_true",
                        help="serve the live web view while it runs (the arm, its command and twin in 3D, plots, "
                             "servo telemetry): open the URL it prints in a browser")
    parser.add_argument("--web-port", type=int, default=9090, help="HTTP port of the web view (default 9090)")
    parser.add_argument("--web-grpc-port", type=int, default=None, help="port of the web view's live data (default 9876)")
    parser.add_argument("--web-rate", type=positive_float, default=None,
                        help="updates per second sent to browsers, at most (default 30; lower it when the view falls "
                             "behind: a browser on the same machine takes the CPU the chain needs)")
    parser.add_argument("--no-twin", action="store_true",
                        help="without the live gap twin (MuJoCo on the policy's commands beside the arm, recorded "
                             "with each episode on twin/joint_states, twin/gap, twin/gap_rmse)")


def _pair(bags: dict[str, Path], out: Path) -> PairedDataset:
    """One paired dataset of the recorded motions (episodes named after the motions) beside a MuJoCo replay."""
    from so101_sim2real.pairing.align import AlignConfig
    from so101_sim2real.pairing.pair import load_runs, mujoco_replayer, pair_runs

    # The sim replays what the policy asked for (not the compensated command the driver got): the gap
    # is then "real arm vs what the sim would have done", the quantity compensation exists to close.
    runs = [dataclasses.replace(run, name=name) for name, bag in bags.items()
            for run in load_runs(bag, "real", topics.absolute(topics.JOINT_STATES), topics.absolute(topics.POLICY_COMMAND))]
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


def thermal_halt(temperatures: np.ndarray, episode_heating: np.ndarray, evaluation_heating: np.ndarray,
                 limit_c: float = OVERHEAT_C) -> str:
    """Why collection must stop here ('' if it need not): a servo that one more episode like the last, then the
    evaluation motions played again, would take to its overheat protection (a heavy payload's shoulder_lift
    warms by 7–10 °C per 30 s episode). Stopping there leaves the evaluation its thermal budget."""
    projected = np.nan_to_num(temperatures, nan=-np.inf) + episode_heating + evaluation_heating
    if not (projected >= limit_c).any():
        return ""
    j = int(np.argmax(projected))
    return (f"the servos' heat: {JOINT_NAMES[j]} at {temperatures[j]:.0f} °C, one more episode "
            f"(+{episode_heating[j]:.0f} °C) and the evaluation motions (+{evaluation_heating[j]:.0f} °C) would reach "
            f"its {limit_c:.0f} °C overheat protection")


def unseen_seed(start: GapModelMetadata) -> int:
    """The first excitation seed past those a start model was trained on (its provenance names the episodes, as
    the demo's models do): each new episode is then a motion no model has seen, which is what lets it judge
    them. Measured: two demos starting from an earlier demo's model on the same seeds stopped after 2 episodes
    (the start judged motions it had trained on better than the model fine-tuned on one episode did by 61–72 %)."""
    seeds = [seed for name in start.provenance.get("datasets", []) if isinstance(name, str)
             and (seed := excitation_seed(name)) is not None]
    return max(seeds) + 1 if seeds else 0


class _Collector:
    """After each excitation episode: pair it, train on the episodes so far, say whether to collect more."""

    def __init__(self, settings: RefineSettings, epochs: int, out: Path, start: Path | None) -> None:
        from so101_gaponet.refine import ArmTrainer, Refinement
        from so101_gaponet.train import TrainConfig, check_start_fits, load_start
        from so101_sim2real.pairing.align import AlignConfig

        config = TrainConfig(epochs=epochs, progress=False)
        if start is None:
            trainer, first_seed = ArmTrainer(config), 0
        else:  # refused here, before the arm moves, rather than at the first training
            model = load_start(start)
            check_start_fits(model.metadata, JOINT_NAMES, AlignConfig().rate_hz)
            trainer, first_seed = ArmTrainer(config, model, f"the start model ({start.name})"), unseen_seed(model.metadata)
        self.refinement = Refinement(trainer, settings)
        self.excitation = [f"{EXCITATION_PREFIX}{seed}" for seed in range(first_seed, first_seed + settings.max_episodes)]
        self.names, self.out = set(self.excitation), out
        self.datasets: dict[str, PairedDataset] = {}  # each excitation episode, paired as it ended
        self.evaluation_heating = np.zeros(len(JOINT_NAMES))  # °C the evaluation motions heated each servo

    def __call__(self, name: str, recorded: RecordedMotion) -> bool:
        if name not in self.names:  # an evaluation motion: it will be played once more, compensated
            self.evaluation_heating += recorded.heating
            return True
        if not self.datasets:
            print(f"\n   training on the excitation episodes as they come, until the next one's validation stops "
                  f"improving (at most {self.refinement.settings.max_episodes}; the evaluation motions are not in them)")
        self.datasets[name] = _pair({name: recorded.bag}, self.out / name)
        halt = thermal_halt(np.asarray(recorded.temperature_end), recorded.heating, self.evaluation_heating)
        step = self.refinement.add(self.datasets[name], halt)
        print(step.line(name), flush=True)
        return not self.refinement.done

    def write(self) -> Path:
        """The model trained on every episode, its collection record beside it, the episodes as one dataset."""
        from so101_gaponet.export import write_and_check

        model = self.out.parent / "gaponet_trained.onnx"
        result = self.refinement.model
        error = write_and_check(result.module, result.metadata, model, "onnx")
        if error > 1e-4:
            raise RuntimeError(f"exported model differs from the trained one by {error:.2e}")
        model.with_suffix(".json").write_text(json.dumps(
            {"episodes": list(self.datasets), "stopped": self.refinement.steps[-1].stop,
             "steps": [dataclasses.asdict(s) for s in self.refinement.steps]}, indent=2) + "\n")
        first = next(iter(self.datasets.values()))
        together = PairedDataset(rate_hz=first.rate_hz, metadata=dict(first.metadata))
        for dataset in self.datasets.values():  # already paired: no second replay
            for episode in dataset.episodes:
                together.add(episode)
        together.save(self.out / "dataset")
        print(f"   wrote {model} (trained on {', '.join(self.datasets)}: {self.refinement.steps[-1].stop})")
        return model


def _options(folder: Path, args: argparse.Namespace, compensation: bool, model: Path | None, task: str) -> GraphOptions:
    opts = GraphOptions(port="", compensation=compensation, motion=args.motion, motion_duration=args.duration,
                        autostart_motion=False, hold_start_pose=True, record=True,
                        bag_root=str(folder / "bags"), task=task, gap_profile=args.profile, twin=not args.no_twin,
                        web=args.web, web_port=args.web_port, web_grpc_port=args.web_grpc_port,
                        web_rate_hz=args.web_rate)
    return replace(opts, gaponet_model=str(model)) if model is not None else opts


def _eval_motions(args: argparse.Namespace) -> list[MotionSpec]:
    sources = args.eval_motion or [str(config_dir() / "motions" / f"{name}.txt") for name in DEFAULT_EVAL_MOTIONS]
    motions = [MotionSpec(Path(source).stem, source, args.duration) for source in sources]
    if len({m.name for m in motions}) != len(motions):
        raise ValueError(f"evaluation motions need distinct names (file stems): {[m.name for m in motions]}")
    return motions


def run(args: argparse.Namespace) -> int:
    ros_environment.join(args)
    out = args.out or Path("runs") / f"demo-{datetime.now():%Y%m%d-%H%M%S}"
    if args.single or args.no_analysis:
        label = "uncompensated" if args.no_compensation else "compensated"
        name = Path(args.motion).stem
        recorded = run_session(label, _options(out / label, args, not args.no_compensation, args.gaponet_model, name),
                               [MotionSpec(name, args.motion, args.duration)], args.print_period)
        if not args.no_analysis:
            _analyse({name: recorded[name].bag}, out / label)
        print(f"\ndone: everything is under {out}")
        return 0

    from so101_sim2real.analysis.report import write_comparison

    evaluation = _eval_motions(args)
    settings = replace(COLLECTION, max_episodes=max(args.excitation, COLLECTION.min_episodes))
    collector = _Collector(settings, args.epochs, out / "excitation", args.start_model)
    excitation = [MotionSpec(name, name, args.excitation_seconds) for name in collector.excitation]
    if {m.name for m in excitation} & {m.name for m in evaluation}:
        raise ValueError("an evaluation motion may not be an excitation (training) motion")
    recorded = run_session("uncompensated: the evaluation motions, then excitation until the compensator has enough",
                           _options(out / "uncompensated", args, False, None, "demo"),
                           [*evaluation, *excitation], args.print_period, after_each=collector)
    baseline = _analyse({m.name: recorded[m.name].bag for m in evaluation}, out / "baseline")
    model = collector.write()
    compensated_runs = run_session("compensated: the evaluation motions",
                                   _options(out / "compensated", args, True, model, "demo"), evaluation,
                                   args.print_period)
    compensated = _analyse({name: run.bag for name, run in compensated_runs.items()}, out / "compensated")
    comparison = write_comparison([baseline, compensated], ["baseline", "compensated"], out / "comparison")
    _print_comparison(comparison, [m.name for m in evaluation])
    evaluated = {**{f"uncompensated {m.name}": recorded[m.name] for m in evaluation},
                 **{f"compensated {name}": run for name, run in compensated_runs.items()}}
    _print_stalls(evaluated)
    _print_physics_lag(evaluated)
    print(f"\ndone: everything is under {out}; before/after report in {out / 'comparison'}")
    return 0


def _print_comparison(comparison: dict, motions: list[str]) -> None:
    """Per-joint position RMSE (real vs MuJoCo replay) before and after compensation."""
    rmse = comparison["delta"]["position"]["rmse"]
    print(f"\n   position gap to the MuJoCo replay on motions not trained on ({', '.join(motions)}), rmse [rad]")
    print("   " + "".join(f"{SHORT_NAMES[n]:>9}" for n in JOINT_NAMES))
    for key, label in (("before", "baseline"), ("after", "compensated"), ("change_percent", "change %")):
        print("   " + "".join(f"{_format(rmse[key].get(n)):>9}" for n in JOINT_NAMES) + f"   {label}")


def _print_stalls(runs: dict[str, RecordedMotion]) -> None:
    """The evaluation recordings in which the chain stalled: their figures measure the stall too."""
    stalls = [f"{label}: {run.state_gap.seconds * 1000:.0f} ms from {run.state_gap.at_s:.1f} s"
              for label, run in runs.items() if run.stalled]
    if stalls:
        print(f"   NOTE: no joint state for a while in {'; '.join(stalls)} (WARNING lines above): these figures "
              "include the stall")


def _print_physics_lag(runs: dict[str, RecordedMotion]) -> None:
    """The evaluation recordings in which the virtual arm's physics fell behind wall time: their figures measure
    this machine's CPU too."""
    lagged = [f"{label}: {run.physics_lag.fraction_behind(PHYSICS_LAG_WARN_MS):.0%} of it"
              for label, run in runs.items() if run.physics_lag is not None and physics_lagged(run.physics_lag)]
    if lagged:
        print(f"   NOTE: the virtual arm's physics ran {PHYSICS_LAG_WARN_MS:g} ms or more behind wall time in "
              f"{'; '.join(lagged)} (WARNING lines above): these figures include that lag")


def _format(value: object) -> str:
    return f"{value:+.4f}" if isinstance(value, (int, float)) else "-"
