"""The safety node in a child process over real DDS (loopback, private domain): clipping, the watchdog
hold, e-stop via service and topic, reset, rejected messages, the gripper load from joint efforts,
diagnostics, and forwarding each command at its arrival."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from so101_common.joints import JOINT_NAMES, joint
from so101_testing import NodeProcess, wait_for

REPO = Path(__file__).resolve().parents[3]
PARAMS = REPO / "config" / "safety.yaml"
MARGIN = 0.05
ARM = [0.0, 0.0, 0.2, 0.0, 0.0, 0.5]  # where the (pretend) arm starts
HOLDING = 0.3  # N·m: the effort a servo reports while it holds the arm (torque on; 0 with torque off)


class Harness(Node):
    """Plays the arm (/joint_states at 50 Hz: where the filter's latest output sent it, torque on) and the
    command source; records the filter's output."""

    def __init__(self) -> None:
        super().__init__("safety_test_harness")
        self.cmd_pub = self.create_publisher(JointState, "/safety_test/command", 10)
        self.js_pub = self.create_publisher(JointState, "/joint_states", 10)
        self.estop_pub = self.create_publisher(Bool, "/safety_filter/estop_trigger", 10)
        self.create_subscription(JointState, "/safety_test/output", self._on_output, 50)
        self.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 50)
        self.reset_client = self.create_client(Trigger, "/safety_filter/reset")
        self.estop_client = self.create_client(Trigger, "/safety_filter/estop")
        self.lock = threading.Lock()
        self.outputs: list[tuple[float, list[float]]] = []
        self.status: DiagnosticStatus | None = None
        self.command: tuple[list[str], list[float]] | None = None  # re-sent at 50 Hz while set
        self.gripper_effort = HOLDING  # N·m in the published joint states
        self.create_timer(0.02, self._tick)

    def _tick(self) -> None:
        self.js_pub.publish(self._state(JOINT_NAMES, self.latest() or ARM, effort=[HOLDING] * 5 + [self.gripper_effort]))
        if self.command is not None:
            self.cmd_pub.publish(self._state(*self.command))

    def _state(self, names, positions, effort=()) -> JointState:
        msg = JointState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.name, msg.position, msg.effort = list(names), [float(p) for p in positions], list(effort)
        return msg

    def _on_output(self, msg: JointState) -> None:
        assert list(msg.name) == list(JOINT_NAMES)
        with self.lock:
            self.outputs.append((self.get_clock().now().nanoseconds * 1e-9, list(msg.position)))

    def _on_diag(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name.startswith("safety_filter"):
                with self.lock:
                    self.status = status

    def since(self, t: float) -> list[list[float]]:
        with self.lock:
            return [p for stamp, p in self.outputs if stamp >= t]

    def latest(self) -> list[float] | None:
        with self.lock:
            return self.outputs[-1][1] if self.outputs else None

    def now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def call(self, client, timeout: float = 5.0) -> Trigger.Response:
        assert client.wait_for_service(timeout_sec=timeout)
        future = client.call_async(Trigger.Request())
        assert wait_for(future.done, timeout)
        return future.result()

    def status_values(self) -> dict[str, str]:
        with self.lock:
            return {kv.key: kv.value for kv in self.status.values} if self.status else {}



@pytest.fixture(scope="module")
def harness():
    args = ["--ros-args", "--params-file", str(PARAMS), "-p", "watchdog_timeout:=0.3",
            "-p", "diagnostics_period:=0.2", "-p", "log_throttle:=0.1",
            "-r", "input:=/safety_test/command", "-r", "output:=/safety_test/output"]
    rclpy.init()
    node = Harness()
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    with NodeProcess("so101_safety.safety_node", args) as proc:
        try:
            assert wait_for(lambda: node.latest() is not None, 20.0), proc.output()
            yield node, proc
            assert proc.alive(), proc.output()
        finally:
            executor.shutdown()
            node.destroy_node()
            rclpy.try_shutdown()


def test_out_of_limit_command_is_clipped(harness):
    node, proc = harness
    upper = joint("shoulder_pan").upper - MARGIN
    node.command = (["shoulder_pan"], [5.0])  # far beyond the limit
    t0 = node.now()
    assert wait_for(lambda: (node.latest() or [0])[0] == pytest.approx(upper, abs=1e-9), 5.0), proc.output()
    seen = node.since(t0)
    assert max(p[0] for p in seen) <= upper + 1e-9
    assert all(p[1:] == pytest.approx(ARM[1:]) for p in seen)  # joints not commanded stay where the arm is
    assert wait_for(lambda: "shoulder_pan" in node.status_values().get("clipped_joints", ""), 3.0)


def test_stalled_command_stream_triggers_the_watchdog_hold(harness):
    node, proc = harness
    node.command = (["shoulder_pan", "elbow_flex"], [0.3, 1.2])
    assert wait_for(lambda: (node.latest() or [0, 0, 0])[2] == pytest.approx(1.2, abs=1e-6), 5.0), proc.output()
    node.command = None  # the source stalls
    # after 0.3 s the filter holds the measured position: where the arm is, so the output stays put
    assert wait_for(lambda: node.status_values().get("state") == "holding", 3.0)
    held = node.latest()
    assert held is not None and held[2] == pytest.approx(1.2, abs=1e-6)
    t0 = node.now()
    assert wait_for(lambda: len(node.since(t0)) > 10, 3.0)
    assert all(p == held for p in node.since(t0))
    with node.lock:
        assert node.status.level == DiagnosticStatus.WARN and "watchdog" in node.status.message


def test_estop_via_service_latches_until_reset(harness):
    node, proc = harness
    node.command = (["wrist_flex"], [1.0])
    assert wait_for(lambda: (node.latest() or [0] * 4)[3] > 0.3, 5.0), proc.output()
    response = node.call(node.estop_client)
    assert response.success and "latched" in response.message
    assert wait_for(lambda: node.status_values().get("state") == "estopped", 3.0)

    def at_rest() -> bool:  # the last 0.2 s of outputs all the same: braked to a stop
        recent = node.since(node.now() - 0.2)
        return len(recent) > 10 and all(p == recent[-1] for p in recent)

    assert wait_for(at_rest, 5.0), node.since(node.now() - 0.5)
    t0 = node.now()
    assert wait_for(lambda: len(node.since(t0)) > 30, 5.0)
    frozen = node.since(t0)
    assert all(p == frozen[0] for p in frozen) and frozen[0][3] < 1.0  # stopped mid-way, never moves again
    with node.lock:
        assert node.status.level == DiagnosticStatus.ERROR
    assert int(node.status_values()["rejected_estopped"]) > 0  # the commands kept coming and were ignored

    response = node.call(node.reset_client)
    assert response.success and "released" in response.message
    assert wait_for(lambda: (node.latest() or [0] * 4)[3] == pytest.approx(1.0, abs=1e-6), 5.0), proc.output()
    assert node.call(node.reset_client).message.startswith("no e-stop")


def test_estop_trigger_topic_and_bad_messages(harness):
    node, proc = harness
    node.command = (["elbow_flex"], [math.nan])  # rejected, logged, never a crash
    node.cmd_pub.publish(node._state(["elbow", "gripper"], [0.0, 0.1]))
    node.cmd_pub.publish(node._state(["gripper"], [0.1, 0.2]))
    assert wait_for(lambda: int(node.status_values().get("rejected_non_finite", "0")) > 0, 5.0)
    assert wait_for(lambda: "rejected command (non_finite)" in proc.output(), 5.0)
    node.command = (["gripper"], [1.0])
    node.estop_pub.publish(Bool(data=True))
    assert wait_for(lambda: node.status_values().get("state") == "estopped", 5.0)
    assert "estop_trigger" in node.status_values()["estop_reason"]
    assert node.call(node.reset_client).success
    assert wait_for(lambda: (node.latest() or [0] * 6)[5] == pytest.approx(1.0, abs=1e-6), 5.0)


def test_gripper_load_from_joint_state_effort_stops_closing(harness):
    node, proc = harness
    node.command = (["gripper"], [1.0])
    assert wait_for(lambda: (node.latest() or [0] * 6)[5] == pytest.approx(1.0, abs=1e-6), 5.0)
    node.gripper_effort = -0.9 * joint("gripper").max_effort  # squeezing: 90 % of max torque, above the limit, the gripper still (a grasp)
    assert wait_for(lambda: node.status_values().get("gripper_load_limited") == "True", 3.0), proc.output()
    node.command = (["gripper"], [0.0])  # try to close further
    t0 = node.now() + 0.1
    assert wait_for(lambda: len(node.since(t0)) > 20, 3.0)
    assert min(p[5] for p in node.since(t0)) == pytest.approx(1.0, abs=1e-6)
    node.command = None
    node.gripper_effort = HOLDING


def test_a_command_flood_is_coalesced_and_the_latest_wins(harness):
    node, proc = harness
    node.command = None
    coalesced = int(node.status_values().get("commands_coalesced", "0"))
    for k in range(2000):  # far faster than max_rate_hz (100)
        node.cmd_pub.publish(node._state(["elbow_flex"], [0.6 + 1e-4 * (k % 2)]))
    assert wait_for(lambda: int(node.status_values().get("commands_coalesced", "0")) > coalesced, 3.0)
    node.command = (["elbow_flex"], [0.65])  # then a steady command (best effort may drop any one sample)
    assert wait_for(lambda: (node.latest() or [0] * 3)[2] == pytest.approx(0.65, abs=1e-6), 5.0), proc.output()
    node.command = None


def test_rejections_are_counted_per_reason_and_logged_short_and_throttled(harness):
    node, proc = harness
    node.command = None
    values = node.status_values()
    duplicate, non_finite = int(values.get("rejected_duplicate_name", "0")), int(values.get("rejected_non_finite", "0"))
    lines_before = proc.output().count("rejected command")
    start = node.now()

    def counted(key: str, before: int, names: list[str], positions: list[float]) -> bool:
        """Publish (again: best effort may drop a sample) until the node has counted one more ``key``."""
        if int(node.status_values().get(key, "0")) > before:
            return True
        node.cmd_pub.publish(node._state(names, positions))
        return False

    big = "x" * 100_000  # a 100 kB joint name, twice
    assert wait_for(lambda: counted("rejected_duplicate_name", duplicate, [big, big], [0.1, 0.2]), 10.0, interval=0.1)
    for _ in range(500):  # a flood of NaN commands
        node.cmd_pub.publish(node._state(["elbow_flex"], [math.nan]))
    assert wait_for(lambda: counted("rejected_non_finite", non_finite, ["elbow_flex"], [math.nan]), 10.0, interval=0.1)
    elapsed = node.now() - start
    out = proc.output()
    lines = [line for line in out.splitlines() if "rejected command" in line]
    assert 1 <= len(lines) - lines_before <= 2 + elapsed / 0.1  # log_throttle 0.1 s (the fixture's)
    assert max(len(line) for line in lines) < 1000 and "x" * 1000 not in out  # the name is not echoed whole


def test_parameters_cannot_change_at_run_time(harness):
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    node, proc = harness
    client = node.create_client(SetParameters, "/safety_filter/set_parameters")
    assert client.wait_for_service(timeout_sec=5.0)
    value = ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=10.0)
    future = client.call_async(SetParameters.Request(parameters=[Parameter(name="max_velocity", value=value)]))
    assert wait_for(future.done, 5.0)
    result = future.result().results[0]
    assert not result.successful and "start-up" in result.reason


