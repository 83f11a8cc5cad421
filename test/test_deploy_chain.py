"""Whole-graph test of the deployment chain over real DDS, every node in its own process.

The virtual SO-101 (``so101 virtual-bus``, ideal profile) serves the Feetech protocol on a pty; the
driver, the GapONet compensator (shipped model) and the safety filter run as separate processes with
the shipped YAML files, wired as ``launch/deploy.launch.py`` wires them. This test process plays the
policy: it streams ``/policy/joint_command`` and watches ``/joint_command``, ``/joint_states`` and
the safety filter's ``/diagnostics``. One virtual arm and one graph serve the whole module.
"""

from __future__ import annotations

import math
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from so101_common.joints import JOINT_NAMES, JOINTS, reorder
from so101_gaponet.model_file import load_model
from so101_safety.config import load_config
from so101_testing import NodeProcess, wait_for

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "config"
MODEL = ROOT / "models" / "gaponet_so101_default.onnx"
PROFILE = "ideal"  # no bus latency: the driver's start-up handshake never races the 20 ms reply deadline
POLICY_RATE_HZ = 50.0  # the shipped model's rate (config/compensator.yaml)
# A reachable pose well inside every limit, away from the rest pose the virtual arm starts in.
SAFE_POSE = [0.3, -0.6, 0.7, 0.5, 0.4, 0.6]
OTHER_POSE = [-0.3, -0.3, 0.4, 0.2, -0.4, 0.3]
# Convergence tolerance, rad: the compensator's Δ is bounded (model metadata) and the servos are stiff.
TRACKING_TOLERANCE = 0.12
STARTUP_TIMEOUT = 90.0  # s: five interpreters importing rclpy/torch/mujoco on a loaded 2-core machine
MOTION_TIMEOUT = 30.0  # s: a move of ~1 rad at ≤ 3 rad/s takes about a second when nothing is loaded
FALL = 0.5  # rad: with torque off the arm falls at least this far from SAFE_POSE (shoulder_lift: ~1 rad)
REST_SAMPLES, REST_SPEED = 30, 0.2  # the arm is at rest: 0.3 s of joint states below this speed (rad/s)
RESPONSE_SAMPLES = 200  # joint states watched after torque comes back on: 2 s at the driver's 100 Hz
# Present_Velocity counts in steps of 50 step/s over 20 ms (0.077 rad/s): a measured speed may read one step above
# the bound. (Torque coming back on moves the fallen arm by at most the filter's limp_tolerance: 1.2-1.9 rad/s
# peak measured on the virtual arm; main sent it back at 4.3-4.7 rad/s.)
SPEED_LSB = 50 * 2 * math.pi / 4096


class PolicyProbe:
    """The policy's seat in the graph (under ``namespace``): streams a target, records what the graph publishes."""

    def __init__(self, namespace: str = "") -> None:
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("policy_probe", namespace=namespace, context=self.context)
        self.lock = threading.Lock()
        self.target: list[float] | None = None  # None = a stalled policy: nothing published
        self.measured: list[float] | None = None
        self.speeds: list[list[float]] = []  # |velocity| of every /joint_states (the servos' own Present_Velocity)
        self.commands: list[list[float]] = []  # every /joint_command (safety output), JOINT_NAMES order
        self.safety_status: dict[str, str] = {}  # latest safety /diagnostics values + "message", "level"
        self._pub = self.node.create_publisher(JointState, "policy/joint_command", 10)
        self.node.create_timer(1.0 / POLICY_RATE_HZ, self._publish)
        self.node.create_subscription(JointState, "joint_states", self._on_state, 10)
        self.node.create_subscription(JointState, "joint_command", self._on_command, 10)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 50)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self.executor.spin, daemon=True)
        self._thread.start()

    def _publish(self) -> None:
        with self.lock:
            target = self.target
        if target is None:
            return
        msg = JointState()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.name = list(JOINT_NAMES)
        msg.position = [float(v) for v in target]
        self._pub.publish(msg)

    def _on_state(self, msg: JointState) -> None:
        with self.lock:
            self.measured = reorder(msg.name, msg.position)
            self.speeds.append([abs(v) for v in reorder(msg.name, msg.velocity)])

    def _on_command(self, msg: JointState) -> None:
        with self.lock:
            self.commands.append(reorder(msg.name, msg.position))

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name.startswith("safety_filter"):
                values = {kv.key: kv.value for kv in status.values}
                values.update(message=status.message, level=str(status.level[0]))
                with self.lock:
                    self.safety_status = values

    def stream(self, target: list[float] | None) -> None:
        with self.lock:
            self.target = target

    def command_count(self) -> int:
        with self.lock:
            return len(self.commands)

    def commands_since(self, index: int) -> list[list[float]]:
        with self.lock:
            return list(self.commands[index:])

    def state_count(self) -> int:
        with self.lock:
            return len(self.speeds)

    def speeds_since(self, index: int) -> list[list[float]]:
        with self.lock:
            return list(self.speeds[index:])

    def status(self, key: str, default: str = "") -> str:
        with self.lock:
            return self.safety_status.get(key, default)

    def near(self, pose: list[float], tolerance: float = TRACKING_TOLERANCE) -> bool:
        with self.lock:
            measured = self.measured
        return measured is not None and max(abs(m - p) for m, p in zip(measured, pose, strict=True)) < tolerance

    def call(self, service: str, timeout: float = 20.0) -> Trigger.Response:
        client = self.node.create_client(Trigger, service)
        try:
            assert client.wait_for_service(timeout_sec=timeout), f"{service} never appeared"
            future = client.call_async(Trigger.Request())
            assert wait_for(future.done, timeout=timeout), f"{service} did not answer"
            return future.result()
        finally:
            self.node.destroy_client(client)

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)
        self._thread.join(timeout=5.0)


