"""``so101_bringup`` installs the workspace's launch/, config/ and models/ into share/so101_bringup, and the
code finds them there through the ament index (not through the source tree)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

WORKSPACE = Path(__file__).resolve().parents[3]
SHARED = ("launch", "config", "models")


def _files(root: Path) -> list[str]:
    """Files under ``root``, relative, following symlinked folders (config/gap_profiles is one)."""
    return sorted(os.path.relpath(os.path.join(folder, name), root) for folder, _, names in os.walk(root, followlinks=True)
                  for name in names if "__pycache__" not in folder)


@pytest.mark.slow
def test_pip_install_ships_launch_config_models_found_through_the_ament_index(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"  # a copy: the build never writes into this checkout
    for folder in SHARED:
        shutil.copytree(WORKSPACE / folder, workspace / folder)  # symlinked folders (gap_profiles) copied as files
    shutil.copytree(WORKSPACE / "src" / "so101_bringup", workspace / "src" / "so101_bringup",
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "test"))
    prefix = tmp_path / "prefix"
    # --ignore-installed: pip would otherwise uninstall the environment's own so101_bringup first
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--ignore-installed",
                    "--disable-pip-version-check", "--prefix", str(prefix), str(workspace / "src" / "so101_bringup")],
                   check=True, cwd=tmp_path)
    share = prefix / "share" / "so101_bringup"
    for folder in SHARED:
        assert _files(share / folder) == _files(WORKSPACE / folder), folder
    assert (prefix / "share" / "ament_index" / "resource_index" / "packages" / "so101_bringup").is_file()

    site = sysconfig.get_path("purelib", vars={"base": str(prefix), "platbase": str(prefix)})
    probe = ("import so101_bringup.share as s\n"
             "print(s.__file__); print(s.share_dir()); print(s.config_file('safety.yaml'))\n")
    env = {**os.environ, "PYTHONPATH": site, "AMENT_PREFIX_PATH": str(prefix)}
    out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    module, found, safety = out.stdout.split()
    assert Path(module).is_relative_to(prefix)
    assert Path(found) == share and Path(safety) == share / "config" / "safety.yaml"


def test_a_source_checkout_without_an_ament_prefix_uses_its_own_folders(monkeypatch: pytest.MonkeyPatch) -> None:
    from so101_bringup.share import config_file, launch_dir, share_dir

    monkeypatch.delenv("AMENT_PREFIX_PATH", raising=False)
    assert share_dir() == WORKSPACE
    assert config_file("safety.yaml") == WORKSPACE / "config" / "safety.yaml"
    assert (launch_dir() / "deploy.launch.py").is_file()
    with pytest.raises(FileNotFoundError, match="no config file 'nothing.yaml'"):
        config_file("nothing.yaml")
