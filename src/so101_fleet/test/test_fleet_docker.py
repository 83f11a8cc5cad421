"""``docker/compose.ray.yaml``: a Ray head and workers that find each other, with Ray's own services off
and nothing published on the host (Docker is not available here: checked against the file and
against the installed ``ray start``'s options)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parents[3] / "docker" / "compose.ray.yaml"


def test_ray_compose_profile_head_and_workers() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert set(services) == {"ray-head", "ray-worker", "fleet"}
    head, worker = services["ray-head"]["command"], services["ray-worker"]["command"]
    port = next(a.split("=")[1] for a in head if a.startswith("--port="))
    assert f"--address={services['ray-head']['hostname']}:{port}" in worker
    for name, service in services.items():
        assert service["profiles"] == ["ray"] and "ports" not in service, name
        assert service["environment"]["RAY_USAGE_STATS_ENABLED"] == "0"
        assert any(v.endswith(":/data") for v in service["volumes"])
    assert "--include-dashboard=false" in head
    # every option given to `ray start` is one the pinned Ray has
    help_text = subprocess.run([shutil.which("ray") or "ray", "start", "--help"], capture_output=True, text=True,
                               check=True).stdout
    for argument in head[2:] + worker[2:]:
        option = argument.split("=")[0]
        assert re.search(rf"{re.escape(option)}\b", help_text), option