def _logs(processes: list[NodeProcess]) -> str:
    return "\n".join(f"--- {p.module}\n{p.output()[-2000:]}" for p in processes)


def start_virtual_arm(folder: Path) -> tuple[NodeProcess, Path, Path]:
    """``so101 virtual-bus`` (ideal profile) in a child process; returns (process, link, calibration)."""
    cli = [sys.executable, "-m", "so101_apps.cli", "virtual-bus"]
    subprocess.run([*cli, "--write-calibration", str(folder)], check=True, capture_output=True, timeout=120)
    link = folder / "so101_follower"
    arm = NodeProcess("so101_apps.cli", ["virtual-bus", "--link", str(link), "--profile", PROFILE]).start()
    up = wait_for(lambda: link.exists() or not arm.alive(), timeout=STARTUP_TIMEOUT) and arm.alive()
    if not up:
        arm.stop()
        pytest.fail(f"the virtual SO-101 did not start:\n{arm.output()}")
    return arm, link, folder / "virtual_follower.json"


def ros_args(params_file: str, *extra: str) -> list[str]:
    return ["--ros-args", "--params-file", str(CONFIG / params_file), *extra]


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PolicyProbe]:
    arm, link, calibration = start_virtual_arm(tmp_path_factory.mktemp("deploy"))
    nodes = [arm]
    probe = None
    try:
        nodes += [
            NodeProcess("so101_driver.driver_node", ros_args(
                "driver.yaml", "-p", f"port:={link}", "-p", f"calibration_file:={calibration}"), cwd=ROOT).start(),
            NodeProcess("so101_gaponet.compensator_node", ros_args(
                "compensator.yaml", "-p", f"model_path:={MODEL}"), cwd=ROOT).start(),
            NodeProcess("so101_safety.safety_node", ros_args(
                "safety.yaml", "-r", "input:=/gaponet/joint_command", "-r", "output:=/joint_command"), cwd=ROOT).start(),
        ]
        probe = PolicyProbe()
        wait_for(lambda: (probe.measured is not None and bool(probe.safety_status))
                 or not all(p.alive() for p in nodes), timeout=STARTUP_TIMEOUT, interval=0.1)
        ready = probe.measured is not None and bool(probe.safety_status) and all(p.alive() for p in nodes)
        assert ready, f"the deploy graph did not come up:\n{_logs(nodes)}"
        yield probe
        assert all(p.alive() for p in nodes), f"a node died during the tests:\n{_logs(nodes)}"
    finally:
        if probe is not None:
            probe.close()
        for process in reversed(nodes):
            process.stop()


def follow(probe: PolicyProbe, pose: list[float]) -> None:
    probe.stream(pose)
    assert wait_for(lambda: probe.near(pose), timeout=MOTION_TIMEOUT), (
        f"the arm did not reach {pose}: measured {probe.measured}, safety {probe.safety_status}")


