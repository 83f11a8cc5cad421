"""Cross-process tests of the policy node over real DDS (loopback, private domain).

The node runs in a child process (``python -m so101_policy.policy_node``); this process publishes
``/joint_states`` (+ a camera for the ACT), listens to ``/policy/joint_command`` and ``/diagnostics`` and
calls ``~/start`` / ``~/stop``. No assertion here depends on how fast this machine runs: the rate at which the
node publishes is its timer's period, checked in process, where the test drives the ticks by hand.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from so101_common.joints import JOINT_NAMES
from so101_policy.tiny import make_offset_onnx
from so101_testing import NodeProcess, wait_for

pytestmark = pytest.mark.slow

MODULE = "so101_policy.policy_node"
Q = [0.1, -0.2, 0.3, -0.4, 0.5, 0.6]


class Client:
    """This process's side: joint-state (+ image) publisher, command/diagnostics recorder, service caller."""

    def __init__(self, image_topic: str | None = None) -> None:
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = Node("policy_test_client", context=self.context)
        self.commands: list[tuple[float, JointState]] = []
        self.chunks: list[JointTrajectory] = []
        self.diagnostics: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.node.create_subscription(JointState, "/policy/joint_command", self._on_command, 50)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 10)
        self.node.create_subscription(JointTrajectory, "/policy/action_chunk", self._on_chunk, 50)
        self.js_pub = self.node.create_publisher(JointState, "/joint_states", 10)
        self.image_pub = self.node.create_publisher(Image, image_topic, 10) if image_topic else None
        self.node.create_timer(0.02, self._publish_state)
        if self.image_pub is not None:
            self.node.create_timer(0.1, self._publish_image)
        self.start_cli = self.node.create_client(Trigger, "/policy/start")
        self.stop_cli = self.node.create_client(Trigger, "/policy/stop")
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def _publish_state(self) -> None:
        msg = JointState()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.name = list(reversed(JOINT_NAMES))  # any order: the node reorders by name
        msg.position = list(reversed(Q))
        self.js_pub.publish(msg)

    def _publish_image(self) -> None:
        msg = Image(height=48, width=64, encoding="rgb8", step=64 * 3)
        msg.data = (np.arange(48 * 64 * 3) % 256).astype(np.uint8).tobytes()
        self.image_pub.publish(msg)

    def _on_command(self, msg: JointState) -> None:
        with self.lock:
            self.commands.append((time.monotonic(), msg))

    def _on_chunk(self, msg: JointTrajectory) -> None:
        with self.lock:
            self.chunks.append(msg)

    def _on_diag(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name.endswith(": policy"):
                with self.lock:
                    self.diagnostics.append({"level": int.from_bytes(status.level, "little")
                                             if isinstance(status.level, bytes) else int(status.level),
                                             "message": status.message,
                                             **{kv.key: kv.value for kv in status.values}})

    def count(self) -> int:
        with self.lock:
            return len(self.commands)

    def since(self, t0: float) -> list[tuple[float, JointState]]:
        with self.lock:
            return [c for c in self.commands if c[0] >= t0]

    def call(self, client, timeout: float = 10.0) -> Trigger.Response:
        assert client.wait_for_service(timeout_sec=timeout), f"service {client.srv_name} not available"
        future = client.call_async(Trigger.Request())
        assert wait_for(future.done, timeout), f"no answer from {client.srv_name}"
        return future.result()

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)
        self.thread.join(5.0)


def node_args(**params) -> list[str]:
    args = ["--ros-args"]
    for key, value in params.items():
        args += ["-p", f"{key}:={value}"]
    return args


def wait_ready(proc: NodeProcess, client: Client, timeout: float = 90.0) -> None:
    ready = wait_for(lambda: client.start_cli.service_is_ready() or not proc.alive(), timeout, 0.1)
    assert ready and proc.alive(), f"policy node did not come up:\n{proc.output()}"


def window_of(client: Client, count: int, timeout: float = 30.0) -> list[tuple[float, JointState]]:
    """The next ``count`` commands (waited for, no fixed sleep)."""
    t0 = time.monotonic()
    assert wait_for(lambda: len(client.since(t0)) >= count, timeout), f"fewer than {count} commands in {timeout} s"
    return client.since(t0)[:count]


def diagnostics_after(client: Client, count: int, timeout: float = 10.0) -> bool:
    """Wait for ``count`` more /diagnostics reports of the node (its own timer paces them)."""
    target = len(client.diagnostics) + count
    return wait_for(lambda: len(client.diagnostics) >= target, timeout)


