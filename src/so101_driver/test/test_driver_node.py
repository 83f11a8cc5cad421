"""Cross-process tests of the driver and leader nodes over real DDS (loopback, private domain).

Three processes: the virtual SO-101 (``so101 virtual-bus``: MuJoCo arm, STS3215 firmware, the real
protocol on a pty, faults through its control socket), the node under test
(``python -m so101_driver.driver_node``), and this test process publishing ``/joint_command``,
listening to ``/joint_states`` and ``/diagnostics`` and calling the torque services. The virtual arm
runs the ``ideal`` gap profile; commands are checked to within its gravity sag (``TOL``).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from so101_common.joints import JOINT_NAMES
from so101_testing import NodeProcess, private_ros_env, wait_for
from so101_virtual.faults import send_fault_command

pytestmark = pytest.mark.slow

CALIBRATION = Path(__file__).resolve().parents[3] / "config" / "calibration"
TOL = 0.06  # rad: a position servo's steady-state sag under gravity
# the virtual arm shares the CPU with the test: allow late replies (a real bus answers in ~1 ms)
BEHAVIOUR_NS = "/driver_behaviour"
LOADED_MACHINE = ("-p", "timeout_ms:=100.0", "-p", "retries:=2")


class VirtualArmProcess:
    """``so101 virtual-bus`` in a child process, with its fault socket."""

    def __init__(self, folder: Path, role: str = "follower") -> None:
        self.link = folder / "arm"
        self.faults = folder / "faults.sock"
        self.calibration = CALIBRATION / f"virtual_{role}.json"
        self.process = NodeProcess("so101_virtual.cli", [
            "--link", str(self.link), "--profile", "ideal", "--role", role, "--faults-socket", str(self.faults)]).start()
        assert wait_for(lambda: "device " in self.process.output(), timeout=60), self.process.output()

    def fault(self, **command: object) -> dict:
        return send_fault_command(str(self.faults), command)

    def stop(self) -> None:
        self.process.stop()


class Client:
    """This process's side of the graph."""

    def __init__(self, state_topic: str = "joint_states", node_name: str = "so101_driver", namespace: str = "") -> None:
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = Node("driver_test_client", namespace=namespace, context=self.context)
        self.lock = threading.Lock()
        self.states: list[JointState] = []
        self.arrivals: list[float] = []  # this node's clock (s) as each joint state arrived
        self.diagnostics: dict[str, tuple[int, str, dict[str, str]]] = {}
        self.node.create_subscription(JointState, state_topic, self._on_state, 50)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 50)
        self.command_pub = self.node.create_publisher(JointState, "joint_command", 10)
        self.enable = self.node.create_client(Trigger, f"{namespace}/{node_name}/enable_torque")
        self.disable = self.node.create_client(Trigger, f"{namespace}/{node_name}/disable_torque")
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def _on_state(self, msg: JointState) -> None:
        arrived = self.node.get_clock().now().nanoseconds * 1e-9
        with self.lock:
            self.states.append(msg)
            self.arrivals.append(arrived)

    def _on_diag(self, msg: DiagnosticArray) -> None:
        with self.lock:
            for s in msg.status:
                level = s.level[0] if isinstance(s.level, bytes) else int(s.level)
                self.diagnostics[s.name] = (level, s.message, {kv.key: kv.value for kv in s.values})

    def latest(self) -> JointState | None:
        with self.lock:
            return self.states[-1] if self.states else None

    def position(self, joint: str) -> float:
        msg = self.latest()
        return float("nan") if msg is None else msg.position[list(msg.name).index(joint)]

    def diag(self, suffix: str) -> tuple[int, str, dict[str, str]] | None:
        with self.lock:
            return next((v for k, v in self.diagnostics.items() if k.endswith(suffix)), None)

    def command(self, names: list[str], positions: list[float]) -> None:
        msg = JointState()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.name, msg.position = names, positions
        self.command_pub.publish(msg)

    def call(self, client, timeout: float = 10.0) -> Trigger.Response:
        assert client.wait_for_service(timeout_sec=timeout), "service not available"
        future = client.call_async(Trigger.Request())
        assert wait_for(future.done, timeout=timeout)
        return future.result()

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


@pytest.fixture
def arm(tmp_path):
    arm = VirtualArmProcess(tmp_path)
    yield arm
    arm.stop()


@pytest.fixture
def client():
    client = Client()
    yield client
    client.close()


