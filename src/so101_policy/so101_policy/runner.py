"""Run a loaded policy: radians in, radians out, chunks served from a queue, inference off the control tick.

No rclpy here.

- :class:`PolicyRunner`: the synchronous interface. ``infer(positions_rad, images, task)`` → actions
  ``(n, 6)`` in rad, :data:`~so101_common.joints.JOINT_NAMES` order. Unit and order conversion
  (LeRobot degrees / gripper 0..100 ↔ rad) happens here, at this boundary only.
- :class:`AsyncPolicyRunner`: wraps a :class:`PolicyRunner` with a worker thread and an action queue.
  The control loop calls :meth:`~AsyncPolicyRunner.tick` at its rate; each tick pops the next queued
  action (cheap, never waits for the model). When the queue holds ``refill_threshold`` actions or fewer,
  an inference is requested with the latest observation; the worker runs it and the next tick swaps
  the new chunk in, first dropping the actions whose time already passed while the model ran (the chunk
  is aligned to the tick its observation was taken at). With an ``aggregate`` function, each new action
  that falls on a tick the queue already holds an action for is ``aggregate(queued, new)`` (LeRobot's
  async-inference aggregation: ``lerobot.async_inference.configs.AGGREGATE_FUNCTIONS``); without one the
  new chunk replaces the queue (LeRobot's ``latest_only``). If the queue is empty because inference is
  late, the tick holds the last action (``on_miss="hold"``) or returns none (``on_miss="none"``) and
  counts a miss: a slow model lowers the action quality, never the tick rate. A runner that serves chunks
  (more than one action per inference) also hands out, with each fresh action, the chunk's rest:
  :attr:`TickResult.chunk` = this tick's action followed by the queued ones, one per coming tick.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from so101_common.joints import JOINT_NAMES, JointSpecError
from so101_policy.spec import ClosablePolicyModel, PolicyModel, PolicyObservation, PolicySpec

__all__ = ["PolicyRunner", "AsyncPolicyRunner", "TickResult", "RunnerStats", "ON_MISS", "Aggregate"]

LOG = logging.getLogger(__name__)

ON_MISS = ("hold", "none")

Aggregate = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""``aggregate(queued, new)`` → the action played on a tick both a queued and a new chunk cover (rad)."""


class PolicyRunner:
    """Synchronous inference: joint positions (rad) + optional images → actions (rad).

    ``images`` maps feature keys (``observation.images.<cam>``) to HxWx3 uint8 RGB arrays;
    they are resized to the trained size if needed. ``task`` is passed to language-conditioned policies.
    """

    def __init__(self, model: PolicyModel, task: str = "", configured_images: Sequence[str] | None = None) -> None:
        self.model = model
        self.spec: PolicySpec = model.spec
        self.task = task
        if configured_images is not None:
            self.spec.require_images(list(configured_images))

    def observation(self, positions_rad: Sequence[float] | np.ndarray,
                    images: Mapping[str, np.ndarray] | None = None, task: str | None = None,
                    timestep: int = 0) -> PolicyObservation:
        q = np.asarray(positions_rad, dtype=np.float64)
        if q.shape != (len(JOINT_NAMES),):
            raise JointSpecError(f"expected {len(JOINT_NAMES)} joint positions (rad, {list(JOINT_NAMES)}), "
                                 f"got shape {q.shape}")
        if not np.all(np.isfinite(q)):
            raise ValueError(f"joint positions must be finite, got {q.tolist()}")
        return PolicyObservation(state=self.spec.state_from_rad(q), images=dict(images or {}),
                                 task=self.task if task is None else task, timestep=timestep)

    def infer(self, positions_rad: Sequence[float] | np.ndarray, images: Mapping[str, np.ndarray] | None = None,
              task: str | None = None, timestep: int = 0) -> np.ndarray:
        """Actions ``(n, 6)``, rad, ``JOINT_NAMES`` order (n = the policy's ``n_action_steps`` or fewer);
        ``timestep``: the control tick the observation was taken at (action 0 belongs to it)."""
        actions = self.model.predict(self.observation(positions_rad, images, task, timestep))
        out = self.spec.actions_to_rad(actions)
        if not np.all(np.isfinite(out)):
            raise FloatingPointError(f"policy {self.spec.source} produced non-finite actions")
        return out

    def reset(self) -> None:
        self.model.reset()

    def close(self) -> None:
        """Release what the model holds open (a policy server's connection); a no-op for in-process models."""
        if isinstance(self.model, ClosablePolicyModel):
            self.model.close()


