"""Time alignment of real and sim runs onto one fixed-rate grid.

Real runs are stamped by the robot computer's clock, sim runs by the simulator's; their origins
differ (offset) and their rates may too (linear drift). The clock map is estimated by
cross-correlating what both sides share, best the two command streams (identical signals), else a
command against the other side's response, and is expressed as

    t_real = origin_offset + t_sim + drift · (t_sim − sim_origin)

Streams are cleaned first (joints reordered by name, stamps sorted, duplicates and non-finite stamps
dropped), then states are interpolated linearly and commands held (a servo keeps its last target)
onto the grid over the interval both sides cover; the grid starts on a command's stamp, so each sample
holds the command issued at that instant. Samples further than ``max_gap_s`` from a source
sample become NaN rather than invented.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import signal

from so101_common.joints import JOINT_NAMES
from so101_common.paired_dataset import PairedEpisode
from so101_common.trajectory import JointTrajectory

__all__ = [
    "AlignmentError",
    "AlignConfig",
    "ClockFit",
    "CleanStats",
    "clean_stream",
    "resample",
    "estimate_clock",
    "align_episode",
]

_LOG = logging.getLogger(__name__)

# s: how late a command's stamp may be against the grid sample it belongs to (timer jitter of the publishing node)
_STAMP_JITTER_S = 0.003


class AlignmentError(ValueError):
    """Streams cannot be aligned (no overlap, too short, nothing moves to correlate)."""


@dataclass(frozen=True)
class AlignConfig:
    """How streams are cleaned, matched and resampled."""

    rate_hz: float = 50.0  # output grid rate
    correlation_rate_hz: float = 200.0  # grid used to estimate the clock map (finer than the output)
    max_offset_s: float | None = None  # bound on |offset − prior| searched (None: any overlap of at least half)
    prior_window_s: float = 2.0  # bound around a given prior offset when max_offset_s is None
    fit_drift: bool = True  # fit a linear drift from per-window offsets
    drift_windows: int = 8  # windows for the drift fit
    max_gap_s: float = 0.25  # grid samples farther than this from a source sample become NaN

    def __post_init__(self) -> None:
        for name in ("rate_hz", "correlation_rate_hz", "max_gap_s"):
            if not getattr(self, name) > 0:
                raise AlignmentError(f"{name} must be positive, got {getattr(self, name)}")
        if self.drift_windows < 3:
            raise AlignmentError(f"drift_windows must be at least 3, got {self.drift_windows}")
        if not self.prior_window_s > 0:
            raise AlignmentError(f"prior_window_s must be positive, got {self.prior_window_s}")
        if self.max_offset_s is not None and not self.max_offset_s > 0:
            raise AlignmentError(f"max_offset_s must be positive, got {self.max_offset_s}")


@dataclass(frozen=True)
class ClockFit:
    """Map from the other (sim) clock onto the reference (real) clock."""

    offset: float  # s, reference time of the other clock's origin minus that origin
    drift: float  # s per s, other clock's rate error relative to the reference
    origin: float  # s, other-clock time where the drift term is zero (its first sample)
    score: float  # peak normalised correlation in [-1, 1]; near 1 for identical commands
    method: str  # what was correlated, e.g. "command~command"

    def to_reference(self, t: np.ndarray) -> np.ndarray:
        return self.offset + t + self.drift * (t - self.origin)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CleanStats:
    """What cleaning removed from a stream."""

    duplicates: int  # samples dropped for repeating an earlier stamp
    non_finite: int  # samples dropped for a NaN/inf stamp
    reordered: bool  # stamps were not monotonic and were sorted


def clean_stream(trajectory: JointTrajectory) -> tuple[JointTrajectory, CleanStats]:
    """Joints in :data:`JOINT_NAMES` order, stamps sorted (stable), duplicate stamps dropped (first kept)."""
    traj = trajectory.reordered(JOINT_NAMES)
    finite = np.isfinite(traj.time)
    order = np.argsort(traj.time[finite], kind="stable")
    reordered = bool(np.any(np.diff(traj.time[finite]) < 0))
    index = np.flatnonzero(finite)[order]
    time = traj.time[index]
    keep = np.concatenate(([True], np.diff(time) > 0)) if len(time) else np.zeros(0, bool)
    index = index[keep]
    stats = CleanStats(int(np.count_nonzero(~keep)), int(np.count_nonzero(~finite)), reordered)
    cleaned = JointTrajectory(traj.time[index], traj.position[index], traj.velocity[index], traj.effort[index],
                              JOINT_NAMES)
    return cleaned, stats


def resample(trajectory: JointTrajectory, grid: np.ndarray, hold: bool = False,
             max_gap_s: float = math.inf) -> JointTrajectory:
    """Samples of a cleaned trajectory at ``grid`` (linear, or zero-order hold); NaN outside or across gaps."""
    t = trajectory.time
    out = [np.full((len(grid), len(trajectory.names)), np.nan) for _ in range(3)]
    if len(t) == 0:
        return JointTrajectory(grid, out[0], out[1], out[2], names=trajectory.names)
    after = np.searchsorted(t, grid, side="right")  # first source index with t > grid
    before = np.clip(after - 1, 0, len(t) - 1)
    nxt = np.clip(after, 0, len(t) - 1)
    inside = (grid >= t[0]) & (grid <= t[-1]) if not hold else (grid >= t[0])
    if hold:
        near = (grid - t[before]) <= max_gap_s
    else:
        near = np.minimum(np.abs(grid - t[before]), np.abs(t[nxt] - grid)) <= max_gap_s
        near &= (t[nxt] - t[before]) <= 2 * max_gap_s
    valid = inside & near
    for k, source in enumerate((trajectory.position, trajectory.velocity, trajectory.effort)):
        if hold:
            values = source[before]
        else:
            span = t[nxt] - t[before]
            w = np.divide(grid - t[before], span, out=np.zeros_like(grid), where=span > 0)[:, None]
            values = source[before] * (1 - w) + source[nxt] * w
        out[k][valid] = values[valid]
    return JointTrajectory(grid, out[0], out[1], out[2], trajectory.names)


def estimate_clock(reference: JointTrajectory, other: JointTrajectory, config: AlignConfig = AlignConfig(),
                   method: str = "position~position", prior_offset: float | None = None) -> ClockFit:
    """Offset (and drift) mapping ``other``'s clock onto ``reference``'s, from their positions.

    ``prior_offset`` (e.g. SAGE: real MOTION_START minus the sim run's first stamp) narrows the search
    to ``±max_offset_s`` (default ``prior_window_s``) around it, which keeps periodic motions from
    locking on a whole period off.
    """
    ref, _ = clean_stream(reference)
    oth, _ = clean_stream(other)
    if len(ref) < 4 or len(oth) < 4:
        raise AlignmentError("need at least 4 samples on each side to estimate a clock offset")
    dt = 1.0 / config.correlation_rate_hz
    r_t0, o_t0 = ref.time[0], oth.time[0]
    r = _normalised(resample(ref, np.arange(r_t0, ref.time[-1], dt)).position)
    o = _normalised(resample(oth, np.arange(o_t0, oth.time[-1], dt)).position)
    weights = (np.nanstd(r, axis=0) > 0) & (np.nanstd(o, axis=0) > 0)
    if not np.any(weights):
        raise AlignmentError("no joint moves on both sides: nothing to correlate for the clock offset")
    r, o = np.nan_to_num(r[:, weights]), np.nan_to_num(o[:, weights])
    if prior_offset is None:
        centre, bound = 0.0, config.max_offset_s
    else:
        centre, bound = prior_offset, config.max_offset_s or config.prior_window_s
    lag, score = _best_lag(r, o, bound, dt, r_t0 - o_t0 - centre)
    offset = r_t0 - o_t0 + lag * dt
    drift = 0.0
    if config.fit_drift:
        offset, drift = _fit_drift(r, o, r_t0, o_t0, dt, offset, config.drift_windows)
    fit = ClockFit(float(offset), float(drift), float(o_t0), float(score), method)
    _LOG.debug("clock fit %s", fit)
    return fit


def align_episode(
    name: str,
    real_state: JointTrajectory,
    sim_state: JointTrajectory,
    real_command: JointTrajectory | None = None,
    sim_command: JointTrajectory | None = None,
    config: AlignConfig = AlignConfig(),
    window: tuple[float, float] | None = None,
    clock: ClockFit | None = None,
    metadata: dict[str, Any] | None = None,
    prior_offset: float | None = None,
) -> PairedEpisode:
    """Pair one real and one sim run: clock map (estimated unless given), clean, resample on the overlap.

    ``window`` bounds the grid on the real clock (SAGE: MOTION_START..DISABLE). The command column
    comes from the real side when it has one, else from the sim side mapped onto the real clock.
    """
    real_state, real_stats = clean_stream(real_state)
    sim_state, sim_stats = clean_stream(sim_state)
    if clock is None:
        if real_command is not None and sim_command is not None:
            clock = estimate_clock(real_command, sim_command, config, "command~command", prior_offset)
        elif real_command is not None:
            clock = estimate_clock(real_command, sim_state, config, "command~sim_state", prior_offset)
        elif sim_command is not None:
            clock = estimate_clock(real_state, sim_command, config, "real_state~command", prior_offset)
        else:
            clock = estimate_clock(real_state, sim_state, config, "real_state~sim_state", prior_offset)
    sim_on_real = JointTrajectory(clock.to_reference(sim_state.time), sim_state.position, sim_state.velocity,
                                  sim_state.effort, sim_state.names)
    if real_command is not None:
        command, _ = clean_stream(real_command)
    elif sim_command is not None:
        command, _ = clean_stream(sim_command)
        command = JointTrajectory(clock.to_reference(command.time), command.position, names=command.names)
    else:
        raise AlignmentError(f"episode {name}: neither side carries a command stream")
    covered = max(real_state.time[0], sim_on_real.time[0], command.time[0])
    start, stop = covered, min(real_state.time[-1], sim_on_real.time[-1])
    if window is not None:
        start, stop = max(start, window[0]), min(stop, window[1])
    # The grid starts on a command's stamp, so that a grid sample holds the command issued at that instant: at
    # an arbitrary phase it held one issued up to a grid period earlier, a lag of the command column that changed
    # from run to run (measured on the demo's recordings: the real arm 4.25–5.25 frames behind its commands,
    # 4.25 behind the sim in every run), and a compensator trained on it led the arm by that much less.
    # (a stamp up to _STAMP_JITTER_S before where both runs are covered counts: the grid starts that little later)
    later = command.time[command.time >= start - _STAMP_JITTER_S]
    if len(later):
        start = max(float(later[0]), covered)
    count = int(math.floor((stop - start) * config.rate_hz + 1e-6)) + 1
    if not stop > start or count < 2:
        raise AlignmentError(f"episode {name}: real and sim runs do not overlap in time "
                             f"(offset {clock.offset:.3f} s); check the clocks or the inputs")
    grid = start + np.arange(count) / config.rate_hz
    real = resample(real_state, grid, max_gap_s=config.max_gap_s)
    sim = resample(sim_on_real, grid, max_gap_s=config.max_gap_s)
    # held from a stamp up to _STAMP_JITTER_S after the sample: a command stamped a little late is still that sample's
    cmd = resample(command, grid + _STAMP_JITTER_S, hold=True, max_gap_s=config.max_gap_s)
    meta = dict(metadata or {})
    meta.update({
        "clock": clock.as_dict(),
        "grid_start_real_clock_s": float(start),
        "cleaning": {"real": asdict(real_stats), "sim": asdict(sim_stats)},
    })
    return PairedEpisode(name=name, time=grid - start, command=cmd.position,
                         real_position=real.position, real_velocity=real.velocity, real_effort=real.effort,
                         sim_position=sim.position, sim_velocity=sim.velocity, sim_effort=sim.effort,
                         metadata=meta)


# ----------------------------------------------------------------------------------------------- helpers


def _normalised(x: np.ndarray) -> np.ndarray:
    mean = np.nanmean(x, axis=0)
    std = np.nanstd(x, axis=0)
    return np.divide(x - mean, std, out=np.zeros_like(x), where=std > 1e-9)


def _best_lag(r: np.ndarray, o: np.ndarray, max_offset_s: float | None, dt: float, base: float) -> tuple[float, float]:
    """Sub-sample lag k (o[n] ≈ r[n + k]) maximising the overlap-normalised correlation summed over joints."""
    c = signal.fftconvolve(r, o[::-1], mode="full", axes=0).sum(axis=1)
    lags = np.arange(-(len(o) - 1), len(r))
    overlap = np.minimum(len(r), lags + len(o)) - np.maximum(0, lags)
    shortest = min(len(r), len(o))
    # Divided by the shorter length, not the overlap: periodic motions correlate as well one period
    # off, and the lag with the most overlap (the same motion run on both sides) must win.
    biased = c / shortest / r.shape[1]
    allowed = overlap >= 0.5 * shortest
    if max_offset_s is not None:
        allowed &= np.abs(base + lags * dt) <= max_offset_s
    if not np.any(allowed):
        raise AlignmentError("no admissible offset: the streams cannot overlap by half within max_offset_s")
    biased = np.where(allowed, biased, -np.inf)
    i = int(np.argmax(biased))
    return lags[i] + _parabola(biased, i), float(c[i] / max(overlap[i], 1) / r.shape[1])


def _parabola(c: np.ndarray, i: int) -> float:
    if 0 < i < len(c) - 1 and np.all(np.isfinite(c[i - 1:i + 2])):
        denom = c[i - 1] - 2 * c[i] + c[i + 1]
        if denom < 0:
            return float(0.5 * (c[i - 1] - c[i + 1]) / denom)
    return 0.0


def _fit_drift(r: np.ndarray, o: np.ndarray, r_t0: float, o_t0: float, dt: float, offset: float,
               windows: int) -> tuple[float, float]:
    """Local offsets of ``windows`` chunks of ``o`` → least-squares line; falls back to (offset, 0)."""
    size = len(o) // windows
    search = max(int(0.25 / dt), 4)
    centres, shifts = [], []
    for w in range(windows):
        chunk = o[w * size:(w + 1) * size]
        if size < 8 or np.allclose(chunk.std(axis=0), 0):
            continue
        predicted = int(round((o_t0 + w * size * dt + offset - r_t0) / dt))
        lo, hi = predicted - search, predicted + size + search
        if lo < 0 or hi > len(r):
            continue
        segment = r[lo:hi]
        c = signal.fftconvolve(segment, chunk[::-1], mode="valid", axes=0).sum(axis=1)
        # normalise by the reference energy under the chunk, or louder stretches would pull the peak
        energy = np.convolve((segment ** 2).sum(axis=1), np.ones(size), mode="valid")
        c = c / np.sqrt(np.maximum(energy, 1e-12))
        i = int(np.argmax(c))
        k = lo + i + _parabola(c, i)
        centres.append(o_t0 + (w * size + size / 2) * dt)
        shifts.append(r_t0 + k * dt - (o_t0 + w * size * dt))
    if len(centres) < 3:
        return offset, 0.0
    x, y = np.array(centres) - o_t0, np.array(shifts)
    slope, intercept = np.polyfit(x, y, 1)
    residual = np.abs(y - (intercept + slope * x))
    keep = residual <= max(3 * np.median(residual), dt)
    if np.count_nonzero(keep) >= 3:
        slope, intercept = np.polyfit(x[keep], y[keep], 1)
    return float(intercept), float(slope)
