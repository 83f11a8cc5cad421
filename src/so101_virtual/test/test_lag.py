"""The physics' lag behind wall time: accounted per band, per interval, through the status file."""

from __future__ import annotations

import pytest

from so101_virtual.lag import LAG_BANDS_MS, LagClock, LagHistogram, read_status_file, write_status_file


def test_wall_time_lands_in_the_band_of_the_lag_it_ended_with():
    clock = LagClock()
    clock.record(0.001, 0.5)  # under 5 ms
    clock.record(0.012, 0.3)  # 10–20 ms
    clock.record(0.035, 0.2)  # 20–40 ms
    clock.record(0.010, 0.1)  # a band's edge belongs to the band above it
    lag = clock.snapshot()
    assert lag.seconds == pytest.approx((0.5, 0.0, 0.4, 0.2, 0.0, 0.0))
    assert lag.total_s == pytest.approx(1.1)
    assert lag.fraction_behind(10.0) == pytest.approx(0.6 / 1.1)
    assert lag.fraction_behind(40.0) == 0.0
    with pytest.raises(ValueError, match="band edge"):
        lag.fraction_behind(15.0)


def test_an_interval_is_the_difference_of_two_snapshots():
    clock = LagClock()
    clock.record(0.002, 1.0)
    before = clock.snapshot()
    clock.record(0.090, 0.25)  # 80 ms and more
    clock.record(0.002, 0.75)
    interval = clock.snapshot().since(before)
    assert interval.total_s == pytest.approx(1.0)
    assert interval.fraction_behind(80.0) == pytest.approx(0.25)
    assert LagHistogram().fraction_behind(5.0) == 0.0  # no time, no share


def test_the_status_file_round_trips_and_refuses_what_it_cannot_read(tmp_path):
    clock = LagClock()
    clock.record(0.025, 2.0)
    path = tmp_path / "status.json"
    write_status_file(path, clock.snapshot(), overruns=3)
    assert read_status_file(path) == clock.snapshot()
    assert not (tmp_path / "status.json.partial").exists()
    path.write_text('{"overruns": 1}')
    with pytest.raises(ValueError, match="physics_lag"):
        read_status_file(path)
    path.write_text('{"physics_lag": {"bands_ms": [1, 2], "seconds": [0, 0, 0]}}')
    with pytest.raises(ValueError, match="bands"):
        read_status_file(path)
    path.write_text('{"physics_lag": {"bands_ms": [5, 10, 20, 40, 80], "seconds": [0, null, 0, 0, 0, 0]}}')
    with pytest.raises(ValueError, match="numbers"):
        read_status_file(path)
    assert len(LAG_BANDS_MS) + 1 == len(LagHistogram().seconds)
