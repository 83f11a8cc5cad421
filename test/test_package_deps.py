"""Every package's ``package.xml`` declares what its code imports, so ``rosdep install --from-paths src``
covers a ROS machine: each third-party or ROS module a package's modules import (at the top or inside a
function) maps to a rosdep key below, and that key is a ``<depend>``/``<exec_depend>`` of the package.

Keys: ROS packages by name; Python packages by their rosdep key (``python3-*``; the ones only on PyPI
carry the ``-pip`` suffix rosdep uses for pip-installed keys).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p.name for p in (ROOT / "src").iterdir() if (p / "package.xml").is_file())

ROSDEP_KEYS = {
    "numpy": "python3-numpy", "scipy": "python3-scipy", "yaml": "python3-yaml", "matplotlib": "python3-matplotlib",
    "tqdm": "python3-tqdm", "serial": "python3-serial", "cv2": "python3-opencv", "lz4": "python3-lz4",
    "pydantic": "python3-pydantic", "google": "python3-protobuf", "mujoco": "python3-mujoco-pip",
    "onnx": "python3-onnx-pip", "onnxruntime": "python3-onnxruntime-pip", "torch": "python3-torch-pip",
    "lerobot": "python3-lerobot-pip", "scservo_sdk": "python3-feetech-servo-sdk-pip",
    "rosbags": "python3-rosbags-pip", "mcap": "python3-mcap-pip", "pyarrow": "python3-pyarrow-pip",
    "fsspec": "python3-fsspec", "ray": "python3-ray-pip", "backports": "python3-backports-zstd-pip",
    # pip's grpcio, pinned with LeRobot (its generated gRPC stubs need grpcio >= 1.73.1)
    "grpc": "python3-grpcio-pip", "pytest": "python3-pytest",
    # the web view's viewer and server (pinned with LeRobot, which logs to rerun too); the browser test's driver
    "rerun": "python3-rerun-sdk-pip", "playwright": "python3-playwright-pip",
}
# Not rosdep keys: Isaac Sim's own Python (the bridge script runs inside Isaac Sim, see so101_sim2real/isaac);
# ``compression`` is the standard library from Python 3.14 (``compression.zstd``, with a backports fallback).
NOT_DEPENDENCIES = {"isaacsim", "omni", "pxr", "carb", "compression"}


def _imports(package: str) -> set[str]:
    modules: set[str] = set()
    for path in (ROOT / "src" / package / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return modules - set(sys.stdlib_module_names) - NOT_DEPENDENCIES - {package}


def _declared(package: str) -> set[str]:
    xml = (ROOT / "src" / package / "package.xml").read_text()
    return set(re.findall(r"<(?:depend|exec_depend)>\s*([^<\s]+)\s*</", xml))


@pytest.mark.parametrize("package", PACKAGES)
def test_package_xml_declares_every_import(package: str) -> None:
    needed = {ROSDEP_KEYS.get(module, module) for module in _imports(package)}
    missing = sorted(needed - _declared(package))
    assert not missing, f"src/{package}/package.xml: add <exec_depend> for {missing}"


def test_the_check_sees_imports() -> None:
    assert {"rclpy", "numpy"} <= _imports("so101_safety") and "so101_safety" not in _imports("so101_safety")


@pytest.mark.parametrize("package", [p for p in PACKAGES if p != "so101_testing"])
def test_no_package_needs_the_test_package_at_run_time(package: str) -> None:
    """``so101_testing`` is for tests: no package's code imports it, and it is at most a ``<test_depend>``."""
    assert "so101_testing" not in _imports(package), f"src/{package}/{package} imports so101_testing"
    assert "so101_testing" not in _declared(package), f"src/{package}/package.xml: so101_testing is a test_depend"
