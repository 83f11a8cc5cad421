"""``so101 fleet report``: finds the arms the simulated fleet gave the fastest wear, from the bags alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from small_fleet import SMALL_FLEET

from so101_fleet.report import ReportError, write_fleet_report
from so101_fleet.simulate import load_fleet
from so101_testing import run_cli


def test_report_ranks_the_fast_wearing_arms_first_and_flags_only_them(small_fleet: Path, processed_fleet: Path,
                                                                     tmp_path: Path) -> None:
    truth = load_fleet(small_fleet)["arms"]  # written by simulate; the pipeline never read it
    fast = {a["robot_id"] for a in truth if a["fast_wear"]}
    assert 1 <= len(fast) < SMALL_FLEET.arms
    assert run_cli("so101_fleet.cli", ["report", str(processed_fleet), "--out", str(tmp_path / "report")]) == 0
    report = json.loads((tmp_path / "report" / "fleet_report.json").read_text())
    ranking = [arm["robot_id"] for arm in report["ranking"]]
    assert set(ranking[:len(fast)]) == fast
    assert set(report["growing"]) == fast
    slowest_fast = min(a["growth_per_day"] for a in report["ranking"] if a["robot_id"] in fast)
    fastest_slow = max(a["growth_per_day"] for a in report["ranking"] if a["robot_id"] not in fast)
    assert slowest_fast > 3 * max(fastest_slow, 0.0)
    page = (tmp_path / "report" / "index.html").read_text()
    for arm in ranking:
        assert f"trend_{arm}.png" in page and (tmp_path / "report" / f"trend_{arm}.png").stat().st_size > 1000
    assert (tmp_path / "report" / "fleet_distribution.png").is_file()
    assert report["episodes"] == SMALL_FLEET.arms * SMALL_FLEET.episodes


def test_report_of_a_folder_without_summaries_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="no episode summaries"):
        write_fleet_report(tmp_path, tmp_path / "out")
