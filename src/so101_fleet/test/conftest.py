"""One small simulated fleet per test session, shared by the tests of every step (read-only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from so101_fleet.simulate import FleetConfig, simulate_fleet

SMALL_FLEET = FleetConfig(arms=4, episodes=4, days=8, duration_s=3.0, seed=7)


@pytest.fixture(scope="session")
def small_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fleet") / "fleet"
    simulate_fleet(root, SMALL_FLEET)
    return root
