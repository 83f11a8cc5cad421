"""The twin node (child process) under a namespace, fed a virtual arm with a payload in simulated time by a real
rclpy peer: its sim states are the offline replay's, its gaps are sim − measured, ``/diagnostics`` warns naming
the joints that left the band recorded on the default arm, and the recorder (its default topics, same
namespace) records the twin beside the arm, so the bag is already paired."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pytest
import rclpy
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from twin_helpers import arm_run, feed, gap_series

from so101_common.joints import JOINT_NAMES
from so101_common.trajectory import JointTrajectory
from so101_recorder.bag_reader import read_joint_states
from so101_sim2real.replay.mujoco_backend import MujocoSim, replay_trajectory
from so101_sim2real.twin import GapTwin, TwinConfig
from so101_sim2real.twin_band import fit_band, load_band, series_from_bag, write_band
from so101_testing import NodeProcess, run_cli, wait_for

NS = "/arm1"
PAYLOAD_JOINTS = {"shoulder_lift", "elbow_flex", "wrist_flex"}  # heavy_payload: the joints that carry its weight


@pytest.fixture()
def peer():
    rclpy.init()
    node = rclpy.create_node("twin_test_peer")
    yield node
    node.destroy_node()
    rclpy.try_shutdown()


def _spin_until(node, predicate, timeout: float = 20.0) -> bool:
    def spun() -> bool:
        rclpy.spin_once(node, timeout_sec=0.01)
        return predicate()
    return wait_for(spun, timeout=timeout, interval=0.0)


def _stamp(seconds: float) -> Time:
    return Time(sec=int(seconds), nanosec=round((seconds - int(seconds)) * 1e9))


def _seconds(msg: JointState) -> float:
    return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9


def _caught_up(received: dict[str, list[JointState]], count: int) -> bool:
    return all(len(messages) >= count for messages in received.values())


def _named(warnings: list[DiagnosticStatus]) -> set[str]:
    """The joints the twin's warnings named as out of their band."""
    return {joint for w in warnings for joint in {kv.key: kv.value for kv in w.values}["out_of_band"].split(",")}


