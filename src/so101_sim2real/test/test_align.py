"""Clock estimation and resampling on synthetic streams with a known clock map and known damage."""

from __future__ import annotations

import numpy as np
import pytest

from so101_common.joints import JOINT_NAMES
from so101_common.trajectory import JointTrajectory
from so101_sim2real.pairing.align import (
    AlignConfig,
    AlignmentError,
    ClockFit,
    align_episode,
    clean_stream,
    estimate_clock,
    resample,
)

RNG = np.random.default_rng(7)
KNOTS = RNG.normal(scale=0.4, size=(60, 6))  # a smooth, non-periodic command: cubic-ish spline through knots


def command_at(t: np.ndarray) -> np.ndarray:
    """Band-limited random motion (interpolated knots every 0.5 s, smoothed)."""
    knot_t = np.arange(len(KNOTS)) * 0.5
    return np.stack([np.interp(t, knot_t, KNOTS[:, j]) for j in range(6)], axis=1)


def response_at(t: np.ndarray) -> np.ndarray:
    """A plant that lags 60 ms and sags 0.02 rad."""
    return command_at(t - 0.06) - 0.02


def damaged(traj: JointTrajectory, rng: np.random.Generator) -> JointTrajectory:
    """Drop 10 %, duplicate 5 %, shuffle the sample order and reverse the joint order."""
    n = len(traj)
    keep = np.flatnonzero(rng.random(n) > 0.1)
    index = np.concatenate([keep, rng.choice(keep, n // 20)])
    rng.shuffle(index)
    rev = list(JOINT_NAMES)[::-1]
    return JointTrajectory(traj.time[index], traj.position[index][:, ::-1], traj.velocity[index][:, ::-1],
                           traj.effort[index][:, ::-1], tuple(rev))


REAL_T0 = 1233.5  # real-clock stamp of the real run's first sample
OFFSET, DRIFT, SIM_T0 = 1234.5, 1.5e-3, 3.0  # real clock = OFFSET + t_sim + DRIFT * (t_sim - SIM_T0)


def sim_streams(rate: float = 200.0) -> tuple[JointTrajectory, JointTrajectory]:
    """Sim command and response stamped on the sim clock; signals follow the real run's timeline."""
    t_sim = SIM_T0 + np.arange(0, 25, 1 / rate)
    since_real_start = OFFSET + t_sim + DRIFT * (t_sim - SIM_T0) - REAL_T0
    command = JointTrajectory(t_sim, command_at(since_real_start))
    state = JointTrajectory(t_sim, response_at(since_real_start), effort=np.full((len(t_sim), 6), 0.3))
    return command, state


def real_streams() -> tuple[JointTrajectory, JointTrajectory]:
    """Real command and response at 50 Hz for 28 s, stamped on the real clock."""
    t = np.arange(0, 28, 0.02)
    velocity = np.gradient(response_at(t), t, axis=0)
    return JointTrajectory(REAL_T0 + t, command_at(t)), JointTrajectory(REAL_T0 + t, response_at(t), velocity)


def test_clean_stream_sorts_dedupes_and_reorders() -> None:
    t = np.arange(40.0)
    traj = JointTrajectory(t, np.tile(t[:, None], 6) + np.arange(6))
    messy = damaged(traj, np.random.default_rng(1))
    messy = JointTrajectory(np.append(messy.time, np.nan), np.vstack([messy.position, np.zeros(6)]), names=messy.names)
    cleaned, stats = clean_stream(messy)
    assert cleaned.names == JOINT_NAMES and np.all(np.diff(cleaned.time) > 0)
    assert stats.reordered and stats.non_finite == 1 and stats.duplicates > 0
    np.testing.assert_array_equal(cleaned.position, traj.position[cleaned.time.astype(int)])


def test_resample_linear_hold_and_gaps() -> None:
    traj = JointTrajectory(np.array([0.0, 1.0, 2.0, 5.0]), np.tile([[0.0], [1.0], [2.0], [5.0]], 6))
    grid = np.array([-0.5, 0.5, 1.5, 3.0, 5.0, 6.0])
    lin = resample(traj, grid, max_gap_s=0.6)
    np.testing.assert_array_equal(lin.position[:, 0], [np.nan, 0.5, 1.5, np.nan, 5.0, np.nan])
    hold = resample(traj, grid, hold=True)
    np.testing.assert_array_equal(hold.position[:, 0], [np.nan, 0.0, 1.0, 2.0, 5.0, 5.0])


def test_estimate_clock_recovers_offset_and_drift_from_damaged_commands() -> None:
    real_cmd, _ = real_streams()
    sim_cmd, _ = sim_streams()
    fit = estimate_clock(real_cmd, damaged(sim_cmd, np.random.default_rng(2)))
    assert fit.offset == pytest.approx(OFFSET, abs=3e-3)
    assert fit.drift == pytest.approx(DRIFT, abs=1.5e-4)
    assert fit.score > 0.95


def test_estimate_clock_without_drift_fit_and_command_vs_response() -> None:
    real_cmd, _ = real_streams()
    _, sim_state = sim_streams()
    fit = estimate_clock(real_cmd, sim_state, AlignConfig(fit_drift=False))
    # the response lags 60 ms, so matching it against the command reads 60 ms less offset, drift aside
    assert fit.drift == 0.0
    assert fit.offset == pytest.approx(OFFSET - 0.06 + DRIFT * 12.5, abs=0.02)


def test_align_episode_matches_the_truth_on_the_grid() -> None:
    real_cmd, real_state = real_streams()
    sim_cmd, sim_state = sim_streams()
    rng = np.random.default_rng(3)
    episode = align_episode("synthetic", damaged(real_state, rng), damaged(sim_state, rng),
                            damaged(real_cmd, rng), damaged(sim_cmd, rng), AlignConfig(rate_hz=50.0),
                            window=(REAL_T0 + 1.0, REAL_T0 + 21.0), metadata={"motion": "synthetic"})
    assert episode.metadata["motion"] == "synthetic" and episode.metadata["clock"]["method"] == "command~command"
    assert episode.time[0] == 0.0 and np.allclose(np.diff(episode.time), 0.02)
    # the sim run starts 4 s into the real one (OFFSET + SIM_T0 - REAL_T0); the grid starts there
    assert episode.metadata["grid_start_real_clock_s"] == pytest.approx(OFFSET + SIM_T0, abs=0.01)
    assert episode.time[-1] == pytest.approx(17.0, abs=0.03)
    t = episode.time + episode.metadata["grid_start_real_clock_s"] - REAL_T0  # time since the real start
    truth = response_at(t)
    assert np.isfinite(episode.real_position).all()  # 10 % drops at 50 Hz leave no gap wider than max_gap_s
    # linear interpolation is exact between knots and off only where a drop straddles a knot
    np.testing.assert_allclose(episode.real_position, truth, atol=0.05)
    assert np.median(np.abs(episode.real_position - truth)) < 1e-3
    np.testing.assert_allclose(episode.sim_position, truth, atol=0.02)  # a few ms of clock error × 2 rad/s
    assert np.median(np.abs(episode.sim_position - truth)) < 2e-3
    np.testing.assert_allclose(episode.sim_effort, 0.3)
    assert np.isnan(episode.sim_velocity).all()
    # the command is held: equal to the latest real command sample at or before each grid time
    real_cmd_clean = np.arange(0, 28, 0.02)
    latest = real_cmd_clean[np.searchsorted(real_cmd_clean, t + 1e-9) - 1]
    close = np.isclose(episode.command, command_at(latest), atol=1e-9).all(axis=1)
    assert close.mean() > 0.8  # the rest hold an older sample where the newest one was dropped


def test_each_grid_sample_holds_the_command_issued_at_that_instant() -> None:
    # commands at 50 Hz with a phase of 13 ms against the states and ±1.5 ms of timer jitter; command k is k on every
    # joint. The runs start at 0.5 s, between commands 24 (0.493 s) and 25 (0.513 s).
    rng = np.random.default_rng(5)
    stamps = 0.013 + np.arange(200) * 0.02 + rng.uniform(-0.0015, 0.0015, 200)
    command = JointTrajectory(stamps, np.repeat(np.arange(200.0)[:, None], 6, axis=1))
    t_state = 0.5 + np.arange(0, 3.0, 0.005)
    state = JointTrajectory(t_state, np.zeros((len(t_state), 6)))
    same_clock = ClockFit(offset=0.0, drift=0.0, origin=0.0, score=1.0, method="given")
    episode = align_episode("phase", state, state, command, clock=same_clock)
    # the grid starts on command 25's stamp, and sample k holds command 25 + k (not the one issued 13 ms earlier)
    assert episode.metadata["grid_start_real_clock_s"] == stamps[25]
    np.testing.assert_array_equal(episode.command[:, 0], 25 + np.arange(len(episode.time)))


def test_given_clock_is_used_and_non_overlap_is_an_error() -> None:
    real_cmd, real_state = real_streams()
    _, sim_state = sim_streams()
    far = ClockFit(offset=1e6, drift=0.0, origin=0.0, score=1.0, method="given")
    with pytest.raises(AlignmentError, match="do not overlap"):
        align_episode("e", real_state, sim_state, real_cmd, clock=far)
    still = JointTrajectory(np.arange(10.0), np.zeros((10, 6)))
    with pytest.raises(AlignmentError, match="no joint moves"):
        estimate_clock(still, still)
    with pytest.raises(AlignmentError, match="positive"):
        AlignConfig(rate_hz=0)
