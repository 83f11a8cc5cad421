"""One small simulated fleet per test session, its catalogue and its in-process pipeline output,
shared (read-only) by the tests of every step."""

from __future__ import annotations

from pathlib import Path

import pytest
from small_fleet import SMALL_FLEET

from so101_fleet.catalog import build_catalog, write_catalog
from so101_fleet.episode_job import ProcessConfig
from so101_fleet.process import process_fleet, tasks_from_catalog
from so101_fleet.simulate import simulate_fleet


@pytest.fixture(scope="session")
def small_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fleet") / "fleet"
    simulate_fleet(root, SMALL_FLEET)
    return root


@pytest.fixture(scope="session")
def fleet_catalog(small_fleet: Path) -> Path:
    return write_catalog(build_catalog([small_fleet]), small_fleet.parent / "catalog.parquet")


@pytest.fixture(scope="session")
def processed_fleet(fleet_catalog: Path) -> Path:
    """The whole small fleet replayed, paired and analysed in process (``--workers 1``)."""
    import pyarrow.parquet as pq

    out = fleet_catalog.parent / "dataset"
    report = process_fleet(tasks_from_catalog(pq.read_table(fleet_catalog)), out, ProcessConfig(), workers=1)
    assert report.done == SMALL_FLEET.arms * SMALL_FLEET.episodes and not report.errors, report.errors
    return out
