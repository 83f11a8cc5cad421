"""The policy node against LeRobot's own ``PolicyServer`` (``lerobot.async_inference``) on the CPU.

A module-scoped ``python -m lerobot.async_inference.policy_server`` child serves the tiny ACT (built
offline into a temporary directory; the server loads it offline). The truth for every action is LeRobot
itself: the same checkpoint run here with LeRobot's factory and processors on the same observation in
LeRobot's units (degrees, gripper 0..100), and LeRobot's ``RobotClient`` for chunk aggregation and the
send threshold.
"""

from __future__ import annotations

import io
import os
import pickle
import socket
import threading
from pathlib import Path
from queue import Queue
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from so101_common.joints import GRIPPER, JOINT_NAMES
from so101_policy.backends.policy_server import (
    PolicyServerSettings,
    connect_policy_server,
    read_action_chunk,
)
from so101_policy.deployment import aggregate_function, deploy_policy, refill_threshold_for
from so101_policy.parameters import AGGREGATE_FN_NAMES, PolicyParameters
from so101_policy.runner import AsyncPolicyRunner, PolicyRunner
from so101_policy.spec import PolicyError, PolicyLoadError, PolicyObservation, PolicySpec
from so101_policy.tiny import TINY_IMAGE_KEY
from so101_testing import NodeProcess, wait_for

Q = np.array([0.1, -0.2, 0.3, -0.4, 0.5, 0.6])  # rad, JOINT_NAMES order
IMAGE = (np.arange(32 * 32 * 3) * 7 % 256).astype(np.uint8).reshape(32, 32, 3)  # the policy's own size: no resize


def lerobot_units(q: np.ndarray) -> np.ndarray:
    """Independent reference: degrees for the arm, 0..100 of the gripper's range."""
    out = np.degrees(q)
    out[..., 5] = (q[..., 5] - GRIPPER.lower) / (GRIPPER.upper - GRIPPER.lower) * 100.0
    return out


def rad_from_lerobot(values: np.ndarray) -> np.ndarray:
    out = np.radians(values)
    out[..., 5] = GRIPPER.lower + values[..., 5] / 100.0 * (GRIPPER.upper - GRIPPER.lower)
    return out


def lerobot_chunk(policy_dir: Path, state: np.ndarray, image: np.ndarray) -> np.ndarray:
    """The checkpoint's action chunk for ``state`` (LeRobot units), computed by LeRobot here: (chunk, 6)."""
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors

    policy = ACTPolicy.from_pretrained(str(policy_dir))
    pre, post = make_pre_post_processors(policy.config, pretrained_path=str(policy_dir))
    batch = {"observation.state": torch.tensor(state, dtype=torch.float32)[None],
             TINY_IMAGE_KEY: torch.from_numpy(image).permute(2, 0, 1).float()[None] / 255.0, "task": ""}
    with torch.inference_mode():
        chunk = policy.predict_action_chunk(pre(batch))
        return torch.stack([post(chunk[:, i]) for i in range(chunk.shape[1])], dim=1)[0].double().numpy()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def reachable(address: str) -> bool:
    import grpc

    with grpc.insecure_channel(address) as channel:
        try:
            grpc.channel_ready_future(channel).result(timeout=0.5)
            return True
        except grpc.FutureTimeoutError:
            return False


@pytest.fixture(scope="module")
def policy_server(tmp_path_factory: pytest.TempPathFactory):
    """LeRobot's PolicyServer in a child process (its logs/ folder in a temporary directory); yields host:port."""
    cwd = tmp_path_factory.mktemp("policy_server")
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    server = NodeProcess("lerobot.async_inference.policy_server",
                         ["--host=127.0.0.1", f"--port={port}", "--fps=30", "--inference_latency=0",
                          "--obs_queue_timeout=2"], env=env, cwd=cwd).start()
    address = f"127.0.0.1:{port}"
    try:
        assert wait_for(lambda: reachable(address) or not server.alive(), 120.0, 0.2) and server.alive(), \
            f"LeRobot's policy server did not come up:\n{server.output()}"
        yield SimpleNamespace(address=address, process=server)
    finally:
        server.stop()


