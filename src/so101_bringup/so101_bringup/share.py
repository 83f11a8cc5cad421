"""Where ``so101_bringup``'s installed files are: ``config/``, ``launch/`` and ``models/`` (no rclpy).

``setup.py`` installs the workspace's top-level ``config/``, ``launch/`` and ``models/`` folders into
``share/so101_bringup/`` (colcon and pip alike), so they are found through the ament index
(``get_package_share_directory``), as ``FindPackageShare("so101_bringup")`` finds them in launch files.
A source checkout that is not installed into an ament prefix (the development venv, whose editable
installs register no ament index) falls back to the checkout's own folders.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["share_dir", "config_dir", "config_file", "launch_dir", "models_dir", "package_share"]

PACKAGE = "so101_bringup"
_SHARED = ("config", "launch", "models")


def package_share(package: str) -> str:
    """A package's share folder from the ament index.

    Raises ``PackageNotFoundError`` (a ``KeyError``) when it is not installed, ``OSError`` without an
    ``AMENT_PREFIX_PATH``."""
    from ament_index_python.packages import get_package_share_directory

    return str(get_package_share_directory(package))


def share_dir() -> Path:
    """``share/so101_bringup`` of the ament prefix it is installed in, else the source checkout's root."""
    try:
        return Path(package_share(PACKAGE))
    except (LookupError, OSError, ImportError):  # not in the index, no AMENT_PREFIX_PATH, or no ROS at all
        checkout = Path(__file__).resolve().parents[3]  # <checkout>/src/so101_bringup/so101_bringup/share.py
        if all((checkout / name).is_dir() for name in _SHARED):
            return checkout
        raise FileNotFoundError(f"{PACKAGE} is neither installed (no ament index entry) nor run from a source "
                                f"checkout with {', '.join(_SHARED)}/ next to src/ ({checkout})") from None


def config_dir() -> Path:
    return share_dir() / "config"


def config_file(name: str) -> Path:
    """A file under ``config/`` (``safety.yaml``, ``calibration/virtual_follower.json``, ...); must exist."""
    path = config_dir() / name
    if not path.is_file():
        raise FileNotFoundError(f"{PACKAGE}: no config file {name!r} in {config_dir()}")
    return path


def launch_dir() -> Path:
    return share_dir() / "launch"


def models_dir() -> Path:
    return share_dir() / "models"
