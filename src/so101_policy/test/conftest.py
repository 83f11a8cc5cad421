"""so101_policy test fixtures: the tiny policies are built once per test session, offline."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_act_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny LeRobot ACT pretrained_model directory (chunk 10, one 32x32 camera image)."""
    from so101_policy.tiny import make_tiny_act

    return make_tiny_act(tmp_path_factory.mktemp("tiny_act") / "pretrained_model", chunk_size=10)