def test_each_command_is_forwarded_at_its_arrival() -> None:
    """With a timer far slower than the test (rate_hz 0.01: one tick per 100 s), every output the
    test sees was published by a command's arrival, not by the timer."""
    args = ["--ros-args", "--params-file", str(PARAMS), "-p", "rate_hz:=0.01", "-p", "watchdog_timeout:=1000.0",
            "-r", "__ns:=/arrival", "-r", "input:=command", "-r", "output:=output"]
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("arrival_probe", context=context)
    outputs: list[list[float]] = []

    def on_output(msg: JointState) -> None:
        outputs.append(list(msg.position))

    node.create_subscription(JointState, "/arrival/output", on_output, 50)
    state_pub = node.create_publisher(JointState, "/arrival/joint_states", 10)
    command_pub = node.create_publisher(JointState, "/arrival/command", 10)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()

    def publish(pub, names, positions) -> None:
        msg = JointState()
        msg.header.stamp = node.get_clock().now().to_msg()
        msg.name, msg.position = list(names), [float(p) for p in positions]
        pub.publish(msg)

    def command_reached(target: float) -> bool:
        """Send the command again; whether the latest output is at it."""
        publish(command_pub, ["elbow_flex"], [target])
        return outputs[-1][2] == pytest.approx(target, abs=1e-9)

    try:
        with NodeProcess("so101_safety.safety_node", args) as proc:
            assert wait_for(lambda: command_pub.get_subscription_count() > 0
                            and state_pub.get_subscription_count() > 0, 20.0), proc.output()
            publish(state_pub, JOINT_NAMES, ARM)
            target = ARM[2] + 1e-3
            for _ in range(200):  # until the arm is known, each command publishes (at its arrival)
                publish(command_pub, ["elbow_flex"], [target])
                if wait_for(lambda: bool(outputs), 0.1):
                    break
                publish(state_pub, JOINT_NAMES, ARM)
            assert outputs, proc.output()
            assert wait_for(lambda: command_reached(target), 20.0, interval=0.05), outputs
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
