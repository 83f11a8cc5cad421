"""paths.py finds every resource, in the source tree and from a regular (non-editable) install."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from so101_description import paths

PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def test_every_resource_exists() -> None:
    assert paths.package_dir().is_dir()
    assert paths.urdf_path().name == "so101.urdf"
    assert paths.mjcf_path().name == "so101.xml"
    for variant in paths.MJCF_VARIANTS:
        assert paths.mjcf_path(variant).is_file()
    assert len(list(paths.meshes_dir().glob("*.stl"))) == 13
    assert (paths.meshes_dir() / "NOTICE").is_file() and (paths.meshes_dir() / "LICENSE").is_file()
    assert paths.rviz_config_path().name == "so101.rviz"
    assert paths.rviz_config_path("so101_monitor").is_file()


def test_unknown_names_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown MJCF variant 'nope'"):
        paths.mjcf_path("nope")
    with pytest.raises(FileNotFoundError, match="missing"):
        paths.rviz_config_path("nope")


def test_urdf_text_mesh_paths() -> None:
    assert paths.MESH_URI_PREFIX in paths.urdf_text()
    assert paths.urdf_text() == paths.urdf_text(absolute_mesh_paths=False)
    absolute = paths.urdf_text(absolute_mesh_paths=True)
    assert paths.MESH_URI_PREFIX not in absolute
    assert f'filename="{paths.meshes_dir().as_posix()}/base_so101_v2.stl"' in absolute


@pytest.mark.parametrize("name", ["so101", "so101_monitor"])
def test_rviz_configs_are_rviz2_yaml(name: str) -> None:
    config = yaml.safe_load(paths.rviz_config_path(name).read_text())
    manager = config["Visualization Manager"]
    assert manager["Global Options"]["Fixed Frame"] == "base_link"
    displays = {d["Name"]: d for d in manager["Displays"]}
    models = [d for d in displays.values() if d["Class"] == "rviz_default_plugins/RobotModel"]
    assert models and all(d["Class"].startswith("rviz_default_plugins/") for d in displays.values())
    assert models[0]["Description Topic"]["Value"] == "/robot_description"
    # robot_state_publisher latches robot_description: a volatile subscriber started later sees nothing.
    assert all(m["Description Topic"]["Durability Policy"] == "Transient Local" for m in models)
    if name == "so101_monitor":  # the ghost arm of launch/monitor.launch.py (frame_prefix "commanded/")
        assert displays["Commanded"]["Description Topic"]["Value"] == "/commanded/robot_description"
        assert displays["Commanded"]["TF Prefix"] == "commanded"


@pytest.mark.slow
def test_regular_install_ships_resources_and_share_files(tmp_path: Path) -> None:
    """pip install (not editable) of a copy: package data for importlib.resources, data_files for share/."""
    source = tmp_path / "src"
    shutil.copytree(PACKAGE_ROOT, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "test"))
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "--target", str(target), str(source)], check=True)
    probe = (
        "import mujoco, so101_description, so101_description.paths as p\n"
        "from urdf_parser_py.urdf import URDF\n"
        "print(so101_description.__file__)\n"
        "mujoco.MjModel.from_xml_path(str(p.mjcf_path('scene')))\n"
        "URDF.from_xml_string(p.urdf_text(absolute_mesh_paths=True))\n"
        "assert p.rviz_config_path('so101_monitor').is_file() and (p.meshes_dir() / 'NOTICE').is_file()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    # cwd outside the source tree: "python -c" puts the cwd first on sys.path (colcon test runs in the package)
    out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True,
                         check=True)
    assert Path(out.stdout.strip()).is_relative_to(target)
    share = target / "share" / "so101_description"
    assert (share / "package.xml").is_file()
    assert (target / "share" / "ament_index" / "resource_index" / "packages" / "so101_description").is_file()
    for folder in ("urdf", "mjcf", "meshes", "rviz"):
        shipped = sorted(p.name for p in (paths.package_dir() / folder).iterdir())
        assert sorted(p.name for p in (share / folder).iterdir()) == shipped, folder
