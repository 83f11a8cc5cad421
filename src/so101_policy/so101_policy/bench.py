"""Policy benchmarks (``so101 bench``): tiny-ACT inference latency and the control-tick cost.

- ``policy.act_inference_ms``: :meth:`PolicyRunner.infer` on the tiny ACT (rad in → unit conversion →
  LeRobot pre-processor → ``predict_action_chunk`` → post-processor → rad out), median per call;
  baseline: the bare ``predict_action_chunk`` on an already pre-processed batch, same model, same run
  (the ratio shows what the wrapping costs).
- ``policy.tick_us``: one control tick of the node's timer path (``AsyncPolicyRunner.tick()`` popping a
  queued action + assembling the ``sensor_msgs/JointState``), median; baseline: a bare ``deque.popleft``
  + the same message assembly. Target: 1 ms (a 50 Hz tick has 20 ms).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections import deque
from collections.abc import Iterator
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


if __name__ == "__main__":
    for result in benchmarks():
        print(result.to_json())
