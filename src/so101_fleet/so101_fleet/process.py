"""``so101 fleet process``: every catalogued episode through replay → pair → analyse, as Ray tasks.

One Ray task per episode (:func:`so101_fleet.episode_job.process_episode`, ``num_cpus=1``, no
automatic retry: a task whose worker dies is reported as ``worker_died`` and the next run picks it
up). At most ``2 × workers`` tasks are in flight, so the driver holds a bounded number of results
and a worker one episode. ``workers == 1`` runs the same function in this process, without Ray
(debugging, profiling). Episodes already done (their ``summary.json`` exists) are not submitted.

Everything a run learns lands in ``OUT/run_report.json``: counts, throughput, the error of every
failed episode (kind and message, see :data:`~so101_fleet.episode_job.ERROR_KINDS`) and warnings.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from so101_fleet.episode_job import EpisodeOutcome, EpisodeTask, ProcessConfig, is_done, process_episode
from so101_fleet.ray_runtime import ray_session

__all__ = ["RUN_REPORT", "RunReport", "tasks_from_catalog", "process_fleet"]

RUN_REPORT = "run_report.json"
_LOG = logging.getLogger(__name__)
EpisodeFn = Callable[[EpisodeTask, str, ProcessConfig], EpisodeOutcome]


@dataclass
class RunReport:
    catalog: str
    out: str
    mode: str  # "in-process" or "ray (<address>)"
    workers: int
    episodes: int = 0  # catalogued
    done: int = 0  # processed in this run
    skipped: int = 0  # done by an earlier run
    errors: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0  # wall time of the run
    worker_seconds: float = 0.0  # sum of the episodes' time inside the workers (the rest is scheduling and I/O)
    episodes_per_s: float = 0.0  # processed in this run / wall time
    worker_peak_rss_mb: float | None = None  # largest peak resident memory any worker reported
    worker_processes: int = 0  # distinct worker processes that ran episodes
    started: str = ""
    _pids: set[int] = field(default_factory=set, repr=False)

    def add(self, outcome: EpisodeOutcome) -> None:
        self.worker_seconds += outcome.seconds
        if outcome.worker_pid is not None:
            self._pids.add(outcome.worker_pid)
            self.worker_processes = len(self._pids)
        if outcome.status == "done":
            self.done += 1
        elif outcome.status == "skipped":
            self.skipped += 1
        else:
            self.errors.append({"episode_id": outcome.episode_id, "kind": outcome.kind, "message": outcome.message})
        if outcome.warnings:
            self.warnings.append({"episode_id": outcome.episode_id, "warnings": outcome.warnings})
        if outcome.worker_peak_rss_mb is not None:
            self.worker_peak_rss_mb = max(self.worker_peak_rss_mb or 0.0, outcome.worker_peak_rss_mb)

    def error_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for error in self.errors:
            counts[error["kind"]] = counts.get(error["kind"], 0) + 1
        return counts

    def save(self, out: Path) -> Path:
        record = {k: v for k, v in self.__dict__.items() if not k.startswith("_")} | {"error_counts": self.error_counts()}
        path = out / RUN_REPORT
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(record, indent=1))
        tmp.replace(path)
        return path


def tasks_from_catalog(table: pa.Table) -> list[EpisodeTask]:
    """One task per catalogue row, in catalogue order."""
    tasks = []
    for row in table.select(["episode_id", "path", "robot_id", "name", "task", "start_time", "truncated",
                             "duplicate_of"]).to_pylist():
        start = row["start_time"]
        tasks.append(EpisodeTask(episode_id=row["episode_id"], path=row["path"], robot_id=row["robot_id"] or "unknown",
                                 name=row["name"], task=row["task"] or "",
                                 start_time_ns=None if start is None else int(start.value),
                                 truncated=bool(row["truncated"]), duplicate_of=row["duplicate_of"]))
    return tasks


def process_fleet(tasks: Sequence[EpisodeTask], out: Path | str, config: ProcessConfig, *, workers: int | None = None,
                  ray_address: str | None = None, catalog: str = "", progress: Callable[[int, int], None] | None = None,
                  episode_fn: EpisodeFn = process_episode) -> RunReport:
    """Process ``tasks`` into ``out`` (see the module doc); returns (and saves) the run report."""
    out = Path(out).resolve()  # Ray workers do not share the driver's working directory
    out.mkdir(parents=True, exist_ok=True)
    in_process = workers == 1 and ray_address is None
    report = RunReport(catalog=catalog, out=str(out), mode="in-process" if in_process else f"ray ({ray_address or 'local'})",
                       workers=workers or 0, episodes=len(tasks),
                       started=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
    todo = []
    for task in tasks:
        if is_done(out, task) and not task.duplicate_of:
            report.skipped += 1
        else:
            todo.append(task)
    start = time.perf_counter()
    finished = 0

    def record(outcome: EpisodeOutcome) -> None:
        nonlocal finished
        report.add(outcome)
        finished += 1
        if progress is not None:
            progress(finished, len(todo))

    if in_process:
        for task in todo:
            record(episode_fn(task, str(out), config))
    elif todo:
        _run_on_ray(todo, str(out), config, workers, ray_address, episode_fn, record)
    report.seconds = time.perf_counter() - start
    report.episodes_per_s = report.done / report.seconds if report.seconds > 0 else 0.0
    report.save(out)
    return report


def _run_on_ray(todo: Iterable[EpisodeTask], out: str, config: ProcessConfig, workers: int | None,
                ray_address: str | None, episode_fn: EpisodeFn, record: Callable[[EpisodeOutcome], None]) -> None:
    with ray_session(ray_address, cpus=workers) as ray:
        from ray.exceptions import NodeDiedError, RayError, WorkerCrashedError

        remote = ray.remote(num_cpus=1, max_retries=0)(episode_fn)
        slots = 2 * (workers or max(1, int(ray.cluster_resources().get("CPU", 1))))
        queue = deque(todo)
        in_flight: dict[Any, EpisodeTask] = {}
        while queue or in_flight:
            while queue and len(in_flight) < slots:
                task = queue.popleft()
                in_flight[remote.remote(task, out, config)] = task
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            task = in_flight.pop(ready[0])
            try:
                record(ray.get(ready[0]))
            except (WorkerCrashedError, NodeDiedError) as err:
                record(EpisodeOutcome(task.episode_id, "error", "worker_died", _worker_died(err)))
            except RayError as err:  # the task could not run (e.g. its function failed to load on the worker)
                record(EpisodeOutcome(task.episode_id, "error", "internal", _first_line(err)))


def _first_line(err: Exception) -> str:
    """What went wrong in one line: the task's own exception when Ray wraps one, else Ray's message."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {cause}".splitlines()[0]
    lines = [line for line in str(err).splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(err).__name__


def _worker_died(err: Exception) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__
