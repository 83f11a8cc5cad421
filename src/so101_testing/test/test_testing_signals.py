"""The lag-tolerant signal check the ROS tests use."""

from __future__ import annotations

import numpy as np

from so101_testing import best_lagged_correlation


def test_best_lagged_correlation_finds_a_delayed_copy_and_rejects_another_shape() -> None:
    t = np.linspace(0.0, 4.0, 200)
    leader = np.sin(2 * np.pi * 2.5 * t)  # a period of 20 samples
    delayed = np.concatenate([np.full(7, np.nan), leader[:-7]])  # 7 samples late, NaN before its first reply
    delayed[50] = np.nan  # a missed reply
    assert best_lagged_correlation(leader, delayed) > 0.999
    assert best_lagged_correlation(leader, delayed, max_lag=5) < 0.95  # its lag is outside the window
    assert best_lagged_correlation(leader, np.sign(np.sin(2 * np.pi * 0.7 * t))) < 0.3
