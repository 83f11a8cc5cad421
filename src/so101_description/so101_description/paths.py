"""Where the description's files are: URDF, MJCF, meshes, RViz configs.

Resources are found through :mod:`importlib.resources`, so this works from a pip/editable install
and from a colcon install alike (the files ship as package data; setup.py also copies them under
``share/so101_description`` for ``get_package_share_directory`` and ``package://`` URIs).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = [
    "MESH_URI_PREFIX",
    "MJCF_VARIANTS",
    "package_dir",
    "urdf_path",
    "mjcf_path",
    "meshes_dir",
    "rviz_config_path",
    "urdf_text",
]

MESH_URI_PREFIX = "package://so101_description/meshes/"
"""How the URDF names its meshes (resolved by RViz / robot_state_publisher consumers via the ament index)."""

MJCF_VARIANTS: dict[str, str] = {
    "arm": "so101.xml",  # the arm only: bodies, joints, inertials, meshes, collision boxes; no actuators
    "position": "so101_position.xml",  # the arm + one position servo per joint (official STS3215 figures)
    "scene": "scene.xml",  # position arm + light, sky and a non-colliding floor, for viewing
}


def package_dir() -> Path:
    """The installed ``so101_description`` Python package folder (holds urdf/, mjcf/, meshes/, rviz/)."""
    return Path(str(files("so101_description")))


def urdf_path() -> Path:
    """The URDF (meshes as ``package://so101_description/meshes/...``)."""
    return _existing(package_dir() / "urdf" / "so101.urdf")


def mjcf_path(variant: str = "arm") -> Path:
    """An MJCF file; ``variant`` is one of :data:`MJCF_VARIANTS` (default: the arm without actuators).

    Load it by path (``mujoco.MjModel.from_xml_path`` / ``mujoco.MjSpec.from_file``) so the relative
    mesh folder and includes resolve.
    """
    try:
        name = MJCF_VARIANTS[variant]
    except KeyError as err:
        raise ValueError(f"unknown MJCF variant {variant!r}; expected one of {sorted(MJCF_VARIANTS)}") from err
    return _existing(package_dir() / "mjcf" / name)


def meshes_dir() -> Path:
    """The folder of STL meshes (metres)."""
    return _existing(package_dir() / "meshes")


def rviz_config_path(name: str = "so101") -> Path:
    """An RViz2 config: ``so101`` (measured arm) or ``so101_monitor`` (measured + commanded ghost)."""
    return _existing(package_dir() / "rviz" / f"{name}.rviz")


def urdf_text(absolute_mesh_paths: bool = False) -> str:
    """The URDF as text; with ``absolute_mesh_paths`` the ``package://`` mesh URIs become absolute file
    paths, for tools without ROS (MuJoCo, urdf_parser_py users, pinocchio, ...)."""
    text = urdf_path().read_text(encoding="utf-8")
    if absolute_mesh_paths:
        text = text.replace(MESH_URI_PREFIX, meshes_dir().as_posix() + "/")
    return text


def _existing(path: Path) -> Path:
    if not path.exists():
        raise FileNotFoundError(f"so101_description resource missing: {path} (is the package installed with its data?)")
    return path
