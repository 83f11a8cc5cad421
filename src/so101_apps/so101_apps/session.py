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
printed, and :class:`ServoFaultStop` is raised with the bags recorded so far. One exception, a dropout
(:func:`answering_again`): when every fault is a servo the driver lost and each answers again within
:data:`DROPOUT_RECOVERY_S` after the motion stopped, the motion is recorded once more, from its start (the
faulted episode is kept, with its fault). Measured: a ``make demo`` on a loaded machine (load average 5.6 on 2
cores) lost every servo of the virtual arm for 0.4 s when its process did not get the CPU, and the whole demo
ended at its third episode.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from so101_apps.deploy_monitor import DeployMonitor
from so101_apps.motion_runs import (
    BusFigures,
    MotionSpec,
    RecordedMotion,
    ServoFaultStop,
    rate_line,
    start_virtual_arm,
    stop_virtual_arm,
    table_header,
    table_row,
    virtual_arm_lag,
)
from so101_bringup.composition import ComposedGraph
from so101_bringup.node_specs import GraphOptions, deploy_graph
from so101_common import topics
from so101_common.paired_dataset import FaultSpan
from so101_common.servo_faults import ServoFaultKind, format_fault
from so101_common.waiting import wait_for
from so101_gaponet.compensator_node import NODE_NAME as COMPENSATOR
from so101_gaponet.compensator_node import CompensatorNode
from so101_gaponet.model_file import load_model
from so101_policy.motion_player_node import MotionPlayerNode
from so101_policy.motions import load_motion, sample
from so101_recorder.recorder_node import RecorderNode

__all__ = ["DROPOUT_RECOVERY_S", "answering_again", "run_session", "DRIVER"]

DRIVER = "so101_driver"  # the deploy graph's driver, by its node name
TWIN = "twin"  # the live gap twin (deploy graph, twin:=true)
WEB_VIEW = "web_view"  # the live web view (deploy graph, web:=true)
MOTION_PLAYER = "motion_player"
RECORDER = "recorder"
# s a lost servo has, after its motion stopped, to answer again for the stop to count as a dropout: the driver probes
# it 0.25 s after it left the cycle, the interval doubling to 2 s, and reports on /diagnostics once a second
DROPOUT_RECOVERY_S = 5.0


def answering_again(spans: Sequence[FaultSpan], faults_open: Callable[[], bool], timeout: float = DROPOUT_RECOVERY_S) -> bool:
    """Whether a motion's faults were a dropout: every span a servo the driver lost (no protection of a servo's
    own), and ``faults_open`` (whether any fault is still reported) false within ``timeout`` s."""
    lost = ServoFaultKind.LOST.value
    return bool(spans) and all(span.fault == lost for span in spans) and wait_for(lambda: not faults_open(), timeout=timeout)


def run_session(label: str, opts: GraphOptions, motions: Sequence[MotionSpec], print_period: float,
                virtual: bool = True,
                after_each: Callable[[str, RecordedMotion], bool] | None = None) -> dict[str, RecordedMotion]:
    """Play ``motions`` one after the other on one arm and graph, each recorded as its own episode
    (task = the motion's name); returns what was recorded of each motion. ``virtual``: start the virtual SO-101
    with ``opts.gap_profile`` (else ``opts.port`` and ``opts.calibration_file`` name the real arm).
    ``after_each(name, recorded)`` runs after each motion while the arm holds still; False ends the session
    there (the motions after it are not played)."""
    if opts.bag_root is None:
        raise ValueError("a session records every motion: its GraphOptions need a bag_root")
    # every motion read (and refused: empty, not finite, not radians, ...) before the arm or a node starts, and
    # the compensator's model file
    loaded = {spec.name: load_motion(spec.source, duration=spec.seconds) for spec in motions}
    if opts.compensation and opts.gaponet_model:
        load_model(opts.gaponet_model)
    bag_root = Path(opts.bag_root)
    profile = opts.gap_profile or "default"
    arm_text = f"virtual SO-101 (profile {profile})" if virtual else f"SO-101 on {opts.port}"
    print(f"\n== {label}: {arm_text}, compensation {'on' if opts.compensation else 'off'}: "
          f"{', '.join(m.name for m in motions)}")
    arm = None
    arm_folder = bag_root.parent / "virtual_arm" if virtual else None
    if arm_folder is not None:
        arm, link, calibration = start_virtual_arm(profile, arm_folder)
        # configured as LeRobot configures a follower: the arm its gap profile was fitted as
        opts = replace(opts, port=str(link), calibration_file=str(calibration), configure_servos=True)
    recorded: dict[str, RecordedMotion] = {}
    try:
        # the motion player in the policy's seat, recording every episode; the driver in its own process, as a
        # launch runs it: its bus cycle does not wait on the other nodes' callbacks; the twin and the web view
        # (monitors) too, at a lower priority: they never hold the chain's callbacks nor take the CPU from the driver
        # and the arm. The monitors subscribe before the driver starts: the web view joining a running driver held
        # its joint states for 0.33 s in about one start in four (ComposedGraph's subscribed_first)
        opts = replace(opts, command_source="motion", motion=motions[0].source, record=True, hold_start_pose=True)
        monitors = {name for name, wanted in ((TWIN, opts.twin), (WEB_VIEW, opts.web)) if wanted}
        with ComposedGraph(deploy_graph(opts), own_process={DRIVER, *monitors}, low_priority=monitors,
                           subscribed_first=monitors) as graph:
            player = graph.node(MOTION_PLAYER, MotionPlayerNode)
            monitor = DeployMonitor(player, twin=bool(opts.twin))
            recorder = graph.node(RECORDER, RecorderNode)
            wanted: tuple[str, ...] = (topics.JOINT_STATES, topics.JOINT_COMMAND, topics.POLICY_COMMAND)
            if opts.twin:  # each episode holds the twin from its first sample: the bag is paired throughout
                wanted += (topics.TWIN_STATES, topics.TWIN_GAP, topics.TWIN_GAP_RMSE)
            for spec in motions:
                motion = loaded[spec.name]
                for attempt in range(2):  # once more after a dropout
                    monitor.watch.expect_command(motion.names, sample(motion, 0.0))
                    player.set_motion(motion)
                    run = recorded[spec.name] = _record_motion(spec.name, motion.duration, player, monitor, recorder,
                                                                graph, wanted, print_period, arm_folder)
                    if not run.faults:
                        break
                    if attempt or not answering_again(run.faults, lambda: monitor.watch.faults.active):
                        raise ServoFaultStop(spec.name, run.faults, recorded)
                    print(f"   the servos lost answer again: a dropout of the bus, not a servo's protection. {spec.name} is "
                          f"recorded once more from its start; the stopped episode is kept with its fault ({run.bag})",
                          flush=True)
                if after_each is not None and not after_each(spec.name, recorded[spec.name]):
                    break
    finally:
        if arm is not None:
            stop_virtual_arm(arm)
    return recorded