def settle(probe: PolicyProbe, window: int = 25, spread: float = 5e-3, timeout: float = MOTION_TIMEOUT) -> None:
    """Wait until the last ``window`` outputs of the safety filter hardly move (the arm is at rest)."""
    def steady() -> bool:
        recent = probe.commands_since(max(0, probe.command_count() - window))
        return len(recent) == window and all(
            max(c[i] for c in recent) - min(c[i] for c in recent) < spread for i in range(len(JOINT_NAMES)))

    assert wait_for(steady, timeout=timeout), f"the output never settled: safety {probe.safety_status}"


def within_limits(positions: list[float], slack: float = 0.0) -> bool:
    return all(j.lower - slack <= q <= j.upper + slack for j, q in zip(JOINTS, positions, strict=True))


def test_arm_follows_policy_through_compensator_and_safety(chain: PolicyProbe) -> None:
    follow(chain, SAFE_POSE)
    follow(chain, OTHER_POSE)
    settle(chain)  # the safety output may still be ramping (velocity bound) when the arm is first near
    last = chain.commands_since(chain.command_count() - 1)[0]
    deltas = [abs(c - p) for c, p in zip(last, OTHER_POSE, strict=True)]
    bounds = load_model(str(MODEL)).metadata.delta_bounds
    assert all(d <= b + 1e-6 for d, b in zip(deltas, bounds, strict=True)), (deltas, bounds)
    assert max(deltas) > 1e-4, "the command reached safety uncompensated: the compensator is not in the chain"


def test_out_of_limit_command_is_clipped(chain: PolicyProbe) -> None:
    follow(chain, SAFE_POSE)
    first = chain.command_count()
    beyond = list(SAFE_POSE)
    beyond[0] = JOINTS[0].upper + 1.0  # shoulder_pan far past its upper limit
    beyond[2] = JOINTS[2].lower - 1.0  # elbow_flex far past its lower limit
    chain.stream(beyond)
    clipped = [JOINTS[0].upper - 0.1, SAFE_POSE[1], JOINTS[2].lower + 0.1, *SAFE_POSE[3:]]
    assert wait_for(lambda: chain.near(clipped, tolerance=0.15), timeout=MOTION_TIMEOUT), (
        f"the arm did not settle at the clipped pose: measured {chain.measured}, safety {chain.safety_status}")
    commands = chain.commands_since(first)
    assert commands and all(within_limits(c) for c in commands), "a /joint_command left the joint limits"
    assert max(c[0] for c in commands) > JOINTS[0].upper - 0.15  # clipped to the limit, not rejected
    assert wait_for(lambda: bool(chain.status("clipped_joints")), timeout=10.0), chain.safety_status
    assert "shoulder_pan" in chain.status("clipped_joints")
    with chain.lock:
        assert chain.measured is not None and within_limits(chain.measured, slack=0.02)


def test_compensated_chain_settles_on_a_constant_target(chain: PolicyProbe) -> None:
    """A constant policy command must give a constant /joint_command once the arm is there."""
    follow(chain, SAFE_POSE)
    settle(chain, timeout=10.0)  # passthrough (compensator ~/enable false) settles within a second


def test_nan_command_is_rejected_and_arm_stays(chain: PolicyProbe) -> None:
    follow(chain, SAFE_POSE)
    first = chain.command_count()
    poisoned = list(OTHER_POSE)
    poisoned[1] = math.nan
    chain.stream(poisoned)
    # Either the compensator drops it (the safety watchdog then holds) or the safety filter rejects it.
    assert wait_for(lambda: int(chain.status("rejected_non_finite", "0")) > 0 or chain.status("state") == "holding",
                    timeout=20.0), chain.safety_status
    assert wait_for(lambda: chain.command_count() > first + 50, timeout=20.0)
    commands = chain.commands_since(first)
    assert all(math.isfinite(q) for c in commands for q in c), "a NaN reached /joint_command"
    # shoulder_pan and wrist_roll have opposite signs in the two poses: no output crosses over to the poisoned one.
    strays = [c for c in commands if c[0] <= 0.0 or c[4] <= 0.0]
    assert not strays, f"the arm was sent towards the poisoned command: {strays[0]}"
    follow(chain, OTHER_POSE)  # a valid command afterwards is followed again: nothing stayed poisoned


