"""Cross-process: the compensator node (child process, shipped model) against a real rclpy peer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger

from so101_common.joints import JOINT_NAMES
from so101_gaponet.model_file import load_model
from so101_testing import NodeProcess, wait_for

SHIPPED_MODEL = Path(__file__).resolve().parents[3] / "models" / "gaponet_so101_default.onnx"  # the workspace's models/: tests run from the source tree


@pytest.fixture()
def peer():
    rclpy.init()
    node = rclpy.create_node("gaponet_test_peer")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    yield node, executor
    node.destroy_node()
    rclpy.shutdown()


def _msg(values: np.ndarray) -> JointState:
    msg = JointState()
    msg.name = list(JOINT_NAMES)
    msg.position = [float(v) for v in values]
    return msg


def test_node_compensates_within_bounds_and_passes_through_when_disabled(peer) -> None:
    node, executor = peer
    bounds = np.array(load_model(SHIPPED_MODEL).metadata.delta_bounds) * 0.1  # override: tighter than the model's
    outputs: list[JointState] = []
    diagnostics: list[DiagnosticArray] = []
    node.create_subscription(JointState, "/gaponet/joint_command", outputs.append, 10)
    node.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 10)
    commands = node.create_publisher(JointState, "/policy/joint_command", 10)
    states = node.create_publisher(JointState, "/joint_states", 10)
    enable = node.create_client(SetBool, "/gaponet_compensator/enable")
    # Overrides: tighter bounds, no smoothing and a slew limit above the bounds (the rate cap's 0.1 rad/step at
    # 50 Hz), so the first compensated output already sits at the bound (with the model's own smoothing and slew
    # limit it would ramp up).
    args = ["--ros-args", "-p", f"model_path:={SHIPPED_MODEL}", "-p", "diagnostics_period:=0.2",
            "-p", f"delta_bounds:=[{','.join(f'{b:.6f}' for b in bounds)}]", "-p", "delta_smoothing_s:=0.0",
            "-p", "delta_slew_limit:=[0.1, 0.1, 0.1, 0.1, 0.1, 0.1]"]

    def spin_until(predicate, timeout: float = 20.0) -> bool:
        return wait_for(lambda: executor.spin_once(timeout_sec=0.01) or predicate(), timeout=timeout, interval=0.0)

    with NodeProcess("so101_gaponet.compensator_node", args) as proc:
        assert spin_until(lambda: commands.get_subscription_count() > 0 and enable.service_is_ready()), proc.output()
        measured = np.array([0.0, -0.2, 0.3, 0.1, 0.0, 0.2])
        command = measured + 0.05  # the policy asks for a move: the model should lead it

        def step() -> None:
            states.publish(_msg(measured))
            executor.spin_once(timeout_sec=0.005)
            commands.publish(_msg(command))

        def compensated_output() -> bool:
            step()
            return bool(outputs) and not np.allclose(outputs[-1].position, command)

        assert spin_until(compensated_output), proc.output()
        out = outputs[-1]
        assert list(out.name) == list(JOINT_NAMES)
        delta = np.array(out.position) - command
        assert np.all(np.abs(delta) <= bounds + 1e-6) and np.abs(delta).max() > 0
        assert np.any(np.isclose(np.abs(delta), bounds, atol=1e-6))  # a 0.05 rad lead needs more: clipped at the override

        new_episode = node.create_client(Trigger, "/gaponet_compensator/new_episode")
        assert spin_until(new_episode.service_is_ready)
        episode = new_episode.call_async(Trigger.Request())
        assert spin_until(episode.done) and episode.result().success

        future = enable.call_async(SetBool.Request(data=False))
        assert spin_until(future.done) and future.result().success
        outputs.clear()

        def passthrough_output() -> bool:
            step()
            return bool(outputs) and np.allclose(outputs[-1].position, command, atol=0, rtol=0)

        assert spin_until(passthrough_output), proc.output()
        assert spin_until(lambda: any(s.values and dict((v.key, v.value) for v in s.values).get("mode") == "disabled"
                                      for d in diagnostics for s in d.status))
        status = {v.key: v.value for v in diagnostics[-1].status[0].values}
        assert status["model_kind"] == "joint_mlp" and float(status["latency_p99_us"]) > 0
        assert proc.alive()
    assert proc.process.returncode == 0, proc.output()


def test_node_refuses_a_model_that_does_not_fit() -> None:
    args = ["--ros-args", "-p", f"model_path:={SHIPPED_MODEL}", "-p", "rate_hz:=100.0"]
    with NodeProcess("so101_gaponet.compensator_node", args) as proc:
        assert wait_for(lambda: not proc.alive(), timeout=30)
        assert proc.process.returncode != 0
        assert "node runs at 100.0 Hz" in proc.output()


def test_node_refuses_a_model_that_asks_for_more_than_the_deployment_caps(adversarial_onnx) -> None:
    path = adversarial_onnx(1e30)  # issue 19: metadata delta_bounds 1e30, 0 on the all-zero probe, 1e9 otherwise
    config = SHIPPED_MODEL.parents[1] / "config" / "compensator.yaml"
    args = ["--ros-args", "--params-file", str(config), "-p", f"model_path:={path}"]
    with NodeProcess("so101_gaponet.compensator_node", args) as proc:
        assert wait_for(lambda: not proc.alive(), timeout=30)
        assert proc.process.returncode == 1
    errors = [line for line in proc.output().splitlines() if "error" in line]
    assert errors == [f"gaponet_compensator: error: {path}: delta_bounds: shoulder_pan asks for |Δ| up to 1e+30 rad, "
                      "above the deployment's cap max_delta 0.3 rad (a model file may narrow a bound, never widen it)"]


def test_a_model_whose_delta_leaves_its_bounds_is_counted_on_diagnostics(adversarial_onnx) -> None:
    from rclpy.context import Context
    from rclpy.parameter import Parameter

    from so101_gaponet.compensator_node import CompensatorNode

    path = adversarial_onnx(0.1)  # within the caps, but asks for 1e9 rad everywhere except the all-zero input
    context = Context()
    rclpy.init(context=context)
    try:
        node = CompensatorNode(context=context, parameter_overrides=[
            Parameter("model_path", value=str(path)), Parameter("diagnostics_period", value=0.05)])
        peer = rclpy.create_node("bounds_peer", context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        executor.add_node(peer)
        diagnostics: list[DiagnosticArray] = []
        outputs: list[JointState] = []
        peer.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 10)
        peer.create_subscription(JointState, "gaponet/joint_command", outputs.append, 10)
        states = peer.create_publisher(JointState, "joint_states", 10)
        commands = peer.create_publisher(JointState, "policy/joint_command", 10)
        command = np.full(6, 0.3)

        def counted() -> bool:
            states.publish(_msg(command * 0.9))
            commands.publish(_msg(command))
            executor.spin_once(timeout_sec=0.01)
            values = [{v.key: v.value for v in s.values} | {"level": s.level} for d in diagnostics for s in d.status]
            return bool(values) and int(values[-1]["model_out_of_bounds_steps"]) >= 3

        assert wait_for(counted, timeout=20, interval=0.0)
        last = diagnostics[-1].status[0]
        values = {v.key: v.value for v in last.values}
        assert last.level == DiagnosticStatus.WARN and "leaves its bounds" in last.message
        assert "beyond its bounds on 12 of 13 probe inputs" in values["load_probe"]
        assert np.abs(np.array(outputs[-1].position) - command).max() <= 0.1 + 1e-9  # clipped to its bounds
        executor.shutdown()
        peer.destroy_node()
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def test_node_composes_in_process_with_the_shipped_yaml() -> None:
    from rclpy.context import Context
    from rclpy.parameter import Parameter

    from so101_gaponet.compensator_node import CompensatorNode

    config = SHIPPED_MODEL.parents[1] / "config" / "compensator.yaml"
    context = Context()
    rclpy.init(context=context)
    try:
        node = CompensatorNode(context=context, cli_args=["--ros-args", "--params-file", str(config)],
                               parameter_overrides=[Parameter("model_path", value=str(SHIPPED_MODEL))])
        assert node.core.model is not None and node.core.status()["mode"] == "compensating"
        meta = load_model(SHIPPED_MODEL).metadata
        np.testing.assert_allclose(node.core.delta_bounds, meta.delta_bounds)
        assert node.core.delta_slew_limit is not None and meta.delta_slew_limit is not None
        np.testing.assert_allclose(node.core.delta_slew_limit, meta.delta_slew_limit)
        assert node.core.delta_smoothing_s == meta.delta_smoothing_s
        assert node.core.future_steps == meta.future_steps > 1
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def test_the_action_chunk_reaches_the_model_rows() -> None:
    """In process: a chunk message becomes the upcoming command rows the core is given."""
    from rclpy.context import Context
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from so101_gaponet.compensator_node import CompensatorNode

    context = Context()
    rclpy.init(context=context)
    try:
        node = CompensatorNode(context=context, cli_args=["--ros-args", "-p", f"model_path:={SHIPPED_MODEL}"])
        seen: list[np.ndarray | None] = []
        original = node.core.compensate

        def recording_compensate(command, now=None, upcoming=None):
            seen.append(upcoming)
            return original(command, now, upcoming)

        node.core.compensate = recording_compensate  # type: ignore[method-assign]
        chunk = JointTrajectory()
        chunk.header.stamp = node.get_clock().now().to_msg()
        chunk.joint_names = list(reversed(JOINT_NAMES))  # any order: matched by name
        for k in range(20):
            chunk.points.append(JointTrajectoryPoint(positions=[0.01 * k] * 6,
                                                     time_from_start=rclpy.duration.Duration(seconds=0.02 * k).to_msg()))
        node._on_chunk(chunk)
        node._on_command(_msg(np.zeros(6)))
        rows = seen[-1]
        assert rows is not None and rows.shape == (node.core.future_steps - 1, 6)
        # the chunk sampled one and more periods (20 ms) after the step: about 0.01 rad per period
        np.testing.assert_allclose(np.diff(rows[:, 0]), 0.01, atol=2e-3)
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def test_a_joint_state_reaches_the_core_stamped_when_the_servos_sampled_it() -> None:
    """In process: the core places its history rows by the joint state's header stamp (the driver's: when the
    servos sampled it), not by when the message arrived; no stamp, or one ahead of the node's clock, is now."""
    from rclpy.context import Context

    from so101_gaponet.compensator_node import CompensatorNode

    context = Context()
    rclpy.init(context=context)
    try:
        node = CompensatorNode(context=context, cli_args=["--ros-args", "-p", f"model_path:={SHIPPED_MODEL}"])
        node._now = lambda: 100.0  # type: ignore[method-assign]
        stamps: list[float | None] = []
        original = node.core.update_measured

        def recording_update(position, velocity=None, stamp=None, effort=None):
            stamps.append(stamp)
            return original(position, velocity, stamp, effort)

        node.core.update_measured = recording_update  # type: ignore[method-assign]
        for sec, nanosec in ((99, 985_000_000), (0, 0), (100, 500_000_000)):
            msg = _msg(np.zeros(6))
            msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nanosec
            node._on_state(msg)
        assert stamps == [pytest.approx(99.985), 100.0, 100.0]
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def _drive(arrivals: list[float], until: float) -> list[tuple[float, float]]:
    """In process, on a simulated clock: the node gets a command (value = its index) at each of ``arrivals`` (s)
    and its timer fires one period after its last reset and every period after that; returns each step's
    ``(time, command value)``."""
    from rclpy.context import Context

    from so101_gaponet.compensator_node import CompensatorNode

    context = Context()
    rclpy.init(context=context)
    try:
        node = CompensatorNode(context=context, cli_args=["--ros-args", "-p", f"model_path:={SHIPPED_MODEL}"])
        period = node.period
        clock = {"now": 0.0, "tick": period}
        steps: list[tuple[float, float]] = []
        original = node.core.compensate

        def recording_compensate(command, now=None, upcoming=None):
            steps.append((clock["now"], float(command[0])))
            return original(command, now, upcoming)

        def reset() -> None:
            clock["tick"] = clock["now"] + period

        node.core.compensate = recording_compensate  # type: ignore[method-assign]
        node._now = lambda: clock["now"]  # type: ignore[method-assign]
        node._step_timer.reset = reset  # type: ignore[method-assign]
        queue = list(arrivals)
        while clock["tick"] <= until or queue:
            if queue and queue[0] <= clock["tick"]:
                clock["now"] = queue.pop(0)
                node._on_command(_msg(np.full(6, float(len(arrivals) - len(queue) - 1))))
            else:
                clock["now"] = clock["tick"]
                clock["tick"] += period
                node._on_tick()
        node.destroy_node()
        return steps
    finally:
        rclpy.shutdown(context=context)


