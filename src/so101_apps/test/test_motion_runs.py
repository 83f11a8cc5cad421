"""A session's console lines and bag bookkeeping, without ROS."""

from __future__ import annotations

from so101_apps.motion_runs import rate_line, table_header, table_row


def test_rate_line_warns_only_below_nine_tenths_of_the_driver_rate() -> None:
    assert "WARNING" not in rate_line("bags/x", 95.0, 100.0)
    warned = rate_line("bags/x", 71.0, 100.0)
    assert "joint states at 71 Hz (driver: 100 Hz)" in warned and "71% of the driver's rate" in warned


def test_table_row_lines_up_with_its_header() -> None:
    row = table_row(1.0, [0.1] * 6, [0.15] * 6)
    assert row.index("|") == table_header().index("|")
    assert "+0.100 (+0.050)" in row