def settings(address: str, policy_dir: Path | str, **overrides: Any) -> PolicyServerSettings:
    values: dict[str, Any] = dict(server_address=address, policy_type="act", pretrained_name_or_path=str(policy_dir),
                                  actions_per_chunk=10, policy_device="cpu", timeout_s=30.0, load_timeout_s=60.0)
    return PolicyServerSettings(**(values | overrides))


# ------------------------------------------------------------------------------ the backend, no ROS
@pytest.mark.slow
def test_the_server_computes_the_chunk_lerobot_computes_in_its_units(policy_server, tiny_act_dir):
    model = connect_policy_server(settings(policy_server.address, tiny_act_dir), [TINY_IMAGE_KEY])
    try:
        runner = PolicyRunner(model)
        actions = runner.infer(Q, {TINY_IMAGE_KEY: IMAGE}, timestep=3)
    finally:
        model.close()
    expected = lerobot_chunk(tiny_act_dir, lerobot_units(Q), IMAGE)
    assert actions.shape == (10, 6)
    np.testing.assert_allclose(actions, rad_from_lerobot(expected), atol=1e-4)
    # the check has teeth: the state in rad, or in another joint order, gives another chunk
    for wrong in (Q, lerobot_units(Q)[::-1].copy()):
        assert np.abs(lerobot_chunk(tiny_act_dir, wrong, IMAGE) - expected).max() > 0.5
    assert "Running inference for observation #3 (must_go: True)" in policy_server.process.output()


@pytest.mark.slow
def test_server_side_failures_are_clear_errors(policy_server, tiny_act_dir, tmp_path):
    wrist = "observation.images.wrist"  # a camera the policy does not read: the server fails on it
    model = connect_policy_server(settings(policy_server.address, tiny_act_dir), [TINY_IMAGE_KEY, wrist])
    try:
        with pytest.raises(PolicyError, match="returned no actions for observation #0"):
            model.predict(PolicyObservation(lerobot_units(Q).astype(np.float32),
                                            {TINY_IMAGE_KEY: IMAGE, wrist: IMAGE}))
    finally:
        model.close()
    model = connect_policy_server(settings(policy_server.address, tmp_path / "missing"), [TINY_IMAGE_KEY])
    try:
        with pytest.raises(PolicyError, match="could not load 'act' policy .*missing"):
            model.predict(PolicyObservation(lerobot_units(Q).astype(np.float32), {TINY_IMAGE_KEY: IMAGE}))
    finally:
        model.close()


def test_unreachable_server_and_bad_settings_fail_at_start_up(tmp_path):
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(PolicyLoadError, match=f"no LeRobot policy server answers at {address}"):
        connect_policy_server(settings(address, tmp_path, timeout_s=0.3), [])
    with pytest.raises(PolicyLoadError, match="not host:port"):
        connect_policy_server(settings("gpu-box", tmp_path), [])
    with pytest.raises(PolicyLoadError, match="policy_type 'acts'"):
        connect_policy_server(settings(address, tmp_path, policy_type="acts"), [])
    with pytest.raises(PolicyLoadError, match=r"\['policy_path'\] are for a policy run in this process"):
        deploy_policy(PolicyParameters(server_address=address, policy_path=str(tmp_path)))
    with pytest.raises(PolicyLoadError, match=r"\['policy_type', 'actions_per_chunk'\] are for a LeRobot policy"):
        deploy_policy(PolicyParameters(policy_type="act", actions_per_chunk=10))
    with pytest.raises(PolicyLoadError, match="aggregate_fn_name 'median'"):
        deploy_policy(PolicyParameters(server_address=address, aggregate_fn_name="median"))


# ------------------------------------------------------------------------------ replies are data, never code
class _RunsCode:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


