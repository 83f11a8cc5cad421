"""``so101 replay``: replay a recorded bag, a SAGE motion or a SAGE real run in simulation.

``--sim mujoco`` (default) runs the built-in MuJoCo backend in process, faster than real time, no DDS.
``--sim isaac`` (or ``--isaac``) plays the commands through the Isaac Sim ROS 2 bridge topics in real
time against a running Isaac Sim (or ``ros2 run so101_sim2real mujoco_bridge``) and records what the
simulator publishes. ``--delta-model`` applies a GapONet model's Δ to every command from the simulated
state (ASAP-style delta action: the sim is driven with ``command + Δ``). The work is done by
:mod:`so101_sim2real.replay` (``offline.replay_in_mujoco``, ``core``) and ``replay_node.replay_over_ros``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from so101_gaponet.bounds import COMPENSATOR_MAX_DELTA, SIM_DELTA_MAX_DELTA
from so101_sim2real.replay.core import (
    COMMAND_TOPIC,
    SIM_COMMAND_TOPIC,
    SIM_STATE_TOPIC,
    STATE_TOPIC,
    ReplayError,
    ReplaySource,
    load_bag_source,
    load_motion_source,
    load_sage_real_source,
    write_replay_bag,
    write_sage_sim_run,
)
from so101_sim2real.replay.mujoco_backend import MujocoSimConfig, MujocoSimError
from so101_sim2real.replay.offline import replay_in_mujoco

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sim", choices=("mujoco", "isaac"), default="mujoco",
                        help="simulator: built-in MuJoCo in process (default) or the Isaac Sim ROS 2 bridge topics")
    parser.add_argument("--isaac", action="store_true", help="same as --sim isaac")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--bag", type=Path, help="recorded bag; its command topic is replayed")
    source.add_argument("--motion", type=Path, help="SAGE motion file (50 Hz frames, rad, jaw 0..1)")
    source.add_argument("--sage-real", type=Path, help="SAGE real run folder (output/real/<robot>/<source>/<motion>)")
    parser.add_argument("--out", type=Path, required=True, help="output bag folder, or SAGE sim run folder with --format sage")
    parser.add_argument("--format", choices=("bag", "sage"), default="bag", help="output format (default: bag)")
    parser.add_argument("--delta-model", type=Path, help="GapONet model file (ONNX/TorchScript): drive the sim with command + Δ. "
                        "TorchScript files are code (torch.jit.load runs them): use only ones you trust; prefer ONNX")
    parser.add_argument("--max-delta", type=float, default=None, metavar="RAD",
                        help="cap on |Δ| per joint (rad): a model whose delta_bounds ask for more is refused "
                        f"(default {SIM_DELTA_MAX_DELTA:g} for a sim_delta model, {COMPENSATOR_MAX_DELTA:g} for a compensator)")
    parser.add_argument("--command-topic", default=COMMAND_TOPIC, help=f"command topic in --bag (default {COMMAND_TOPIC})")
    parser.add_argument("--state-topic", default=STATE_TOPIC,
                        help=f"measured state topic in --bag, for the initial state (default {STATE_TOPIC})")
    parser.add_argument("--physics-dt", type=float, default=MujocoSimConfig.physics_dt, help="MuJoCo physics step, s (default 0.005)")
    parser.add_argument("--control-rate", type=float, default=None,
                        help="Hz at which the sim target may change (default: every physics step; a delta model's rate)")
    parser.add_argument("--kp", type=float, default=None, help="servo position gain for all joints, N·m/rad (default: official 998.22)")
    parser.add_argument("--kd", type=float, default=None, help="servo damping gain for all joints, N·m·s/rad (default: official 2.731)")
    parser.add_argument("--settle", type=float, default=1.0, help="--sim isaac: s holding the real initial state first (default 1)")
    parser.add_argument("--sim-command-topic", default=SIM_COMMAND_TOPIC, help="--sim isaac: command topic of the bridge")
    parser.add_argument("--sim-state-topic", default=SIM_STATE_TOPIC, help="--sim isaac: joint state topic of the bridge")


def _load_source(args: argparse.Namespace) -> ReplaySource:
    """The replay source named by ``--bag`` / ``--motion`` / ``--sage-real``."""
    if args.bag is not None:
        return load_bag_source(args.bag, args.command_topic, args.state_topic)
    if args.motion is not None:
        return load_motion_source(args.motion)
    return load_sage_real_source(args.sage_real)


def run(args: argparse.Namespace) -> int:
    if args.isaac:
        args.sim = "isaac"
    if args.out.exists():
        print(f"so101 replay: error: output {args.out} already exists; choose a new path", file=sys.stderr)
        return 2
    try:
        source = _load_source(args)
        if args.sim == "mujoco":
            applied, state = replay_in_mujoco(source, args.physics_dt, args.control_rate, args.kp, args.kd,
                                              args.delta_model, max_delta=args.max_delta)
        else:
            if args.delta_model is not None:
                raise ReplayError("--delta-model runs in process with --sim mujoco; against Isaac Sim put "
                                  "so101_gaponet's compensator node in front of the bridge instead")
            from so101_sim2real.replay_node import replay_over_ros

            applied, state = replay_over_ros(source, args.sim_command_topic, args.sim_state_topic, args.settle)
        if args.format == "sage":
            write_sage_sim_run(args.out, applied, state)
        else:
            write_replay_bag(args.out, source, applied, state, args.sim_command_topic, args.sim_state_topic,
                             robot_id=f"{args.sim}_so101", notes=f"so101 replay of {source.metadata}")
    except (ReplayError, MujocoSimError) as err:
        print(f"so101 replay: error: {err}", file=sys.stderr)
        return 1
    print(f"so101 replay: {source.name}: {len(state)} sim samples over {state.duration:.2f} s -> {args.out}")
    return 0