@dataclass(frozen=True)
class TickResult:
    """What one control tick yields.

    ``status``: ``fresh`` (a queued action), ``held`` (queue empty, inference late: last action held),
    ``missed`` (same, but on_miss="none": nothing to publish), ``waiting`` (running, no action produced
    yet: first inference or no observation), ``stopped``.
    """

    action: np.ndarray | None  # (6,) rad, JOINT_NAMES order
    status: str
    queue_depth: int
    # (k, 6) rad: ``action`` then the actions queued for the next k − 1 ticks; only for a fresh action of a
    # runner that serves chunks (None for held/missed ticks and single-step policies)
    chunk: np.ndarray | None = None


@dataclass(frozen=True)
class RunnerStats:
    running: bool
    ticks: int
    fresh: int
    missed: int  # ticks with an empty queue after the first action (inference late)
    waiting: int  # ticks before the first action of a run
    inferences: int
    errors: int
    dropped_stale: int  # actions dropped because their time passed while the model ran
    queue_depth: int
    pending: bool
    latency_last_ms: float
    latency_p50_ms: float
    latency_p99_ms: float
    latency_max_ms: float
    last_error: str
    observation_age_s: float  # seconds since the last observation (inf: none yet)


class AsyncPolicyRunner:
    """Action queue fed by a worker thread; :meth:`tick` is the control loop's only call.

    Parameters
    ----------
    runner:
        the synchronous :class:`PolicyRunner`.
    n_action_steps:
        actions used per chunk (≤ the policy's ``n_action_steps``; default: the policy's).
    refill_threshold:
        request the next inference when the queue holds this many actions or fewer (default: a quarter
        of ``n_action_steps``, at least 1 when the chunk has more than one action; 0 for single-step;
        ``n_action_steps``: whenever no inference is in flight).
    on_miss:
        ``hold`` the last action or ``none`` when the queue is empty because inference is late.
    align_chunks:
        drop the first k actions of a new chunk when its inference took k ticks.
    aggregate:
        combine a new chunk's action with the queued action for the same tick (``aggregate(queued, new)``);
        None: the new chunk replaces the queue.
    max_observation_age_s:
        do not start an inference on an observation older than this (0 disables the check).
    extra_latency_s:
        sleep this long after each inference (simulates a slow model; tests and demos only).
    clock:
        monotonic seconds; injectable for tests.
    """

    def __init__(self, runner: PolicyRunner, *, n_action_steps: int | None = None, refill_threshold: int | None = None,
                 on_miss: str = "hold", align_chunks: bool = True, aggregate: Aggregate | None = None,
                 max_observation_age_s: float = 0.0,
                 extra_latency_s: float = 0.0, clock: Callable[[], float] = time.monotonic,
                 latency_window: int = 200) -> None:
        if on_miss not in ON_MISS:
            raise ValueError(f"on_miss must be one of {list(ON_MISS)}, got {on_miss!r}")
        spec = runner.spec
        steps = spec.n_action_steps if not n_action_steps else int(n_action_steps)
        if not 1 <= steps <= spec.chunk_size:
            raise ValueError(f"n_action_steps {steps} outside 1..{spec.chunk_size} (the policy's chunk size)")
        if refill_threshold is None or refill_threshold < 0:
            refill_threshold = max(1, steps // 4) if steps > 1 else 0
        if refill_threshold > steps:
            raise ValueError(f"refill_threshold {refill_threshold} must not exceed n_action_steps {steps}")
        self.runner = runner
        self.spec = spec
        self.n_action_steps = steps
        self.serves_chunks = steps > 1
        self.refill_threshold = int(refill_threshold)
        self.on_miss = on_miss
        self.align_chunks = align_chunks
        self.aggregate = aggregate
        self.max_observation_age_s = float(max_observation_age_s)
        self.extra_latency_s = float(extra_latency_s)
        self.clock = clock

        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queue: deque[np.ndarray] = deque()
        self._last_action: np.ndarray | None = None
        self._running = False
        self._closed = False
        self._generation = 0  # bumped by start/stop: results of older requests are discarded
        self._reset_model = True
        self._tick_index = 0
        self._request: tuple[int, int, np.ndarray, dict[str, np.ndarray], str] | None = None
        self._pending = False
        self._result: tuple[int, int, np.ndarray] | None = None  # (generation, tick index, actions)
        self._positions: np.ndarray | None = None
        self._positions_time = -float("inf")
        self._images: dict[str, np.ndarray] = {}
        self._task = runner.task
        self._latencies: deque[float] = deque(maxlen=latency_window)
        self._counts = dict(ticks=0, fresh=0, missed=0, waiting=0, inferences=0, errors=0, dropped_stale=0)
        self._last_error = ""
        self._worker = threading.Thread(target=self._work, name="policy-inference", daemon=True)
        self._worker.start()

    # ------------------------------------------------------------------ inputs (any thread)
    def set_positions(self, positions_rad: Sequence[float] | np.ndarray) -> None:
        """The latest measured joint positions (rad, ``JOINT_NAMES`` order)."""
        q = np.array(positions_rad, dtype=np.float64)
        if q.shape != (len(JOINT_NAMES),):
            raise JointSpecError(f"expected {len(JOINT_NAMES)} joint positions, got shape {q.shape}")
        with self._lock:
            self._positions = q
            self._positions_time = self.clock()

    def set_image(self, key: str, image: np.ndarray) -> None:
        """The latest image of feature ``key`` (HxWx3 uint8 RGB)."""
        with self._lock:
            self._images[key] = image

    def set_task(self, task: str) -> None:
        with self._lock:
            self._task = task

    # ------------------------------------------------------------------ control
    @property
    def running(self) -> bool:
        return self._running

    def start(self) -> None:
        """Start serving actions: empty queue, model reset, first inference on the next tick."""
        with self._lock:
            self._generation += 1
            self._queue.clear()
            self._last_action = None
            self._result = None
            self._reset_model = True
            self._running = True

    def stop(self) -> None:
        """Stop serving: the queue is dropped and a running inference's result is discarded."""
        with self._lock:
            self._generation += 1
            self._queue.clear()
            self._last_action = None
            self._result = None
            if self._request is not None:  # not taken by the worker yet: withdraw it
                self._request = None
                self._pending = False
            self._running = False

    def close(self, timeout: float = 5.0) -> None:
        with self._wake:
            self._closed = True
            self._running = False
            self._wake.notify_all()
        self._worker.join(timeout)
        self.runner.close()

    def __enter__(self) -> AsyncPolicyRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the control tick
    def tick(self) -> TickResult:
        """The action for this control tick; never waits for inference."""
        with self._lock:
            if not self._running:
                return TickResult(None, "stopped", len(self._queue))
            self._counts["ticks"] += 1
            self._tick_index += 1
            self._absorb_result()
            chunk = None
            if self._queue:
                action = self._queue.popleft()
                self._last_action = action
                self._counts["fresh"] += 1
                status = "fresh"
                chunk = np.stack([action, *self._queue]) if self.serves_chunks else None
            elif self._last_action is not None:
                self._counts["missed"] += 1
                if self.on_miss == "hold":
                    action, status = self._last_action, "held"
                else:
                    action, status = None, "missed"
            else:
                self._counts["waiting"] += 1
                action, status = None, "waiting"
            if len(self._queue) <= self.refill_threshold and not self._pending:
                self._request_inference()
            return TickResult(action, status, len(self._queue), chunk)

    def _absorb_result(self) -> None:
        if self._result is None:
            return
        generation, tick_index, actions = self._result
        self._result = None
        if generation != self._generation:
            return
        if self.align_chunks:
            # action i of a chunk belongs to tick (request tick + i), as in LeRobot's async inference;
            # the ticks that went by while the model ran are skipped (at least one action is kept)
            late = max(0, self._tick_index - tick_index)
            drop = min(late, len(actions) - 1)
            actions = actions[drop:]
            self._counts["dropped_stale"] += drop
        if self.aggregate is not None:
            # queue[i] and actions[i] belong to the same tick (this one + i); the queued actions past the
            # new chunk's end are dropped, as LeRobot's RobotClient builds its next queue from the new chunk
            queued = list(self._queue)
            merged = [self.aggregate(queued[i], new) if i < len(queued) else new for i, new in enumerate(actions)]
            actions = np.asarray(merged)
        self._queue.clear()
        self._queue.extend(actions)

    def _request_inference(self) -> None:
        if self._positions is None:
            return
        if self.max_observation_age_s > 0 and self.clock() - self._positions_time > self.max_observation_age_s:
            return
        self._request = (self._generation, self._tick_index, self._positions.copy(), dict(self._images), self._task)
        self._pending = True
        self._wake.notify_all()

    # ------------------------------------------------------------------ worker thread
    def _work(self) -> None:
        while True:
            with self._wake:
                while self._request is None and not self._closed:
                    self._wake.wait()
                request = self._request
                if self._closed or request is None:
                    return
                generation, tick_index, positions, images, task = request
                self._request = None
                reset, self._reset_model = self._reset_model, False
            start = time.perf_counter()
            result: np.ndarray | None = None
            error = ""
            try:
                if reset:
                    self.runner.reset()
                result = self.runner.infer(positions, images, task, tick_index)[: self.n_action_steps]
            except Exception as err:  # a failing model is reported, never kills the worker
                error = f"{type(err).__name__}: {err}"
            latency = time.perf_counter() - start
            if self.extra_latency_s > 0:
                time.sleep(self.extra_latency_s)
                latency = time.perf_counter() - start
            with self._lock:
                self._pending = False
                self._latencies.append(latency)
                if error:
                    self._counts["errors"] += 1
                    if error != self._last_error:
                        LOG.error("policy inference failed: %s", error)
                    self._last_error = error
                else:
                    self._counts["inferences"] += 1
                    if generation == self._generation:
                        self._result = (generation, tick_index, result)  # type: ignore[assignment]

    # ------------------------------------------------------------------ introspection
    def queue_depth(self) -> int:
        with self._lock:
            return len(self._queue)

    def stats(self) -> RunnerStats:
        with self._lock:
            lat = sorted(self._latencies)
            age = self.clock() - self._positions_time if self._positions is not None else float("inf")
            return RunnerStats(
                running=self._running, queue_depth=len(self._queue), pending=self._pending,
                latency_last_ms=1e3 * self._latencies[-1] if lat else float("nan"),
                latency_p50_ms=1e3 * _pct(lat, 50), latency_p99_ms=1e3 * _pct(lat, 99),
                latency_max_ms=1e3 * lat[-1] if lat else float("nan"),
                last_error=self._last_error, observation_age_s=age, **self._counts,
            )

    def describe(self) -> dict[str, Any]:
        return {**self.spec.describe(), "n_action_steps_used": self.n_action_steps,
                "refill_threshold": self.refill_threshold, "on_miss": self.on_miss}


def _pct(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[index]