class _HiddenInStorage:
    """Pickles as a tensor storage does (``torch.storage._load_from_bytes``), holding code to run."""

    def __init__(self, marker: Path) -> None:
        buffer = io.BytesIO()
        torch.save(_RunsCode(marker), buffer)
        self.data = buffer.getvalue()

    def __reduce__(self) -> tuple[Any, ...]:
        return (torch.storage._load_from_bytes, (self.data,))


def test_a_reply_is_read_as_actions_and_nothing_else(tmp_path):
    from lerobot.async_inference.helpers import TimedAction

    chunk = [TimedAction(timestamp=1.0, timestep=4 + i, action=torch.arange(6, dtype=dtype) + i)
             for i, dtype in enumerate((torch.float32, torch.bfloat16))]
    read = read_action_chunk(pickle.dumps(chunk))
    assert [a.timestep for a in read] == [4, 5]
    assert [a.action.tolist() for a in read] == [a.action.tolist() for a in chunk]

    marker = tmp_path / "ran"
    with pytest.raises(PolicyError, match="not part of an action chunk"):
        read_action_chunk(pickle.dumps([_RunsCode(marker)]))
    # code hidden in a tensor storage (LeRobot's pickle.loads runs torch.load(weights_only=False) on it)
    with pytest.raises(PolicyError, match="unreadable reply"):
        read_action_chunk(pickle.dumps(_HiddenInStorage(marker)))
    assert not marker.exists()
    with pytest.raises(PolicyError, match="not a list of TimedAction"):
        read_action_chunk(pickle.dumps([TimedAction(1.0, 0, torch.zeros(2, 6))]))


# ------------------------------------------------------------------------------ LeRobot's client semantics
class ScriptedModel:
    """Returns the chunks it is given, one per call, each call waiting for ``release``."""

    def __init__(self, chunks: list[np.ndarray]) -> None:
        self.spec = PolicySpec(kind="test", source="scripted", policy_type="test", units="rad",
                               chunk_size=len(chunks[0]), n_action_steps=len(chunks[0]))
        self.chunks = list(chunks)
        self.release = threading.Semaphore(0)
        self.timesteps: list[int] = []

    def predict(self, obs: PolicyObservation) -> np.ndarray:
        assert self.release.acquire(timeout=10.0)
        self.timesteps.append(obs.timestep)
        return self.chunks.pop(0)

    def reset(self) -> None:
        pass


def lerobot_aggregate(queue: list[Any], latest_action: int, incoming: list[Any], name: str) -> list[Any]:
    """LeRobot's ``RobotClient._aggregate_action_queues`` on a client holding ``queue``, ``latest_action``."""
    from lerobot.async_inference.configs import get_aggregate_function
    from lerobot.async_inference.robot_client import RobotClient

    client = SimpleNamespace(action_queue=Queue(), action_queue_lock=threading.Lock(),
                             latest_action_lock=threading.Lock(), latest_action=latest_action)
    for action in queue:
        client.action_queue.put(action)
    RobotClient._aggregate_action_queues(client, incoming, get_aggregate_function(name))
    return list(client.action_queue.queue)