def test_act_node_start_stop_and_diagnostics(tiny_act_dir):
    client = Client(image_topic="/test_cam/image_raw")
    proc = NodeProcess(MODULE, node_args(policy_path=str(tiny_act_dir), rate_hz=30.0, autostart="false",
                                         image_topics="['front=/test_cam/image_raw']",
                                         diagnostics_period_s=0.5))
    try:
        proc.start()
        wait_ready(proc, client)
        assert wait_for(lambda: any(d.get("running") == "false" for d in client.diagnostics), 10.0)
        assert diagnostics_after(client, 1)  # up and reporting for a while ...
        assert client.count() == 0, "a stopped node must not publish"  # ... without a command

        response = client.call(client.start_cli)
        assert response.success, response.message
        assert wait_for(lambda: client.count() >= 5, 30.0), f"no commands after ~/start:\n{proc.output()}"
        window = window_of(client, 60)
        msg = window[-1][1]
        assert list(msg.name) == list(JOINT_NAMES)
        assert len(msg.position) == 6 and np.all(np.isfinite(msg.position))
        assert max(abs(p) for p in msg.position) < 2 * np.pi  # rad, not degrees
        stamps = [m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec for _, m in window]
        assert np.all(np.diff(stamps) > 0) and stamps[0] > 0

        assert wait_for(lambda: any(d.get("running") == "true" for d in client.diagnostics), 5.0)
        diag = [d for d in client.diagnostics if d.get("running") == "true"][-1]
        for key in ("inference_latency_p50_ms", "queue_depth", "missed_ticks", "inferences"):
            assert key in diag, diag
        assert int(diag["inferences"]) >= 1 and float(diag["inference_latency_p50_ms"]) > 0
        assert diag["policy_type"] == "act" and diag["chunk_size"] == "10" and diag["rate_hz"] == "30.0"

        assert client.call(client.stop_cli).success
        assert diagnostics_after(client, 1)  # a report made after the stop: nothing in flight any more
        stopped_at = client.count()
        assert diagnostics_after(client, 2)  # a second of the node's life later ...
        assert client.count() == stopped_at, "publishing went on after ~/stop"
        assert client.call(client.start_cli).success
        assert wait_for(lambda: client.count() >= stopped_at + 5, 30.0), "no commands after the restart"
        assert proc.alive()
    finally:
        client.close()
        proc.stop()