def _driver(arm: VirtualArmProcess, *extra: str) -> NodeProcess:
    return NodeProcess("so101_driver.driver_node", [
        "--ros-args", "-p", f"port:={arm.link}", "-p", f"calibration_file:={arm.calibration}",
        "-p", "rate_hz:=100.0", "-p", "diagnostics_rate_hz:=10.0", *LOADED_MACHINE, *extra])


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    """One virtual arm, one driver node and one client for the behaviour tests below, under their own
    namespace (the other tests' drivers never mix in); each test leaves the arm as it found it (faults
    cleared, torque on)."""
    arm = VirtualArmProcess(tmp_path_factory.mktemp("driver_node"))
    client = Client(namespace=BEHAVIOUR_NS)
    node = _driver(arm, "-r", f"__ns:={BEHAVIOUR_NS}").start()
    try:
        assert wait_for(lambda: client.latest() is not None, timeout=30), node.output()
        yield arm, client, node
        assert node.alive(), node.output()
    finally:
        node.stop()
        client.close()
        arm.stop()
    assert node.process.returncode == 0, node.log_path.read_text()


def _states_after(client: Client, count: int, timeout: float = 10.0) -> bool:
    """Wait for ``count`` more joint states (the node's own clock paces them; no fixed sleep)."""
    with client.lock:
        target = len(client.states) + count
    return wait_for(lambda: len(client.states) >= target, timeout=timeout)


def test_joint_states_name_every_joint_with_stamped_position_velocity_effort(running):
    _, client, _ = running
    first = client.latest()
    assert list(first.name) == list(JOINT_NAMES)
    assert len(first.position) == len(first.velocity) == len(first.effort) == 6
    assert first.header.stamp.sec > 0


