"""The dependency order of docs/ARCHITECTURE.md holds in the code: every package (code and tests)
imports only packages above it in the table, declares each of them in its package.xml, and the
ROS-free bottom packages never import rclpy."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
# packages whose code must not need rclpy (and must not name it in package.xml)
ROS_FREE = ("so101_common", "so101_feetech", "so101_description")
# the umbrella: its CLI table and graphs name every package by string, so it may depend on all
TOP = "so101_apps"


def _documented_order() -> list[str]:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    table = text.split("## Packages", 1)[1].split("\n\n", 2)[1]
    return re.findall(r"^\| `(so101_\w+)` \|", table, flags=re.MULTILINE)


ORDER = _documented_order()


def _imported_packages(files: list[Path]) -> dict[str, Path]:
    """Top-level module name → first file importing it."""
    found: dict[str, Path] = {}
    for file in files:
        for node in ast.walk(ast.parse(file.read_text(), str(file))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], file)
    return found


def _declared(package: str) -> set[str]:
    xml = (SRC / package / "package.xml").read_text()
    return set(re.findall(r"<(?:exec_|test_)?depend>(\w+)</", xml))


def test_the_table_lists_every_package_once() -> None:
    packages = sorted(p.name for p in SRC.iterdir() if (p / "package.xml").is_file())
    assert sorted(ORDER) == packages and len(set(ORDER)) == len(ORDER)
    assert ORDER[0] == "so101_common" and ORDER[-1] == TOP


@pytest.mark.parametrize("package", [p for p in ORDER if p != TOP])
def test_imports_point_down_the_order_and_are_declared(package: str) -> None:
    allowed = set(ORDER[: ORDER.index(package)])
    files = sorted((SRC / package).rglob("*.py"))
    imported = _imported_packages([f for f in files if f.name != "setup.py"])
    ours = {name: file for name, file in imported.items() if name in ORDER and name != package}
    upward = {name: str(file.relative_to(ROOT)) for name, file in ours.items() if name not in allowed}
    assert not upward, f"{package} imports packages at or below itself in the order: {upward}"
    missing = set(ours) - _declared(package)
    assert not missing, f"{package}/package.xml does not declare {sorted(missing)}"


@pytest.mark.parametrize("package", ROS_FREE)
def test_ros_free_packages_need_no_rclpy(package: str) -> None:
    imported = _imported_packages(sorted((SRC / package / package).rglob("*.py")))
    assert "rclpy" not in imported, f"{package} imports rclpy in {imported['rclpy']}"
    assert "rclpy" not in _declared(package)