def test_a_slow_model_holds_the_last_action_on_every_tick_and_then_plays_whole_chunks(tmp_path):
    """In process, the node's ticks driven by hand and its model held until released (no clock in the test): while an
    inference runs, every tick of the 50 Hz timer publishes, holding the last action, without waiting for the model,
    and /diagnostics says the inference is late; the chunk it returns then plays whole."""
    from so101_policy.policy_node import PolicyNode

    model = make_offset_onnx(tmp_path / "offset.onnx", chunk_size=5, rate_hz=50)
    context = Context()
    rclpy.init(context=context)
    try:
        node = PolicyNode(context=context, cli_args=node_args(
            policy_path=str(model), rate_hz=50.0, autostart="true", refill_threshold=1, align_chunks="false",
            max_observation_age_s=0.0))
        assert node.timer.timer_period_ns == 20_000_000
        published: list[list[float]] = []
        statuses: list[Any] = []
        node.pub.publish = lambda msg: published.append(list(msg.position))  # type: ignore[method-assign]
        node.diag_pub.publish = lambda msg: statuses.extend(msg.status)  # type: ignore[method-assign]
        released, entered, returned = threading.Event(), [0], [0]
        infer = node.runner.runner.infer

        def held_infer(*args: Any, **kwargs: Any) -> Any:
            entered[0] += 1
            released.wait(30.0)
            out = infer(*args, **kwargs)
            returned[0] += 1
            return out

        node.runner.runner.infer = held_infer  # type: ignore[method-assign]
        state = JointState(name=list(reversed(JOINT_NAMES)), position=list(reversed(Q)))
        node._on_joint_state(state)

        def ticked_until(done: Callable[[], bool]) -> bool:
            node._on_tick()
            return done()

        def tick_until(done: Callable[[], bool]) -> bool:
            return wait_for(partial(ticked_until, done), 10.0, 0.001)

        released.set()
        assert tick_until(lambda: len(published) >= 1), "no first action"
        released.clear()
        assert tick_until(lambda: entered[0] == 2), "the next inference was never asked for"
        before = len(published)
        for _ in range(25):
            node._on_tick()
        assert len(published) == before + 25, "a tick published nothing while the model ran"
        assert returned[0] == 1, "a tick waited for the model"
        assert published[-20:] == [published[-1]] * 20, "the last action is not held"
        node._publish_diagnostics()
        late = [s for s in statuses if s.message.startswith("inference late")]
        assert late and int({kv.key: kv.value for kv in late[-1].values}["missed_ticks"]) >= 20

        released.set()
        assert tick_until(lambda: returned[0] == 2 and published[-1] != published[-2]), "no new chunk"
        for _ in range(5):
            node._on_tick()
        # whole chunks play (align_chunks off): measured state + 1..5 steps of 1°
        positions = np.array(published)
        assert positions[:, 0].min() == pytest.approx(Q[0] + np.radians(1.0), abs=1e-6)
        assert positions[:, 0].max() == pytest.approx(Q[0] + np.radians(5.0), abs=1e-6)
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def test_a_chunking_policy_publishes_its_upcoming_actions(tmp_path):
    """Offset policy, 5-action chunks at 50 Hz: each fresh command comes with the actions that follow it."""
    model = make_offset_onnx(tmp_path / "offset.onnx", chunk_size=5, rate_hz=50)
    client = Client()
    proc = NodeProcess(MODULE, node_args(policy_path=str(model), rate_hz=50.0, autostart="true",
                                         refill_threshold=0, align_chunks="false"))
    try:
        proc.start()
        wait_ready(proc, client, timeout=30.0)
        assert wait_for(lambda: len(client.chunks) >= 10, 20.0), f"no action chunks:\n{proc.output()}"
        with client.lock:
            chunks, commands = list(client.chunks), {_stamp(m): m for _, m in client.commands}
        for chunk in chunks:
            assert list(chunk.joint_names) == list(JOINT_NAMES)
            times = [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in chunk.points]
            assert times == pytest.approx([i / 50.0 for i in range(len(chunk.points))])
            pan = np.array([p.positions[0] for p in chunk.points])
            # action j of a chunk is the state + (j + 1)° on the pan joint: the rest of the chunk, in order
            assert 1 <= len(pan) <= 5 and np.diff(pan) == pytest.approx(np.radians(1.0), abs=1e-5)
            assert pan[-1] == pytest.approx(Q[0] + np.radians(5.0), abs=1e-4)
        for chunk in chunks[5:]:  # (once both subscriptions are matched) stamped with the command it starts with
            command = commands[_stamp(chunk)]
            assert list(chunk.points[0].positions) == pytest.approx(list(command.position))
        assert {len(c.points) for c in chunks} == {1, 2, 3, 4, 5}
    finally:
        client.close()
        proc.stop()


def test_a_single_step_policy_publishes_no_chunks(tmp_path):
    model = make_offset_onnx(tmp_path / "single.onnx", chunk_size=1, rate_hz=50)
    client = Client()
    proc = NodeProcess(MODULE, node_args(policy_path=str(model), rate_hz=50.0, autostart="true"))
    try:
        proc.start()
        wait_ready(proc, client, timeout=30.0)
        assert wait_for(lambda: client.count() >= 20, 20.0), f"no commands:\n{proc.output()}"
        assert client.node.count_publishers("/policy/action_chunk") == 0 and not client.chunks
    finally:
        client.close()
        proc.stop()


def _stamp(msg: JointState | JointTrajectory) -> tuple[int, int]:
    return msg.header.stamp.sec, msg.header.stamp.nanosec


def test_node_exits_with_a_clear_error(tmp_path):
    model = make_offset_onnx(tmp_path / "img.onnx", chunk_size=2, image_shape=(3, 8, 8))
    for params, expected in (
        ({"policy_path": str(tmp_path / "missing")}, "does not exist"),
        ({"policy_path": str(model)}, "needs camera image(s) ['observation.images.front']"),
    ):
        proc = NodeProcess(MODULE, node_args(**params)).start()
        try:
            assert wait_for(partial(_exited, proc), 30.0), "node kept running"
            assert proc.process.returncode == 1
            assert expected in proc.output(), proc.output()
        finally:
            proc.stop()


def _exited(process: NodeProcess) -> bool:
    return not process.alive()