def test_twin_node_pairs_warns_and_is_recorded(peer, tmp_path: Path) -> None:
    default = gap_series("default:0", feed(GapTwin(MujocoSim()), arm_run("default", seed=0, seconds=20.0)))
    band = write_band(tmp_path / "band.yaml", fit_band([default], window_s=TwinConfig().window_s))
    run = arm_run("heavy_payload", seed=7, seconds=12.0)  # the core test's held-out motion
    # stamps as they travel (whole nanoseconds), so the test's truth uses the same instants as the node
    run.command_time[:] = np.round(run.command_time * 1e9) / 1e9
    run.state_time[:] = np.round(run.state_time * 1e9) / 1e9
    mirror = GapTwin(MujocoSim())  # the core, fed alike: how many samples the node has paired after each message

    received: dict[str, list[JointState]] = {"joint_states": [], "gap": [], "gap_rmse": []}
    for name, messages in received.items():
        peer.create_subscription(JointState, f"{NS}/twin/{name}", messages.append, QoSProfile(depth=1000))
    warnings: list[DiagnosticStatus] = []
    recorder_status: dict[str, str] = {}

    def on_diagnostics(msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name == "twin: gap twin" and status.level == DiagnosticStatus.WARN:
                warnings.append(status)
            elif status.name == "recorder: recorder":
                recorder_status.update({kv.key: kv.value for kv in status.values})

    peer.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 50)
    commands = peer.create_publisher(JointState, f"{NS}/policy/joint_command", QoSProfile(depth=100))
    states = peer.create_publisher(JointState, f"{NS}/joint_states", QoSProfile(depth=100))
    stop = peer.create_client(Trigger, f"{NS}/recorder/stop")
    twin_args = ["--ros-args", "-r", f"__ns:={NS}", "-p", f"band_file:={band}", "-p", "use_sim_time:=true",
                 "-p", "diagnostics_period:=0.2"]
    recorder_args = ["--ros-args", "-r", f"__ns:={NS}", "-p", f"bag_root:={tmp_path / 'bags'}", "-p", "autostart:=true",
                     "-p", "discovery_period_s:=0.2", "-p", "diagnostics_period_s:=0.2", "-p", "task:=twin"]
    with NodeProcess("so101_sim2real.twin_node", twin_args) as twin, \
            NodeProcess("so101_recorder.recorder_node", recorder_args) as recorder:
        wanted = {f"{NS}/joint_states", f"{NS}/twin/joint_states", f"{NS}/twin/gap", f"{NS}/twin/gap_rmse"}
        assert _spin_until(peer, lambda: commands.get_subscription_count() > 0 and states.get_subscription_count() > 1
                           and wanted <= set(recorder_status.get("subscribed", "").split(","))), \
            twin.output() + recorder.output()
        events = run.events()
        mirrored = []
        for first in range(0, len(events), 30):  # in batches, each taken in before the next (no queue overflows)
            for when, kind, index in events[first:first + 30]:
                msg = JointState(name=list(JOINT_NAMES))
                msg.header.stamp = _stamp(when)
                if kind == "state":
                    msg.position, msg.velocity = run.position[index].tolist(), run.velocity[index].tolist()
                    states.publish(msg)
                    mirrored += mirror.on_measured(when, run.position[index], run.velocity[index])
                else:
                    msg.position = run.command[index].tolist()
                    commands.publish(msg)
                    mirrored += mirror.on_command(when, run.command[index])
            assert _spin_until(peer, partial(_caught_up, received, len(mirrored))), twin.output()
        assert _spin_until(peer, lambda: _named(warnings) >= PAYLOAD_JOINTS), f"{_named(warnings)}\n{twin.output()}"
        assert stop.wait_for_service(timeout_sec=10.0)
        future = stop.call_async(Trigger.Request())
        rclpy.spin_until_future_complete(peer, future, timeout_sec=10.0)
        assert future.result() is not None and future.result().success, recorder.output()

    # the sim states are the offline replay's, at the measured stamps, under the namespace
    sim = received["joint_states"]
    stamps = np.array([_seconds(m) for m in sim])
    assert np.array_equal(stamps, [s.stamp for s in mirrored]) and len(stamps) > 700
    start_pose = [np.interp(run.command_time[0], run.state_time, run.position[:, j]) for j in range(len(JOINT_NAMES))]
    offline = replay_trajectory(JointTrajectory(run.command_time, run.command, names=JOINT_NAMES), np.array(start_pose))
    for field, truth in (("position", offline.position), ("velocity", offline.velocity), ("effort", offline.effort)):
        expected = np.column_stack([np.interp(stamps, offline.time, truth[:, j]) for j in range(len(JOINT_NAMES))])
        assert np.abs(np.array([getattr(m, field) for m in sim]) - expected).max() < 1e-6, field
    # the gap is sim − measured; the rolling RMSE the core's
    rows = np.searchsorted(run.state_time, stamps)
    gap = np.array([m.position for m in received["gap"]])
    assert np.allclose(gap, np.array([m.position for m in sim]) - run.position[rows], atol=1e-12)
    assert np.allclose([m.position for m in received["gap_rmse"]], [s.position_rmse for s in mirrored], atol=1e-12)
    assert np.allclose([m.velocity for m in received["gap_rmse"]], [s.velocity_rmse for s in mirrored], atol=1e-12)
    # /diagnostics named the joints the payload loads, and only them
    assert _named(warnings) == PAYLOAD_JOINTS
    assert {part.split(":")[0] for w in warnings for part in w.message.split("; ")} == PAYLOAD_JOINTS
    # the recorder's default topics hold the twin beside the arm: the bag is paired, stamp for stamp
    (bag,) = (tmp_path / "bags").iterdir()
    measured = read_joint_states(bag, f"{NS}/joint_states")
    recorded = read_joint_states(bag, f"{NS}/twin/joint_states")
    assert len(recorded) == len(stamps) and set(np.round(recorded.time, 6)) <= set(np.round(measured.time, 6))
    # ... and a band is recorded from it in one command
    assert run_cli("so101_sim2real.cli.twin_band", ["--bag", str(bag), "--gap-topic", f"{NS}/twin/gap",
                                                    "--out", str(tmp_path / "from_bag.yaml")]) == 0
    assert load_band(tmp_path / "from_bag.yaml").samples == len(series_from_bag(bag, f"{NS}/twin/gap").time) - 200
