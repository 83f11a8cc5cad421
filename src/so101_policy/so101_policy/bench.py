"""Policy benchmarks (``so101 bench``): tiny-ACT inference latency, a policy server's chunk, the control-tick cost.

- ``policy.act_inference_ms``: :meth:`PolicyRunner.infer` on the tiny ACT (rad in → unit conversion →
  LeRobot pre-processor → ``predict_action_chunk`` → post-processor → rad out), median per call;
  baseline: the bare ``predict_action_chunk`` on an already pre-processed batch, same model, same run
  (the ratio shows what the wrapping costs).
- ``policy.server_chunk_ms``: one chunk from LeRobot's own ``PolicyServer`` (a child process on this machine,
  ``--inference_latency=0``) through the policy-server backend: rad in → LeRobot units → pickled
  ``TimedObservation`` over gRPC → the server's pre-processor, ACT, post-processor → ``TimedAction`` list
  back → rad out, median per chunk; baseline: the in-process LeRobot backend on the same checkpoint and
  observation, same run, one torch thread on both sides. ``value − baseline`` is what the server adds per
  chunk on loopback (serialisation, gRPC, the server's bookkeeping); a network adds its round trip.
- ``policy.tick_us``: one control tick of the node's timer path (``AsyncPolicyRunner.tick()`` popping a
  queued action + assembling the ``sensor_msgs/JointState``), median; baseline: a bare ``deque.popleft``
  + the same message assembly. Target: 1 ms (a 50 Hz tick has 20 ms).
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from so101_common.bench import BenchResult, time_calls
from so101_common.joints import JOINT_NAMES

__all__ = ["benchmarks"]

Q = np.array([0.1, -0.2, 0.3, -0.4, 0.5, 0.6])


def _median_ms(samples: list[float]) -> float:
    return 1e3 * statistics.median(samples)


def bench_act_inference(workdir: Path, calls: int = 50) -> BenchResult:
    import torch

    from so101_policy.loading import load_policy
    from so101_policy.runner import PolicyRunner
    from so101_policy.tiny import TINY_IMAGE_KEY, make_tiny_act

    model: Any = load_policy(make_tiny_act(workdir / "tiny_act"))  # the ACT backend's policy and preprocessor
    runner = PolicyRunner(model)
    images = {TINY_IMAGE_KEY: np.zeros((32, 32, 3), np.uint8)}
    obs = runner.observation(Q, images)
    batch = {"observation.state": torch.from_numpy(obs.state).unsqueeze(0),
             TINY_IMAGE_KEY: torch.zeros(1, 3, 32, 32), "task": "", "robot_type": ""}
    with torch.inference_mode():
        processed = model.preprocessor(batch)

    def bare() -> None:
        with torch.inference_mode():
            model.policy.predict_action_chunk(processed)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # steadier on a shared machine; restored below
    try:
        for _ in range(5):
            runner.infer(Q, images)
            bare()
        full, baseline = [], []
        for _ in range(calls):  # interleaved, so load from elsewhere hits both alike
            full += time_calls(lambda: runner.infer(Q, images), 1)
            baseline += time_calls(bare, 1)
    finally:
        torch.set_num_threads(threads)
    return BenchResult("policy.act_inference_ms", _median_ms(full), "ms", _median_ms(baseline),
                       "bare ACT predict_action_chunk on a pre-processed batch (same model)", better="lower")


def _start_policy_server(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """LeRobot's PolicyServer in a child process on a free loopback port (one torch thread); waits until it answers."""
    import grpc

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    address = f"127.0.0.1:{port}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    with open(workdir / "policy_server.log", "wb") as log:  # the child keeps its own copy of the file
        server = subprocess.Popen([sys.executable, "-m", "lerobot.async_inference.policy_server",
                                   "--host=127.0.0.1", f"--port={port}", "--inference_latency=0"], cwd=workdir,
                                  env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120.0
    with grpc.insecure_channel(address) as channel:
        while server.poll() is None and time.monotonic() < deadline:
            try:
                grpc.channel_ready_future(channel).result(timeout=1.0)
                return server, address
            except grpc.FutureTimeoutError:
                continue
    server.kill()
    server.wait()
    raise RuntimeError(f"LeRobot's policy server did not answer at {address}: "
                       f"{(workdir / 'policy_server.log').read_text(errors='replace')[-2000:]}")


def bench_policy_server(workdir: Path, calls: int = 30) -> BenchResult:
    import torch

    from so101_policy.backends.policy_server import PolicyServerSettings, connect_policy_server
    from so101_policy.loading import load_policy
    from so101_policy.runner import PolicyRunner
    from so101_policy.tiny import TINY_IMAGE_KEY, make_tiny_act

    policy_dir = make_tiny_act(workdir / "tiny_act")
    images = {TINY_IMAGE_KEY: np.zeros((32, 32, 3), np.uint8)}
    in_process = PolicyRunner(load_policy(policy_dir))
    server, address = _start_policy_server(workdir)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the server's (OMP_NUM_THREADS=1): the difference is the protocol's
    try:
        remote = PolicyRunner(connect_policy_server(
            PolicyServerSettings(address, "act", str(policy_dir), 10, "cpu", timeout_s=60.0), [TINY_IMAGE_KEY]))
        try:
            for step in range(5):  # the first call loads the policy on the server
                remote.infer(Q, images, timestep=step)
                in_process.infer(Q, images)
            served: list[float] = []
            baseline: list[float] = []
            for step in range(calls):  # interleaved, so load from elsewhere hits both alike
                served += time_calls(partial(remote.infer, Q, images, timestep=step), 1)
                baseline += time_calls(partial(in_process.infer, Q, images), 1)
        finally:
            remote.close()
    finally:
        torch.set_num_threads(threads)
        server.terminate()
        server.wait(10.0)
    return BenchResult("policy.server_chunk_ms", _median_ms(served), "ms", _median_ms(baseline),
                       "in-process LeRobot ACT backend (same checkpoint, observation, one torch thread)",
                       better="lower")


def bench_tick(calls: int = 5000) -> BenchResult:
    from sensor_msgs.msg import JointState

    from so101_policy.runner import AsyncPolicyRunner, PolicyRunner
    from so101_policy.spec import PolicySpec

    chunk = 100

    class Instant:
        spec = PolicySpec(kind="bench", source="bench", policy_type="bench", units="rad", chunk_size=chunk,
                          n_action_steps=chunk)

        def predict(self, obs):
            return np.tile(obs.state, (chunk, 1))

        def reset(self):
            pass

    names = list(JOINT_NAMES)

    def assemble(action: np.ndarray) -> JointState:
        msg = JointState()
        msg.header.stamp.sec = 1
        msg.name = names
        msg.position = action.tolist()
        return msg

    with AsyncPolicyRunner(PolicyRunner(Instant()), refill_threshold=chunk - 1, align_chunks=False) as runner:
        runner.set_positions(Q)
        runner.start()

        def tick() -> None:
            result = runner.tick()
            if result.action is not None:
                assemble(result.action)

        # ticks back to back would starve the worker of the GIL (a real tick comes every 20-30 ms):
        # time them in bursts shorter than a chunk and let the worker refill the queue in between
        samples: list[float] = []
        deadline = time.monotonic() + 30.0
        while len(samples) < calls and time.monotonic() < deadline:
            if runner.queue_depth() <= chunk // 2:
                runner.tick()
                time.sleep(0.001)
                continue
            samples += time_calls(tick, chunk // 4)
        fresh = runner.stats().fresh

    queue: deque[np.ndarray] = deque()

    def bare() -> None:
        if not queue:
            queue.extend(np.tile(Q, (chunk, 1)))
        assemble(queue.popleft())

    baseline = time_calls(bare, calls)
    if fresh < len(samples) or len(samples) < calls:
        raise RuntimeError(f"tick benchmark: {fresh} fresh actions, {len(samples)} timed ticks of {calls}")
    return BenchResult("policy.tick_us", 1e3 * _median_ms(samples), "us", 1e3 * _median_ms(baseline),
                       "deque.popleft + JointState assembly", better="lower", target=1000.0)


def benchmarks() -> Iterator[BenchResult]:
    yield bench_tick()
    with tempfile.TemporaryDirectory(prefix="so101_policy_bench_") as tmp:
        yield bench_act_inference(Path(tmp))
    with tempfile.TemporaryDirectory(prefix="so101_policy_server_bench_") as tmp:
        yield bench_policy_server(Path(tmp))


if __name__ == "__main__":
    for result in benchmarks():
        print(result.to_json())
