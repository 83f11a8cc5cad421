"""``docker/compose.ray.yaml``: a Ray head, workers and a driver that find each other, with Ray's own services
off and nothing published on the host (Docker is not available here: checked against the file, against
the installed ``ray start``'s options, and by running the driver's entry script with ``ray`` recording its
arguments). test/test_docker.py cross-checks the images, entrypoints and commands of every compose file."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import yaml

DOCKER = Path(__file__).resolve().parents[3] / "docker"
COMPOSE = DOCKER / "compose.ray.yaml"
DRIVER = DOCKER / "ray_driver.sh"


def _services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def test_ray_compose_profile_head_and_workers() -> None:
    services = _services()
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


def test_the_fleet_driver_joins_the_head_before_its_command() -> None:
    services = _services()
    head, fleet = services["ray-head"], services["fleet"]
    port = next(a.split("=")[1] for a in head["command"] if a.startswith("--port="))
    # the image's entrypoint, then the driver script, then the command compose runs (`run --rm fleet so101 ...`)
    assert fleet["entrypoint"] == ["/entrypoint.sh", "bash", f"/ws/docker/{DRIVER.name}"]
    assert fleet["environment"]["SO101_RAY_HEAD"] == f"{head['hostname']}:{port}"
    assert "--ray-address auto" in " ".join(line.lstrip("# ") for line in COMPOSE.read_text().splitlines())


def _fake_ray(tmp_path: Path, exit_code: int) -> dict[str, str]:
    """PATH with a `ray` that records its arguments in tmp_path/ray.args and exits with exit_code."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    ray = bin_dir / "ray"
    ray.write_text(f'#!/usr/bin/env bash\nprintf "%s\\n" "$@" > "{tmp_path}/ray.args"\nexit {exit_code}\n')
    ray.chmod(ray.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def _driver(env: dict[str, str], *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(DRIVER), *command], env=env, capture_output=True, text=True, check=False)


def test_driver_script_starts_a_node_then_runs_the_command(tmp_path: Path) -> None:
    env = _fake_ray(tmp_path, exit_code=0) | {"SO101_RAY_HEAD": "ray-head:6379"}
    result = _driver(env, "echo", "driver ran")
    assert result.returncode == 0 and result.stdout == "driver ran\n", result.stderr
    assert (tmp_path / "ray.args").read_text().split() == ["start", "--address=ray-head:6379", "--num-cpus=0",
                                                           "--disable-usage-stats"]


def test_driver_script_stops_when_the_node_cannot_join(tmp_path: Path) -> None:
    env = _fake_ray(tmp_path, exit_code=1) | {"SO101_RAY_HEAD": "ray-head:6379"}
    result = _driver(env, "echo", "driver ran")
    assert result.returncode == 1 and "driver ran" not in result.stdout
    env.pop("SO101_RAY_HEAD")
    result = _driver(env, "echo", "driver ran")
    assert result.returncode != 0 and "SO101_RAY_HEAD must name the Ray head" in result.stderr
