"""Fleet benchmarks (``so101 bench``): catalogue throughput and per-episode processing on Ray, each
beside a baseline measured in the same run.

* ``fleet.index``: episodes catalogued per minute on local disk (metadata and record structure only),
  beside rosbags' own reader opening each bag and counting its messages per topic.
* ``fleet.process_2_workers``: episodes/s (minute-long episodes: :data:`PROCESS_EPISODE_S`) through
  replay → pair → analyse on 2 Ray workers, beside 1
  Ray worker (target: 1.7 × the baseline; on a 2-core machine shared with other work the second core
  is not free, and the figure says so).
* ``fleet.process_ray_overhead``: seconds per episode on 1 Ray worker beside the in-process loop
  (``--workers 1``) on the same episodes (target: ≤ 1.1 × the baseline); ``fleet.process_ray_dispatch``
  is the part of it spent outside the episode function (scheduling, transfer), beside one episode's work.
"""

from __future__ import annotations

import itertools
import logging
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from so101_common.bench import BenchResult
from so101_fleet.catalog import build_catalog
from so101_fleet.episode_job import EpisodeTask, ProcessConfig
from so101_fleet.process import process_fleet, tasks_from_catalog
from so101_fleet.ray_runtime import ray_session
from so101_fleet.simulate import FleetConfig, simulate_fleet

__all__ = ["benchmarks"]

_LOG = logging.getLogger(__name__)
INDEX_COPIES = 400  # bags in the index benchmark (copies of one simulated 6 s episode)
# Fleet episodes are minutes long; with a few seconds per episode the processing figures would
# measure Ray's fixed per-task costs (a few ms), not the pipeline. Each processing run: 16 episodes of
# 60 s (PROCESS_BAGS simulated bags, each processed several times under distinct names).
PROCESS_EPISODE_S = 60.0
PROCESS_BAGS = 2
PROCESS_EPISODES = 16


def benchmarks() -> Iterator[BenchResult]:
    with tempfile.TemporaryDirectory(prefix="so101_fleet_bench_") as tmp:
        work = Path(tmp)
        yield _bench_index(work)
        yield from _bench_process(work)


def _bench_index(work: Path) -> BenchResult:
    [bag] = simulate_fleet(work / "one", FleetConfig(arms=1, episodes=1, duration_s=6.0, seed=1))
    root = work / "many"
    for k in range(INDEX_COPIES):
        shutil.copytree(bag, root / f"arm_{k % 20:03d}" / f"{bag.name}_{k:04d}")
    start = time.perf_counter()
    table = build_catalog([root])
    ours = time.perf_counter() - start
    assert table.num_rows == INDEX_COPIES
    start = time.perf_counter()
    _rosbags_counts(sorted(p.parent for p in root.glob("*/*/metadata.yaml")))
    stock = time.perf_counter() - start
    return BenchResult("fleet.index", INDEX_COPIES / ours * 60, "episodes/min", INDEX_COPIES / stock * 60,
                       "rosbags AnyReader opening each bag and counting its messages per topic", target=20_000)


def _rosbags_counts(bags: list[Path]) -> None:
    from rosbags.highlevel import AnyReader

    for bag in bags:
        with AnyReader([bag]) as reader:
            _ = {c.topic: c.msgcount for c in reader.connections}


def _bench_process(work: Path) -> Iterator[BenchResult]:
    logging.getLogger("so101_sim2real").setLevel(logging.WARNING)  # one INFO line per saved episode
    logging.getLogger("so101_common").setLevel(logging.WARNING)
    bags = simulate_fleet(work / "fleet", FleetConfig(arms=PROCESS_BAGS, episodes=1, duration_s=PROCESS_EPISODE_S, seed=2))
    tasks = _repeated_tasks(tasks_from_catalog(build_catalog(bags)), PROCESS_EPISODES)
    config = ProcessConfig()

    def timed(label: str, workers: int | None) -> tuple[float, float]:
        """(wall, time inside the episode function) of one run over ``tasks``."""
        report = process_fleet(tasks, work / label, config, workers=workers)
        assert report.done == len(tasks) and not report.errors, report.errors
        _LOG.info("%s: %.2f s wall, %.2f s in workers", label, report.seconds, report.worker_seconds)
        return report.seconds, report.worker_seconds

    process_fleet(tasks[:1], work / "warm_in_process", config, workers=1)  # imports and the MuJoCo model
    in_process = timed("in_process", 1)[0] / len(tasks)
    rates, dispatch = {}, 0.0
    for cpus in (1, 2):
        with ray_session(None, cpus=cpus, object_store_mb=100):
            process_fleet(tasks[:2 * cpus], work / f"warm_{cpus}", config)  # start and warm the workers
            wall, busy = timed(f"ray_{cpus}", None)
            rates[cpus] = len(tasks) / wall
            if cpus == 1:
                dispatch = (wall - busy) / len(tasks)
    yield BenchResult("fleet.process_2_workers", rates[2], "episodes/s", rates[1], "1 Ray worker, same episodes",
                      target=1.7 * rates[1])
    yield BenchResult("fleet.process_ray_overhead", 1 / rates[1], "s/episode", in_process,
                      "in-process loop (--workers 1), same episodes", better="lower", target=1.1 * in_process)
    # the part of it that is Ray's: wall time per episode not spent inside the episode function
    yield BenchResult("fleet.process_ray_dispatch", dispatch, "s/episode", in_process,
                      "in-process loop (--workers 1): one episode's work", better="lower", target=0.1 * in_process)


def _repeated_tasks(tasks: list[EpisodeTask], count: int) -> list[EpisodeTask]:
    """``count`` episodes cycling over ``tasks``' bags, each under its own name (its own output folder):
    the same work as ``count`` distinct bags of that length, without simulating them all."""
    return [replace(task, episode_id=f"{task.episode_id}_{k:03d}", name=f"{task.name}_{k:03d}")
            for k, task in zip(range(count), itertools.cycle(tasks), strict=False)]