def test_stalled_policy_triggers_watchdog_hold(chain: PolicyProbe) -> None:
    follow(chain, SAFE_POSE)
    # /diagnostics comes once a second: a hold reported before the policy streamed (start-up, or the test
    # before) is not this stall's. Only a hold reported after an active filter is.
    assert wait_for(lambda: chain.status("state") == "active", timeout=20.0), chain.safety_status
    chain.stream(None)
    assert wait_for(lambda: chain.status("state") == "holding" and "watchdog" in chain.status("message"),
                    timeout=20.0), chain.safety_status
    assert chain.status("level") == "1"  # WARN
    settle(chain, spread=1e-3)  # the output brakes onto the latched position and stays there
    held = chain.commands_since(chain.command_count() - 1)
    with chain.lock:
        measured = list(chain.measured or [])
    assert chain.status("state") == "holding"
    assert max(abs(h - m) for h, m in zip(held[-1], measured, strict=True)) < 0.05, (held[-1], measured)
    follow(chain, OTHER_POSE)  # the policy comes back: the hold releases


def test_estop_latches_until_reset(chain: PolicyProbe) -> None:
    follow(chain, SAFE_POSE)
    settle(chain)  # at rest: the e-stop has nothing to brake, the output stays where it is
    try:
        assert chain.call("/safety_filter/estop").success
        assert wait_for(lambda: chain.status("state") == "estopped", timeout=20.0), chain.safety_status
        assert chain.status("level") == "2"  # ERROR
        rejected_before = int(chain.status("rejected_estopped", "0"))
        first = chain.command_count()
        chain.stream(OTHER_POSE)
        assert wait_for(lambda: int(chain.status("rejected_estopped", "0")) > rejected_before
                        and chain.command_count() > first + 50, timeout=20.0), chain.safety_status
        held = chain.commands_since(first)
        assert all(c == held[0] for c in held), "the output moved while e-stopped"
        assert wait_for(lambda: chain.near(held[0]), timeout=MOTION_TIMEOUT), (chain.measured, held[0])
        assert not chain.near(OTHER_POSE, tolerance=0.3)
    finally:
        response = chain.call("/safety_filter/reset")
    assert response.success and "released" in response.message, response.message
    follow(chain, OTHER_POSE)
    # /diagnostics comes about once a second: the next report after the reset must say so
    assert wait_for(lambda: chain.status("state") != "estopped", timeout=10.0), chain.safety_status


def test_torque_off_and_on_in_a_watchdog_hold_does_not_snap_the_arm_back(chain: PolicyProbe) -> None:
    """Issue 19: the policy stops (the watchdog holds), torque goes off and the arm falls, torque comes back
    on: no joint may then move faster than its safety bound, measured on the arm (joint_states)."""
    follow(chain, SAFE_POSE)
    assert wait_for(lambda: chain.status("state") == "active", timeout=20.0), chain.safety_status
    chain.stream(None)
    assert wait_for(lambda: chain.status("state") == "holding", timeout=20.0), chain.safety_status
    try:
        assert chain.call("/so101_driver/disable_torque").success
        assert wait_for(lambda: fallen_and_at_rest(chain), timeout=MOTION_TIMEOUT), chain.measured
        first = chain.state_count()
        assert chain.call("/so101_driver/enable_torque").success
        assert wait_for(lambda: chain.state_count() > first + RESPONSE_SAMPLES, timeout=MOTION_TIMEOUT)
        assert_within_speed_bounds(chain.speeds_since(first), "after torque came back on")
    finally:
        chain.call("/so101_driver/enable_torque")  # whatever failed above, the module's arm holds again
    follow(chain, SAFE_POSE)  # the policy comes back: the arm is ramped to it from where it lies


def fallen_and_at_rest(probe: PolicyProbe) -> bool:
    """The arm lies away from SAFE_POSE (it fell) and its joints are still over the last few samples."""
    recent = probe.speeds_since(max(0, probe.state_count() - REST_SAMPLES))
    with probe.lock:
        measured = probe.measured
    fallen = measured is not None and max(abs(m - p) for m, p in zip(measured, SAFE_POSE, strict=True)) > FALL
    return fallen and len(recent) == REST_SAMPLES and max(max(s) for s in recent) < REST_SPEED


def assert_within_speed_bounds(speeds: list[list[float]], when: str) -> None:
    bounds = [lim.max_velocity for lim in load_config(CONFIG / "safety.yaml").limits]
    peaks = [max(s[i] for s in speeds) for i in range(len(JOINT_NAMES))]
    fast = {n: round(p, 3) for n, p, b in zip(JOINT_NAMES, peaks, bounds, strict=True) if p > b + SPEED_LSB}
    assert not fast, f"joints faster than their safety bound {when}: {fast} rad/s (bounds {bounds})"
