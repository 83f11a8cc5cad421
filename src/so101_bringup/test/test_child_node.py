"""A child node that finds its parent already gone stops at once instead of running on as an orphan."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


def _marker_module(folder: Path) -> None:
    (folder / "marker_node.py").write_text("from pathlib import Path\nimport sys\nPath(sys.argv[1]).write_text('ran')\n")


def test_a_child_whose_parent_is_not_the_one_named_is_interrupted_before_its_module_runs(tmp_path: Path) -> None:
    _marker_module(tmp_path)
    marker = tmp_path / "ran.txt"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    not_the_parent = os.getpid() + 1_000_000  # no process has this id: as if the parent had died and been reaped
    child = subprocess.run([sys.executable, "-m", "so101_bringup.child_node", str(not_the_parent), "marker_node",
                            str(marker)], env=env, capture_output=True, text=True, timeout=60)
    assert child.returncode == -signal.SIGINT, child.stderr
    assert not marker.exists()
    assert "Traceback" not in child.stderr


def test_a_child_of_a_living_parent_runs_its_module_as_main_with_its_arguments(tmp_path: Path) -> None:
    _marker_module(tmp_path)
    marker = tmp_path / "ran.txt"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    child = subprocess.run([sys.executable, "-m", "so101_bringup.child_node", str(os.getpid()), "marker_node",
                            str(marker)], env=env, capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert marker.read_text() == "ran"


def test_a_child_started_nice_runs_at_a_lower_priority(tmp_path: Path) -> None:
    (tmp_path / "nice_node.py").write_text("import os, sys\nfrom pathlib import Path\nPath(sys.argv[1]).write_text(str(os.nice(0)))\n")
    marker = tmp_path / "nice.txt"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    child = subprocess.run([sys.executable, "-m", "so101_bringup.child_node", "--nice", "7", str(os.getpid()),
                            "nice_node", str(marker)], env=env, capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert int(marker.read_text()) == os.nice(0) + 7
