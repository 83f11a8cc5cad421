"""'so101 analyze': JSON summary against direct metric calls, report files, before/after comparison."""

from __future__ import annotations

import argparse
import base64
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from so101_common.joints import JOINT_NAMES
from so101_common.paired_dataset import ARRAY_KEYS, PairedDataset, PairedEpisode
from so101_sim2real.analysis.metrics import compare
from so101_sim2real.cli import analyze as analyze_cli


def make_dataset(path: Path, sim_offset: float) -> Path:
    t = np.arange(0, 4, 0.02)
    real = np.stack([0.3 * np.sin(2 * np.pi * (0.3 + 0.1 * j) * t) for j in range(6)], 1)
    arrays: dict[str, Any] = {key: np.zeros((len(t), 6)) for key in ARRAY_KEYS}
    arrays.update(command=real, real_position=real, sim_position=real + sim_offset * (1 + np.arange(6)))
    arrays["real_effort"][:] = 0.2
    arrays["sim_effort"][:] = -0.2
    episodes = [PairedEpisode(name=n, time=t, metadata={"real_effort_unsigned": True}, **arrays) for n in ("a", "b")]
    return PairedDataset(rate_hz=50.0, episodes=episodes).save(path)


def analyze(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    analyze_cli.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_json_summary_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ds = make_dataset(tmp_path / "ds", 0.01)
    assert analyze_cli.run(analyze(str(ds), "--json", "--report", str(tmp_path / "rep"))) == 0
    summary = json.loads(capsys.readouterr().out)
    episode = PairedDataset.load(ds).episode("a")
    expected = compare(episode.sim_position, episode.real_position, 0.02, 0.05)
    got = summary["episodes"]["a"]["position"]
    for metric in ("rmse", "mae", "large_gap_ratio", "max_lag"):
        np.testing.assert_allclose([got[metric][j] for j in JOINT_NAMES], expected[metric])
    assert summary["overall"]["position"]["rmse"]["gripper"] == pytest.approx(0.06)
    assert summary["overall"]["effort"]["rmse"]["gripper"] == pytest.approx(0.0)  # |sim| vs unsigned real
    assert summary["episodes"]["a"]["position"]["mape"]["shoulder_pan"] is not None
    report = tmp_path / "rep"
    assert json.loads((report / "summary.json").read_text()) == summary
    page = (report / "report.html").read_text()
    images = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page)
    assert len(images) == 3  # error bars + one time plot per episode
    assert all(base64.b64decode(i)[:8] == b"\x89PNG\r\n\x1a\n" for i in images)
    assert "<table>" in page and "shoulder_lift" in page
    assert (report / "episode_a_position.png").stat().st_size > 10_000


def test_compare_before_after(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = make_dataset(tmp_path / "before", 0.02)
    after = make_dataset(tmp_path / "after", 0.005)
    rep = tmp_path / "rep"
    assert analyze_cli.run(analyze(str(before), "--compare", str(after), "--labels", "raw,gaponet",
                                   "--report", str(rep))) == 0
    out = capsys.readouterr().out
    assert "raw → gaponet" in out
    comparison = json.loads((rep / "comparison.json").read_text())
    entry = comparison["delta"]["position"]["rmse"]
    assert entry["before"]["elbow_flex"] == pytest.approx(0.06)
    assert entry["after"]["elbow_flex"] == pytest.approx(0.015)
    assert entry["change_percent"]["elbow_flex"] == pytest.approx(-75.0)
    assert (rep / "comparison_position_rmse.png").is_file() and "gaponet" in (rep / "comparison.html").read_text()


def test_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert analyze_cli.run(analyze(str(tmp_path))) == 1
    assert "dataset.json is missing" in capsys.readouterr().err
    ds = make_dataset(tmp_path / "ds", 0.0)
    assert analyze_cli.run(analyze(str(ds), "--compare", str(ds), "--labels", "only")) == 2