@pytest.mark.parametrize("name", AGGREGATE_FN_NAMES)
def test_chunks_are_aggregated_as_lerobots_robot_client_does(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # importing LeRobot's robot_client makes a logs/ folder in the working directory
    from lerobot.async_inference.helpers import TimedAction

    rng = np.random.default_rng(0)
    first, second = rng.normal(size=(6, 6)), rng.normal(size=(6, 6))
    model = ScriptedModel([first, second])
    with AsyncPolicyRunner(PolicyRunner(model), refill_threshold=6, aggregate=aggregate_function(name)) as runner:
        runner.set_positions(Q)
        runner.start()
        assert runner.tick().status == "waiting"  # tick 1: the first observation goes out
        model.release.release()
        assert wait_for(lambda: not runner.stats().pending, 10.0)
        played = [runner.tick().action for _ in range(3)]  # ticks 2..4; the second observation left at tick 2
        model.release.release()
        assert wait_for(lambda: not runner.stats().pending, 10.0)
        result = runner.tick()  # tick 5: the second chunk is merged into the queue
    assert model.timesteps == [1, 2]
    np.testing.assert_array_equal(np.array(played), first[1:4])  # action i belongs to tick (observation tick + i)

    # LeRobot: chunk k's action i has timestep (its observation's timestep + i); timesteps 1..4 were played
    timed = [[TimedAction(0.0, step + i, torch.from_numpy(a)) for i, a in enumerate(chunk)]
             for step, chunk in ((1, first), (2, second))]
    expected = lerobot_aggregate(timed[0][4:], 4, timed[1], name)
    assert result.chunk is not None
    np.testing.assert_allclose(result.chunk, np.stack([a.get_action().numpy() for a in expected]), atol=1e-12)


def test_chunk_size_threshold_sends_when_lerobots_client_would():
    from lerobot.async_inference.robot_client import RobotClient

    for chunk in (1, 3, 10, 50):
        for threshold in (0.0, 0.1, 0.29, 0.3, 0.5, 0.7, 1.0):
            refill = refill_threshold_for(threshold, chunk)
            for depth in range(chunk + 1):
                client = SimpleNamespace(action_queue=SimpleNamespace(qsize=lambda d=depth: d),
                                         action_queue_lock=threading.Lock(), action_chunk_size=chunk,
                                         _chunk_size_threshold=threshold)
                assert (depth <= refill) == RobotClient._ready_to_send_observation(client), (chunk, threshold, depth)


# ------------------------------------------------------------------------------ the node over DDS
@pytest.mark.slow
def test_policy_node_plays_the_servers_chunks_on_policy_joint_command(policy_server, tiny_act_dir):
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from sensor_msgs.msg import Image, JointState

    context = Context()
    rclpy.init(context=context)
    node = Node("policy_server_test", context=context)
    commands: list[JointState] = []
    node.create_subscription(JointState, "/policy/joint_command", commands.append, 50)
    states = node.create_publisher(JointState, "/joint_states", 10)
    camera = node.create_publisher(Image, "/test_cam/image_raw", 10)

    def publish() -> None:
        msg = JointState(name=list(reversed(JOINT_NAMES)), position=list(reversed(Q)))  # any order
        msg.header.stamp = node.get_clock().now().to_msg()
        states.publish(msg)
        camera.publish(Image(height=32, width=32, encoding="rgb8", step=96, data=IMAGE.tobytes()))

    node.create_timer(0.02, publish)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    params = dict(server_address=policy_server.address, policy_type="act",
                  pretrained_name_or_path=str(tiny_act_dir), policy_device="cpu", actions_per_chunk=10,
                  chunk_size_threshold=0.5, aggregate_fn_name="latest_only", rate_hz=30.0, autostart="true",
                  image_topics="['front=/test_cam/image_raw']", server_timeout_s=30.0)
    args = ["--ros-args", *[item for key, value in params.items() for item in ("-p", f"{key}:={value}")]]
    proc = NodeProcess("so101_policy.policy_node", args).start()
    try:
        assert wait_for(lambda: len(commands) >= 40 or not proc.alive(), 120.0, 0.1) and proc.alive(), \
            f"no commands from the policy node:\n{proc.output()}"
    finally:
        proc.stop()
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
        spinner.join(5.0)
    chunk = rad_from_lerobot(lerobot_chunk(tiny_act_dir, lerobot_units(Q), IMAGE))
    for msg in commands[:40]:
        assert list(msg.name) == list(JOINT_NAMES)
        # every command is an action of the chunk LeRobot computes for this observation (action 0 belongs
        # to the tick the observation was taken at: already past when the chunk arrives)
        distance = np.abs(chunk[1:] - np.asarray(msg.position)).max(axis=1)
        assert distance.min() < 1e-4, f"{list(msg.position)} is none of the server's actions:\n{chunk}"
    assert "policy act (policy_server)" in proc.output()