def _record_motion(name: str, duration: float, player: MotionPlayerNode, monitor: DeployMonitor,
                   recorder: RecorderNode, graph: ComposedGraph, wanted: Sequence[str],
                   print_period: float, arm_folder: Path | None) -> RecordedMotion:
    # The arm first moves to the motion's start pose (the player holds it) and comes to rest there, the
    # recorder discovers every wanted topic and the driver has reported its rate; the episode then starts at
    # rest, as a policy rollout would.
    recorded_topics = {recorder.resolve_topic_name(t) for t in wanted}
    twin = recorder.resolve_topic_name(topics.TWIN_STATES) in recorded_topics
    watch = monitor.watch

    def waits() -> list[str]:
        return watch.recording_waits(monitor.now(), recorded_topics - set(recorder.topics.subscribed), twin)

    def ready() -> bool:
        graph.raise_for_stopped_nodes()  # a driver that could not start says why, at once
        return watch.faults.active or not waits()

    if not wait_for(ready, timeout=60.0):
        raise RuntimeError(f"not ready to record {name} after 60 s: waiting for {'; '.join(waits())} "
                           f"(arm at {np.round(watch.measured, 3).tolist()} rad for {np.round(watch.commanded, 3).tolist()})")
    recorder.start_episode(task=name)
    watch.mark(monitor.now())
    if COMPENSATOR in graph.nodes:  # the episode starts with one integral correction for both directions
        graph.node(COMPENSATOR, CompensatorNode).core.new_episode()
    player.restart()
    started = monitor.now()  # the player's clock: the node's
    lag_before = virtual_arm_lag(arm_folder) if arm_folder is not None else None
    temperature_start = tuple(watch.temperatures.tolist())
    print(f"\n   {name} ({duration:.1f} s)")
    print(table_header())
    start = time.monotonic()
    end, next_line = start + duration + 1.0, start + print_period
    while not wait_for(lambda: watch.faults.active or graph.node_stopped(),
                       timeout=max(min(next_line, end) - time.monotonic(), 0.0)):
        if time.monotonic() >= end:
            break
        next_line += print_period
        print(table_row(time.monotonic() - start, watch.measured, watch.commanded), flush=True)
    stopped = monitor.now()
    state_rate_hz = watch.states / max(stopped - started, 1e-9)
    state_gap = watch.longest_gap(stopped)
    faults = watch.faults.spans()
    if faults:
        player.hold(watch.measured)
        for span in faults:
            print(f"   FAULT {format_fault(span)}: stopping the motion, holding the arm where it is", flush=True)
        # the recorder sees the same report on /diagnostics: keep the episode open until its metadata has it
        wait_for(lambda: bool(recorder.recorder.current_faults()), timeout=2.0)
    bag = recorder.stop_episode()
    graph.raise_for_stopped_nodes()  # the episode is kept; the driver's own error ends the session
    driver_rate_hz = watch.driver_rate_hz or float("nan")
    lag_after = virtual_arm_lag(arm_folder) if arm_folder is not None else None
    physics_lag = lag_after.since(lag_before) if lag_after is not None and lag_before is not None else None
    print(rate_line(str(bag), state_rate_hz, driver_rate_hz, BusFigures.of(watch.bus_entries, watch.bus_before),
                    os.getloadavg()[0], os.cpu_count(), state_gap, arm_folder is not None, physics_lag))
    return RecordedMotion(bag, started, stopped, state_rate_hz, state_gap, driver_rate_hz, tuple(faults),
                          temperature_start, tuple(watch.temperatures.tolist()), physics_lag)
