"""Motions played through the deploy chain and recorded, one episode each: what ``so101 demo`` and
``so101 run-motion`` share.

A session starts the virtual SO-101 in its own process (or uses the real arm's port), runs the deploy
graph — motion player (the policy's place, its future as the action chunk) → GapONet compensator
(optional) → safety filter → driver → recorder; the driver in a process of its own, as a launch runs it,
the other nodes in this one — and plays motions one after the other, each recorded as its own rosbag2
(MCAP) episode named after the motion. A driver that exits (its port gone, a bad parameter) ends the
session with its own error line, after the episode under way is closed and kept.

Faults are not gaps: when a servo reports a fault on ``/diagnostics`` (``so101_common.servo_faults``)
the motion stops at once — the player holds the arm where it measured it, so no joint is pushed further
— the episode is closed and kept (its metadata carries the fault span), the joint and the fault are
printed, and :class:`ServoFaultStop` is raised with the bags recorded so far.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from sensor_msgs.msg import JointState

from so101_bringup.arm_watch import ArmWatch
from so101_bringup.composition import ComposedGraph
from so101_bringup.motion_player_node import MotionPlayerNode
from so101_bringup.motion_runs import (
    BusFigures,
    MotionSpec,
    RecordedMotion,
    ServoFaultStop,
    new_bag,
    rate_line,
    start_virtual_arm,
    stop_virtual_arm,
    table_header,
    table_row,
)
from so101_bringup.motions import load_motion
from so101_bringup.node_specs import GraphOptions, deploy_graph
from so101_common.servo_faults import format_fault, read_servo_fault
from so101_driver.health import CYCLE_CAPACITY_KEY
from so101_testing import wait_for

__all__ = ["DeployMonitor", "run_session", "DRIVER"]

DRIVER = "DriverNode"  # the deploy graph's driver, by its key in the composition


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
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            if CYCLE_CAPACITY_KEY in values:  # the driver's bus entry
                self.watch.on_bus(values)
        self.watch.on_faults([f for status in msg.status
                              if (f := read_servo_fault({kv.key: kv.value for kv in status.values}, status.message))],
                             self.now())


def run_session(label: str, opts: GraphOptions, motions: Sequence[MotionSpec], print_period: float,
                virtual: bool = True,
                after_each: Callable[[str, RecordedMotion], bool] | None = None) -> dict[str, RecordedMotion]:
    """Play ``motions`` one after the other on one arm and graph, each recorded as its own episode
    (task = the motion's name); returns what was recorded of each motion. ``virtual``: start the virtual SO-101
    with ``opts.gap_profile`` (else ``opts.port`` and ``opts.calibration_file`` name the real arm).
    ``after_each(name, recorded)`` runs after each motion while the arm holds still; False ends the session
    there (the motions after it are not played)."""
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
        # the driver in its own process, as a launch runs it: its bus cycle does not wait on the other nodes' callbacks
        with ComposedGraph(deploy_graph(replace(opts, motion=motions[0].source)), own_process={DRIVER}) as graph:
            player = graph.nodes["MotionPlayerNode"]
            assert isinstance(player, MotionPlayerNode)
            monitor = DeployMonitor(player)
            recorder = graph.nodes["RecorderNode"]
            driver_rate_hz = float(graph.parameter(DRIVER, "rate_hz"))
            for spec in motions:
                motion = load_motion(spec.source, duration=spec.seconds)
                player.set_motion(motion)
                recorded[spec.name] = _record_motion(spec.name, motion.duration, player, monitor, recorder, graph,
                                                     Path(opts.bag_root), print_period, driver_rate_hz)
                if recorded[spec.name].faults:
                    raise ServoFaultStop(spec.name, recorded[spec.name].faults, recorded)
                if after_each is not None and not after_each(spec.name, recorded[spec.name]):
                    break
    finally:
        if arm is not None:
            stop_virtual_arm(arm)
    return recorded


def _record_motion(name: str, duration: float, player: MotionPlayerNode, monitor: DeployMonitor, recorder: Any,
                   graph: ComposedGraph, bag_root: Path, print_period: float, driver_rate_hz: float) -> RecordedMotion:
    # The arm first moves to the motion's start pose (the player holds it) and comes to rest there, and the
    # recorder discovers every topic; the episode then starts at rest, as a policy rollout would.
    topics = {"/joint_states", "/joint_command", "/policy/joint_command"}
    watch = monitor.watch

    def ready() -> bool:
        graph.raise_for_children()  # a driver that could not start says why, at once
        return (watch.settled(monitor.now()) and topics <= set(recorder.subscribed)) or watch.faults.active

    if not wait_for(ready, timeout=60.0):
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
    print(table_header())
    start = time.monotonic()
    end, next_line = start + duration + 1.0, start + print_period
    while not wait_for(lambda: watch.faults.active or graph.child_exited(),
                       timeout=max(min(next_line, end) - time.monotonic(), 0.0)):
        if time.monotonic() >= end:
            break
        next_line += print_period
        print(table_row(time.monotonic() - start, watch.measured, watch.commanded), flush=True)
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
    graph.raise_for_children()  # the episode is kept; the driver's own error ends the session
    print(rate_line(message, state_rate_hz, driver_rate_hz, BusFigures.of(watch.bus_entries), os.getloadavg()[0],
                    os.cpu_count()))
    return RecordedMotion(new_bag(bag_root, before, name), started, stopped, state_rate_hz, tuple(faults))