def test_a_policy_at_the_model_rate_is_stepped_on_each_command_as_it_arrives_even_when_late() -> None:
    """A 50 Hz policy whose messages come a little late (1–4 ms after the compensator's tick, as on a loaded
    machine): every command is stepped once, when it arrives; the timer never steps the previous command
    in its place (that delayed every later command by most of a period and dropped some)."""
    rng = np.random.default_rng(0)
    arrivals = list(0.02 * np.arange(100) + rng.uniform(0.001, 0.004, 100))
    steps = _drive(arrivals, until=arrivals[-1])
    assert [value for _, value in steps] == list(range(100))
    np.testing.assert_allclose([t for t, _ in steps], arrivals)


def test_one_late_command_does_not_delay_the_ones_after_it() -> None:
    """A policy at the model's rate with one message 9 ms late: the next one, on time, comes 11 ms after that
    step and is stepped at once too (it waited for the timer before, and so did every one after it: the
    stream stayed 9 ms late)."""
    arrivals = [0.02 * k + (0.009 if k == 10 else 0.001) for k in range(60)]
    steps = _drive(arrivals, until=arrivals[-1])
    assert [value for _, value in steps] == list(range(60))
    np.testing.assert_allclose([t for t, _ in steps], arrivals)


def test_a_slower_policy_gets_fill_in_steps_at_the_model_rate_and_a_faster_one_no_more_than_the_model_rate() -> None:
    slow = _drive(list(np.arange(60) / 30.0), until=2.0)  # 30 Hz into a 50 Hz model: the timer fills in
    assert 90 <= len(slow) <= 105, len(slow)
    fast = _drive(list(np.arange(200) / 100.0), until=2.0)  # 100 Hz: the latest command, once a period
    gaps = np.diff([t for t, _ in fast])
    assert gaps.min() >= 0.75 * 0.02 - 1e-9 and 90 <= len(fast) <= 105, (gaps.min(), len(fast))


