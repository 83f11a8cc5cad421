"""Motions played through the deploy chain and recorded, one episode each: what ``so101 demo`` and
``so101 run-motion`` share.

A session starts the virtual SO-101 in its own process (or uses the real arm's port), runs the deploy
graph in-process — motion player (the policy's place, its future as the action chunk) → GapONet
compensator (optional) → safety filter → driver → recorder — and plays motions one after the other,
each recorded as its own rosbag2 (MCAP) episode named after the motion.

Faults are not gaps: when a servo reports a fault on ``/diagnostics`` (``so101_common.servo_faults``)
the motion stops at once — the player holds the arm where it measured it, so no joint is pushed further
— the episode is closed and kept (its metadata carries the fault span), the joint and the fault are
printed, and :class:`ServoFaultStop` is raised with the bags recorded so far.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from sensor_msgs.msg import JointState

from so101_bringup.arm_watch import ArmWatch
from so101_bringup.children import raise_for_child, run_child
from so101_bringup.composition import ComposedGraph, GraphOptions, deploy_graph
from so101_bringup.motion_player_node import MotionPlayerNode
from so101_bringup.motions import load_motion
from so101_common.joints import JOINT_NAMES
from so101_common.paired_dataset import FaultSpan
from so101_common.servo_faults import format_fault, read_servo_fault
from so101_testing import wait_for

__all__ = ["MotionSpec", "RecordedMotion", "ServoFaultStop", "DeployMonitor", "start_virtual_arm", "run_session"]

SHORT_NAMES = {"shoulder_pan": "pan", "shoulder_lift": "lift", "elbow_flex": "elbow", "wrist_flex": "wflex",
               "wrist_roll": "wroll", "gripper": "grip"}


@dataclass(frozen=True)
class MotionSpec:
    name: str  # episode name (the motion's stem)
    source: str  # built-in motion name, excitation-<seed> or SAGE motion file
    seconds: float = 0.0  # duration of a built-in motion (0 = its default)


@dataclass(frozen=True)
class RecordedMotion:
    bag: Path  # the episode's bag folder
    start: float  # s on the ROS clock (the recorded messages' stamps) when the motion started
    stop: float  # ... when it ended or was stopped
    state_rate_hz: float  # joint states received per second while it played (the chain's health)
    faults: tuple[FaultSpan, ...] = ()  # s since the motion started


class ServoFaultStop(RuntimeError):
    """A servo fault stopped a motion; the recordings so far are kept (``recorded``)."""

    def __init__(self, motion: str, spans: Sequence[FaultSpan], recorded: dict[str, RecordedMotion]) -> None:
        self.motion, self.spans, self.recorded = motion, list(spans), dict(recorded)
        faults = "; ".join(format_fault(span) for span in spans)
        kept = ", ".join(str(r.bag) for r in recorded.values()) or "nothing"
        super().__init__(f"servo fault during {motion} (s from its start): {faults}; motion stopped, "
                         f"arm held where it was; recordings kept: {kept}")


class DeployMonitor:
    """The subscriptions feeding an :class:`~so101_bringup.arm_watch.ArmWatch` (``watch``) on ``node``'s clock:
    ``/joint_states``, ``/policy/joint_command`` and the servo faults on ``/diagnostics``."""

    def __init__(self, node: Node) -> None:
        self._clock = node.get_clock()
        self.watch = ArmWatch(self.now())
        node.create_subscription(JointState, "/joint_states", self._on_state, 10)
        node.create_subscription(JointState, "/policy/joint_command", self._on_command, 10)
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 50)

    def now(self) -> float:
        return self._clock.now().nanoseconds * 1e-9

    def _on_state(self, msg: JointState) -> None:
        self.watch.on_state(msg.name, msg.position, self.now())

    def _on_command(self, msg: JointState) -> None:
        self.watch.on_command(msg.name, msg.position)

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        self.watch.on_faults([f for status in msg.status
                              if (f := read_servo_fault({kv.key: kv.value for kv in status.values}, status.message))],
                             self.now())


def start_virtual_arm(profile: str, folder: Path) -> tuple[subprocess.Popen[bytes], Path, Path]:
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


def run_session(label: str, opts: GraphOptions, motions: Sequence[MotionSpec], print_period: float,
                virtual: bool = True) -> dict[str, RecordedMotion]:
    """Play ``motions`` one after the other on one arm and graph, each recorded as its own episode
    (task = the motion's name); returns what was recorded of each motion. ``virtual``: start the virtual SO-101
    with ``opts.gap_profile`` (else ``opts.port`` and ``opts.calibration_file`` name the real arm)."""
    arm_text = f"virtual SO-101 (profile {opts.gap_profile})" if virtual else f"SO-101 on {opts.port}"
    print(f"\n== {label}: {arm_text}, compensation {'on' if opts.compensation else 'off'}: "
          f"{', '.join(m.name for m in motions)}")
    arm = None
    if virtual:
        arm, link, calibration = start_virtual_arm(opts.gap_profile, Path(opts.bag_root).parent / "virtual_arm")
        # configured as LeRobot configures a follower: the arm its gap profile was fitted as
        opts = replace(opts, port=str(link), calibration_file=str(calibration), configure_servos=True)
    recorded: dict[str, RecordedMotion] = {}
    try:
        with ComposedGraph(deploy_graph(replace(opts, motion=motions[0].source))) as graph:
            player = graph.nodes["MotionPlayerNode"]
            assert isinstance(player, MotionPlayerNode)
            monitor = DeployMonitor(player)
            recorder = graph.nodes["RecorderNode"]
            driver_rate_hz = float(graph.nodes["DriverNode"].params.rate_hz)
            for spec in motions:
                motion = load_motion(spec.source, duration=spec.seconds)
                player.set_motion(motion)
                recorded[spec.name] = _record_motion(spec.name, motion.duration, player, monitor, recorder,
                                                     Path(opts.bag_root), print_period, driver_rate_hz)
                if recorded[spec.name].faults:
                    raise ServoFaultStop(spec.name, recorded[spec.name].faults, recorded)
    finally:
        if arm is not None:
            arm.send_signal(signal.SIGINT)
            try:
                arm.wait(10)
            except subprocess.TimeoutExpired:
                arm.kill()
    return recorded


def _record_motion(name: str, duration: float, player: MotionPlayerNode, monitor: DeployMonitor, recorder: Any,
                   bag_root: Path, print_period: float, driver_rate_hz: float) -> RecordedMotion:
    # The arm first moves to the motion's start pose (the player holds it) and comes to rest there, and the
    # recorder discovers every topic; the episode then starts at rest, as a policy rollout would.
    topics = {"/joint_states", "/joint_command", "/policy/joint_command"}
    watch = monitor.watch
    if not wait_for(lambda: (watch.settled(monitor.now()) and topics <= set(recorder.subscribed)) or watch.faults.active,
                    timeout=60.0):
        raise RuntimeError(f"not ready to record {name}: arm at {watch.measured} for {watch.commanded}, "
                           f"recorder subscribed to {sorted(recorder.subscribed)}")
    recorder.recorder.config.update({"task": name})
    before = set(bag_root.iterdir()) if bag_root.is_dir() else set()
    ok, message = recorder.start_episode()
    if not ok:
        raise RuntimeError(f"recorder did not start: {message}")
    watch.mark(monitor.now())
    player.restart()
    started = monitor.now()  # the player's clock: the node's
    print(f"\n   {name} ({duration:.1f} s)")
    print("   t[s] | " + "  ".join(f"{SHORT_NAMES[n]:>15}" for n in JOINT_NAMES) + "   measured (command - measured), rad")
    start = time.monotonic()
    end, next_line = start + duration + 1.0, start + print_period
    while not wait_for(lambda: watch.faults.active, timeout=max(min(next_line, end) - time.monotonic(), 0.0)):
        if time.monotonic() >= end:
            break
        next_line += print_period
        cells = "  ".join(f"{m:+6.3f} ({c - m:+6.3f})" for m, c in zip(watch.measured, watch.commanded, strict=True))
        print(f" {time.monotonic() - start:6.1f} | {cells}", flush=True)
    stopped = monitor.now()
    state_rate_hz = watch.states / max(stopped - started, 1e-9)
    faults = watch.faults.spans()
    if faults:
        player.hold(watch.measured)
        for span in faults:
            print(f"   FAULT {format_fault(span)}: stopping the motion, holding the arm where it is", flush=True)
        # the recorder sees the same report on /diagnostics: keep the episode open until its metadata has it
        wait_for(lambda: bool(recorder.recorder.current_faults()), timeout=2.0)
    ok, message = recorder.stop_episode()
    if not ok:
        raise RuntimeError(f"recorder did not stop cleanly: {message}")
    print(f"   recorded: {message}; joint states at {state_rate_hz:.0f} Hz (driver: {driver_rate_hz:g} Hz)")
    if state_rate_hz < 0.9 * driver_rate_hz:
        print(f"   WARNING: the chain delivered joint states at {state_rate_hz / driver_rate_hz:.0%} of the driver's rate: "
              "this machine is overloaded, and the recording shows it (late commands, lag) on top of the arm's gap")
    new = sorted(p for p in set(bag_root.iterdir()) - before if p.is_dir())
    if len(new) != 1:
        raise RuntimeError(f"expected one new bag for {name} under {bag_root}, found {[p.name for p in new]}")
    return RecordedMotion(new[0], started, stopped, state_rate_hz, tuple(faults))

