"""Gap metrics against numpy/scipy reference formulas on signals with known answers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.spatial import distance

from so101_common.paired_dataset import ARRAY_KEYS, PairedEpisode
from so101_sim2real.analysis.metrics import MetricsConfig, MetricsError, compare, episode_metrics

DT = 0.02
T = np.arange(0, 10, DT)


def test_constant_offset_gives_known_errors() -> None:
    real = np.stack([np.sin(T), np.cos(T) + 1.0], axis=1)
    sim = real + np.array([0.03, -0.1])
    m = compare(sim, real, DT, large_gap_threshold=0.05)
    np.testing.assert_allclose(m["rmse"], [0.03, 0.1])
    np.testing.assert_allclose(m["mae"], [0.03, 0.1])
    np.testing.assert_allclose(m["large_gap_ratio"], [0.0, 1.0])
    np.testing.assert_allclose(m["gap_iqr"], [0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(m["gap_range"], [0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(m["corr"], [1.0, 1.0])
    big = np.abs(real[:, 0]) >= 0.1
    np.testing.assert_allclose(m["mape"][0], np.mean(np.abs(0.03 / real[big, 0])) * 100)


def test_pure_delay_gives_the_lag_with_sage_sign() -> None:
    rng = np.random.default_rng(0)
    base = np.convolve(rng.normal(size=700), np.ones(15) / 15, mode="same")
    real = base[100:600]
    sim_lagging = base[100 - 6:600 - 6]  # sim shows each value 6 samples later
    sim_leading = base[100 + 4:600 + 4]
    m = compare(np.stack([sim_lagging, sim_leading], 1), np.stack([real, real], 1), DT, 0.05)
    np.testing.assert_allclose(m["max_lag"], [6 * DT, -4 * DT])


def test_correlation_and_cosine_match_references() -> None:
    rng = np.random.default_rng(1)
    real = rng.normal(size=(300, 3))
    sim = np.stack([real[:, 0] * 2 + 1, -real[:, 1], real[:, 2] + rng.normal(size=300)], 1)
    m = compare(sim, real, DT, 0.05)
    for j in range(3):
        assert m["corr"][j] == pytest.approx(np.corrcoef(sim[:, j], real[:, j])[0, 1])
        assert m["cos_sim"][j] == pytest.approx(1 - distance.cosine(sim[:, j], real[:, j]))
        err = sim[:, j] - real[:, j]
        assert m["gap_iqr"][j] == pytest.approx(np.subtract(*np.percentile(err, [75, 25])))
        assert m["large_gap_ratio"][j] == pytest.approx(np.mean(np.abs(err) >= 0.05))
    assert m["corr"][1] == pytest.approx(-1.0)


def test_smoothness_and_nan_handling() -> None:
    real = np.stack([T * 2.0, T ** 2], axis=1)
    sim = real.copy()
    sim[10:20, 1] = np.nan
    m = compare(sim, real, DT, 0.05, smoothness=True)
    assert m["real_smoothness_mean"][0] == pytest.approx(2.0)
    assert m["real_smoothness_var"][0] == pytest.approx(0.0, abs=1e-9)
    rate = np.diff(real[:, 1]) / DT
    across_hole = np.zeros(len(rate), bool)
    across_hole[9:20] = True  # differences touching rows 10..19
    assert m["real_smoothness_mean"][1] == pytest.approx(np.abs(rate[~across_hole]).mean())
    assert m["rmse"][1] == 0.0
    gone = compare(np.full((5, 1), np.nan), np.zeros((5, 1)), DT, 0.05)
    assert np.isnan(gone["rmse"][0])
    with pytest.raises(MetricsError, match="equal"):
        compare(np.zeros((5, 2)), np.zeros((4, 2)), DT, 0.05)


def test_episode_metrics_unsigned_effort() -> None:
    n = 50
    arrays: dict[str, Any] = {key: np.zeros((n, 6)) for key in ARRAY_KEYS}
    arrays["sim_effort"][:] = -0.5
    arrays["real_effort"][:] = 0.5
    episode = PairedEpisode(name="e", time=np.arange(n) * DT, **arrays)
    signed = episode_metrics(episode, DT)
    unsigned = episode_metrics(episode, DT, MetricsConfig(unsigned_real_effort=True))
    np.testing.assert_allclose(signed["effort"]["rmse"], 1.0)
    np.testing.assert_allclose(unsigned["effort"]["rmse"], 0.0)
    assert "sim_smoothness_mean" in signed["velocity"] and "sim_smoothness_mean" not in signed["position"]
    with pytest.raises(MetricsError, match="position"):
        MetricsConfig(large_gap_thresholds={"position": -1, "velocity": 1, "effort": 1})