def test_a_30_hz_policy_into_a_50_hz_model_gets_50_hz_steps_holding_its_latest_command() -> None:
    """The rate contract on a simulated clock: the compensator steps at the model's rate (50 Hz) whatever the
    policy's rate (30 Hz), each step on the latest command the policy sent."""
    arrivals = list(np.arange(90) / 30.0)
    steps = _drive(arrivals, until=3.0)
    times = np.array([t for t, _ in steps])
    assert abs((len(times) - 1) / (times[-1] - times[0]) - 50.0) < 1.0  # the model's rate, not the policy's
    latest = np.searchsorted(arrivals, times, side="right") - 1
    assert [value for _, value in steps] == latest.tolist()


def test_a_joint_the_guard_shrank_is_a_warning_on_diagnostics_naming_it() -> None:
    from diagnostic_msgs.msg import DiagnosticStatus
    from rclpy.context import Context

    from so101_gaponet.compensator_node import CompensatorNode

    context = Context()
    rclpy.init(context=context)
    try:
        node = CompensatorNode(context=context, cli_args=["--ros-args", "-p", f"model_path:={SHIPPED_MODEL}",
                                                          "-p", "guard:=true"])
        published: list[DiagnosticArray] = []
        node._diag.publish = published.append  # type: ignore[method-assign,assignment]
        node._publish_diagnostics()
        assert published[-1].status[0].level == DiagnosticStatus.OK
        assert {v.key: v.value for v in published[-1].status[0].values}["guard"] == "on"
        guard = node.core.guard
        assert guard is not None
        guard.scale[3] = 0.25  # what DeltaGuard does to a joint whose Δ made its tracking worse
        node._publish_diagnostics()
        status = published[-1].status[0]
        assert status.level == DiagnosticStatus.WARN and "guard" in status.message and "wrist_flex" in status.message
        assert {v.key: v.value for v in status.values}["guard_scale"] == str([1.0, 1.0, 1.0, 0.25, 1.0, 1.0])
        # the guard judges Δ by the goals the arm got: it listens to the safety filter's output
        assert "/joint_command" in {sub.topic_name for sub in node.subscriptions}
        node.destroy_node()
        off = CompensatorNode(context=context, cli_args=["--ros-args", "-p", f"model_path:={SHIPPED_MODEL}"])
        assert off.core.guard is None  # opt-in and off.core.status()["guard"] == "off"
        # so does any node with a model: the core keeps its output within the commands where the filter holds a goal
        assert "/joint_command" in {sub.topic_name for sub in off.subscriptions}
        off.destroy_node()
        bare = CompensatorNode(context=context)  # no model: each command passes through, no goal to read
        assert "/joint_command" not in {sub.topic_name for sub in bare.subscriptions}
        bare.destroy_node()
    finally:
        rclpy.shutdown(context=context)