def test_joint_states_are_stamped_when_the_servos_sampled_them_not_when_they_arrived(running):
    arm, client, node = running
    try:
        arm.fault(op="extra_latency", seconds=0.012)  # every reply 12 ms after its request: a slow USB adapter
        with client.lock:
            start = len(client.states) + 10  # past the reads under way when the latency came in
        assert _states_after(client, 60), node.output()
        with client.lock:
            lags = sorted(arrived - (m.header.stamp.sec + m.header.stamp.nanosec * 1e-9)
                          for m, arrived in zip(client.states[start:], client.arrivals[start:], strict=True))
        assert lags[len(lags) // 2] >= 0.012, lags
    finally:
        arm.fault(op="extra_latency", seconds=0.0)


def test_torque_on_at_start_holds_the_arm(running):
    _, client, node = running
    rest = client.position("wrist_roll")
    assert _states_after(client, 30), node.output()
    assert abs(client.position("wrist_roll") - rest) < TOL


def test_partial_command_moves_only_the_named_joints(running):
    _, client, node = running
    pan = client.position("shoulder_pan")
    client.command(["elbow_flex", "gripper"], [0.5, 1.2])
    assert wait_for(lambda: abs(client.position("elbow_flex") - 0.5) < TOL
                    and abs(client.position("gripper") - 1.2) < TOL, timeout=10), node.output()
    assert abs(client.position("shoulder_pan") - pan) < TOL


def test_joint_states_are_stamped_at_rate_hz(running):
    _, client, node = running
    with client.lock:
        start = len(client.states)
    assert _states_after(client, 100), node.output()
    with client.lock:
        stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in client.states[start:start + 100]]
    intervals = sorted(b - a for a, b in zip(stamps, stamps[1:], strict=False))
    assert 0.5 * 0.01 <= intervals[len(intervals) // 2] <= 2.0 * 0.01  # rate_hz:=100 (median: robust to load)


def test_an_unplugged_servo_shows_in_diagnostics_and_the_others_keep_working(running):
    arm, client, node = running
    try:
        arm.fault(op="unplug", id=3)
        assert wait_for(lambda: (d := client.diag(": elbow_flex")) is not None and d[0] == 2, timeout=10)
        level, message, values = client.diag(": elbow_flex")
        assert "servo 3" in message and values["servo_id"] == "3"
        assert wait_for(lambda: client.diag(": bus")[0] == 1 and "elbow_flex" in client.diag(": bus")[1], timeout=10)
        client.command(["shoulder_pan"], [-0.3])
        assert wait_for(lambda: abs(client.position("shoulder_pan") + 0.3) < TOL, timeout=10)
    finally:
        arm.fault(op="clear")


def test_a_servo_that_answers_again_recovers(running):
    arm, client, node = running
    client.command(["elbow_flex"], [0.4])
    assert wait_for(lambda: abs(client.position("elbow_flex") - 0.4) < TOL, timeout=10), node.output()
    arm.fault(op="unplug", id=3)
    assert wait_for(lambda: client.diag(": elbow_flex")[0] == 2, timeout=10)
    arm.fault(op="plug", id=3)
    assert wait_for(lambda: client.diag(": elbow_flex")[0] == 0, timeout=10), node.output()
    assert wait_for(lambda: abs(client.position("elbow_flex") - 0.4) < TOL, timeout=5)


def test_servo_error_bits_are_decoded_in_diagnostics(running):
    arm, client, _ = running
    try:
        arm.fault(op="error_bits", id=2, bits=32)
        assert wait_for(lambda: "OVERLOAD" in client.diag(": shoulder_lift")[1], timeout=10)
    finally:
        arm.fault(op="clear")


def _rejected(client: Client, reason: str) -> int:
    bus = client.diag(": bus")
    assert bus is not None
    return int(bus[2].get(f"rejected_{reason}", "0"))


def test_malformed_commands_are_rejected_counted_per_reason_and_logged_short_and_throttled(running):
    _, client, node = running
    reasons = ("length_mismatch", "non_finite", "unknown_joint")
    before = {reason: _rejected(client, reason) for reason in reasons}
    lines_before = node.output().count("joint_command rejected")
    start = time.monotonic()
    client.command(["elbow_flex", "wrist_flex"], [0.1])
    client.command(["x" * 100_000], [0.1])  # a 100 kB joint name
    assert wait_for(lambda: _rejected(client, "length_mismatch") == before["length_mismatch"] + 1
                    and _rejected(client, "unknown_joint") == before["unknown_joint"] + 1, timeout=10), node.output()
    for _ in range(500):  # a flood of NaN commands
        client.command(["elbow_flex"], [float("nan")])
    assert wait_for(lambda: _rejected(client, "non_finite") > before["non_finite"], timeout=10)
    assert wait_for(lambda: client.diag(": bus")[0] == 1 and "rejected" in client.diag(": bus")[1], timeout=10)
    elapsed = time.monotonic() - start
    out = node.output()
    lines = [line for line in out.splitlines() if "joint_command rejected" in line]
    assert 1 <= len(lines) - lines_before <= 2 + elapsed / 1.0  # log_throttle: one line a second at most
    assert max(len(line) for line in lines) < 1000 and "x" * 1000 not in out  # the name is not echoed whole
    assert len(client.diag(": bus")[2]["last_rejection"]) < 1000
    client.command(["elbow_flex"], [-0.4])  # the node keeps working
    assert wait_for(lambda: abs(client.position("elbow_flex") + 0.4) < TOL, timeout=10)


def test_a_flood_of_commands_is_coalesced_and_the_latest_wins(running):
    _, client, node = running
    coalesced = int(client.diag(": bus")[2]["commands_coalesced"])
    for k in range(2000):  # far faster than the 100 Hz cycle
        client.command(["elbow_flex"], [0.2 + 1e-4 * (k % 2)])
    client.command(["elbow_flex"], [0.5])
    assert wait_for(lambda: abs(client.position("elbow_flex") - 0.5) < TOL, timeout=10), node.output()
    assert wait_for(lambda: int(client.diag(": bus")[2]["commands_coalesced"]) > coalesced, timeout=5)
    assert _states_after(client, 20), node.output()  # the cycle kept running through it


def test_torque_off_stops_commands_and_torque_on_holds_without_a_jump(running):
    # wrist_roll: gravity does not turn it, so it stays put with torque off
    _, client, node = running
    try:
        response = client.call(client.disable)
        assert response.success, response.message
        assert wait_for(lambda: client.diag(": bus")[2]["torque_enabled"] == "False", timeout=5)
        roll = client.position("wrist_roll")
        client.command(["wrist_roll"], [roll + 1.0])
        assert _states_after(client, 50), node.output()
        assert abs(client.position("wrist_roll") - roll) < 0.1
        response = client.call(client.enable)
        assert response.success, response.message
        assert _states_after(client, 50), node.output()
        assert abs(client.position("wrist_roll") - roll) < 0.1  # no jump to the stale goal
        client.command(["wrist_roll"], [roll + 1.0])
        assert wait_for(lambda: abs(client.position("wrist_roll") - roll - 1.0) < TOL, timeout=10)
    finally:
        client.call(client.enable)


def test_torque_on_fails_cleanly_while_a_servo_is_missing(running):
    arm, client, _ = running
    try:
        arm.fault(op="unplug", id=5)
        response = client.call(client.enable)
        assert not response.success and "servo 5" in response.message
    finally:
        arm.fault(op="clear")


def test_driver_releases_the_port_on_shutdown(arm):
    # Each driver under a namespace of its own: a joint state from another test's driver (the domain is the
    # session's) must not pass for this one's, or it is stopped while still starting up.
    def run_and_stop(namespace: str) -> NodeProcess:
        client = Client(namespace=namespace)
        try:
            with _driver(arm, "-r", f"__ns:={namespace}") as node:
                assert wait_for(lambda: client.latest() is not None, timeout=30), node.output()
        finally:
            client.close()
        return node

    for namespace in ("/release_first", "/release_second"):  # the second can only open the port if the first released it
        node = run_and_stop(namespace)
        assert node.process.returncode == 0, node.log_path.read_text()


def test_driver_exits_with_a_clear_error_on_bad_calibration(arm, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with NodeProcess("so101_driver.driver_node", ["--ros-args", "-p", f"port:={arm.link}",
                                                  "-p", f"calibration_file:={bad}"]) as node:
        assert wait_for(lambda: not node.alive(), timeout=30)
    assert node.process.returncode == 1
    assert "missing motors" in node.log_path.read_text()


def test_driver_explains_a_missing_default_calibration(arm, tmp_path):
    env = private_ros_env()
    env["HF_LEROBOT_CALIBRATION"] = str(tmp_path / "calibration")
    with NodeProcess("so101_driver.driver_node", ["--ros-args", "-p", f"port:={arm.link}", "-p", "robot_id:=nobody"],
                     env=env) as node:
        assert wait_for(lambda: not node.alive(), timeout=30)
    assert node.process.returncode == 1
    text = node.log_path.read_text()
    assert "no LeRobot calibration for robot_id 'nobody'" in text
    assert str(tmp_path / "calibration" / "robots" / "so_follower" / "nobody.json") in text
    assert "so101 calibrate" in text


def test_leader_node_publishes_leader_joint_states(tmp_path):
    arm = VirtualArmProcess(tmp_path, role="leader")  # moved by a virtual hand
    client = Client(state_topic="leader/joint_states", node_name="so101_leader")
    try:
        with NodeProcess("so101_driver.leader_node", [
                "--ros-args", "-p", f"port:={arm.link}", "-p", f"calibration_file:={arm.calibration}",
                "-p", "rate_hz:=50.0", *LOADED_MACHINE]) as node:
            assert wait_for(lambda: client.latest() is not None, timeout=30), node.output()
            assert list(client.latest().name) == list(JOINT_NAMES)
            assert "torque off" in node.output()
            first = list(client.latest().position)
            assert wait_for(lambda: max(abs(a - b) for a, b in zip(client.latest().position, first, strict=True))
                            > 0.05, timeout=10)  # it follows the hand
    finally:
        client.close()
        arm.stop()


def test_driver_waits_for_a_port_that_appears_later(tmp_path, client):
    link = tmp_path / "arm"  # what VirtualArmProcess(tmp_path) will create, not there yet
    calibration = CALIBRATION / "virtual_follower.json"
    with NodeProcess("so101_driver.driver_node", [
            "--ros-args", "-p", f"port:={link}", "-p", f"calibration_file:={calibration}",
            "-p", "diagnostics_rate_hz:=10.0", *LOADED_MACHINE]) as node:
        assert wait_for(lambda: (client.diag(": bus") or (0, ""))[1].startswith("port failing"), timeout=30), \
            node.output()
        assert client.diag(": bus")[0] == 2 and "waiting for the port" in client.diag(": bus")[1]
        assert f"waiting for {link}" in node.output() and node.alive()
        arm = VirtualArmProcess(tmp_path)
        try:
            assert wait_for(lambda: client.latest() is not None, timeout=30), node.output()
            assert wait_for(lambda: client.diag(": bus")[0] == 0, timeout=30), client.diag(": bus")
        finally:
            arm.stop()


def test_intermittent_faults_and_supply_sag_show_on_diagnostics(arm, client):
    with _driver(arm) as node:
        assert wait_for(lambda: client.latest() is not None, timeout=30), node.output()
        arm.fault(op="drop_fraction", fraction=0.05)
        arm.fault(op="voltage_sag", volts=3.0)

        reports: list[tuple[int, str, dict[str, str]]] = []

        def bus_counts_faults() -> bool:
            # one report must show both: a lost reply is retried only while the cycle's budget allows, so on a
            # loaded machine some windows hold timeouts and no retries
            bus = client.diag(": bus")
            if bus is None or "bus faults" not in bus[1]:
                return False
            reports.append(bus)
            return float(bus[2]["timeouts_per_s"]) > 0 and float(bus[2]["retries_per_s"]) > 0

        assert wait_for(bus_counts_faults, timeout=20), reports[-5:]
        level, _, values = reports[-1]
        assert level >= 1 and values["configured_rate_hz"] == "100" and float(values["achieved_rate_hz"]) > 0
        assert wait_for(lambda: "supply sagging" in client.diag(": shoulder_pan")[1], timeout=20), \
            client.diag(": shoulder_pan")
        assert client.diag(": shoulder_pan")[0] == 1
        arm.fault(op="clear")
        assert wait_for(lambda: client.diag(": bus")[2]["timeouts_per_s"] == "0.00", timeout=20)
