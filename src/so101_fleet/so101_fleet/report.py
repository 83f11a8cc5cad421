"""``so101 fleet report``: the fleet's gap over time, per arm and joint, and the arms whose gap grows.

Input: the per-episode gap summaries ``so101 fleet process`` wrote (``episodes/<robot_id>/<name>/
summary.json``). The gap figure followed is the position RMSE between the real arm and the MuJoCo
replay of its commands (rad, per joint, :data:`TREND_METRIC`). Episodes of different tasks have
different gaps, so every value is first divided by the fleet's median for that task and joint
(the *relative gap*: 1 is a typical arm on that task); the trend of an arm's joint is the least-squares
slope of the log relative gap against time (relative growth per day). An arm's growth is the median
over its joints; an arm is **growing** when that growth is above ``min_growth_per_day`` (default
:data:`MIN_GROWTH_PER_DAY`) and above twice its standard error; the ranking lists every arm. Worn
gears (more backlash and friction) show up there as a lag and a gap that grow for weeks before the
arm fails.

Outputs in the report folder: ``fleet_report.json`` (ranking, per-arm and per-joint slopes),
``index.html`` (ranking table, fleet-wide distribution, one trend plot per arm), the PNGs.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from so101_common.joints import JOINT_NAMES
from so101_fleet.episode_job import SUMMARY_FILE

__all__ = ["TREND_METRIC", "MIN_GROWTH_PER_DAY", "ReportError", "ArmTrend", "load_summaries", "fleet_trends",
           "write_fleet_report"]

TREND_METRIC = ("position", "rmse")
MIN_GROWTH_PER_DAY = 0.01
"""Relative growth of the gap per day below which an arm is not called growing: at 1 %/day the gap doubles
in about ten weeks, the pace of gears wearing towards failure; slower growth is ordinary wear."""
_DAY_NS = 86_400 * 10**9


class ReportError(ValueError):
    """No usable episode summaries under the dataset root."""


@dataclass
class EpisodeGap:
    robot_id: str
    episode: str
    task: str
    day: float  # days since the fleet's first episode
    gap: np.ndarray  # (J,) TREND_METRIC per joint


@dataclass
class ArmTrend:
    robot_id: str
    episodes: int
    days_span: float
    growth_per_day: float  # median over joints of the relative growth per day
    growth_stderr: float
    growing: bool
    joint_growth_per_day: dict[str, float | None] = field(default_factory=dict)  # None: too few episodes
    latest_gap: dict[str, float | None] = field(default_factory=dict)  # TREND_METRIC of the last episode per joint


def load_summaries(root: Path | str) -> list[EpisodeGap]:
    """Every episode summary under ``root/episodes`` (skipping none silently: a bad file is an error)."""
    root = Path(root)
    paths = sorted(root.glob(f"episodes/*/*/{SUMMARY_FILE}"))
    if not paths:
        raise ReportError(f"{root}: no episode summaries (episodes/<robot_id>/<episode>/{SUMMARY_FILE}); "
                          "run so101 fleet process first")
    rows = []
    for path in paths:
        try:
            summary = json.loads(path.read_text())
            [episode] = summary["episodes"].values()
            values = episode[TREND_METRIC[0]][TREND_METRIC[1]]
            gap = np.array([math.nan if values.get(j) is None else float(values[j]) for j in JOINT_NAMES])
            rows.append((summary["robot_id"], path.parent.name, summary.get("task") or "", summary["start_time_ns"], gap))
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ReportError(f"{path}: not an episode summary of so101 fleet process: {err}") from err
    first = min(r[3] for r in rows if r[3] is not None)
    return [EpisodeGap(robot, name, task, (start - first) / _DAY_NS, gap) for robot, name, task, start, gap in rows
            if start is not None]


def _relative(episodes: Sequence[EpisodeGap]) -> np.ndarray:
    """(E, J) gap over the fleet's median gap of the same task and joint."""
    gaps = np.vstack([e.gap for e in episodes])
    tasks = np.array([e.task for e in episodes])
    out = np.full_like(gaps, np.nan)
    for task in set(tasks.tolist()):
        rows = tasks == task
        with np.errstate(all="ignore"):
            out[rows] = gaps[rows] / np.nanmedian(gaps[rows], axis=0)
    return out


def _slope(days: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of ``values`` on ``days`` and its standard error (NaN where undetermined)."""
    keep = np.isfinite(values)
    x, y = days[keep], values[keep]
    if len(x) < 2 or np.ptp(x) == 0:
        return math.nan, math.nan
    xc = x - x.mean()
    slope = float((xc * (y - y.mean())).sum() / (xc**2).sum())
    if len(x) < 3:
        return slope, math.nan
    residual = y - y.mean() - slope * xc
    return slope, float(math.sqrt((residual**2).sum() / (len(x) - 2) / (xc**2).sum()))


def fleet_trends(episodes: Sequence[EpisodeGap], min_growth_per_day: float = MIN_GROWTH_PER_DAY,
                 ) -> tuple[list[ArmTrend], np.ndarray]:
    """Per-arm trends, ranked by growth (fastest first), and the (E, J) relative gaps."""
    relative = _relative(episodes)
    trends = []
    for robot in sorted({e.robot_id for e in episodes}):
        rows = np.array([e.robot_id == robot for e in episodes])
        days = np.array([e.day for e in episodes])[rows]
        with np.errstate(all="ignore"):
            logs = np.log(relative[rows])
        fits = [_slope(days, logs[:, j]) for j in range(len(JOINT_NAMES))]
        slopes = np.array([f[0] for f in fits])
        errors = np.array([f[1] for f in fits])
        growth = float(np.nanmedian(slopes)) if np.isfinite(slopes).any() else math.nan
        stderr = float(np.nanmedian(errors)) if np.isfinite(errors).any() else math.nan
        last = np.flatnonzero(rows)[int(np.argmax(days))]
        growing = bool(growth > min_growth_per_day and (not math.isfinite(stderr) or growth > 2 * stderr))
        trends.append(ArmTrend(robot, int(rows.sum()), float(np.ptp(days)) if len(days) else 0.0, growth, stderr,
                               growing, {j: _num(s) for j, s in zip(JOINT_NAMES, slopes, strict=True)},
                               {j: _num(g) for j, g in zip(JOINT_NAMES, episodes[last].gap, strict=True)}))
    trends.sort(key=lambda t: -t.growth_per_day if math.isfinite(t.growth_per_day) else math.inf)
    return trends, relative


def write_fleet_report(root: Path | str, out: Path | str, min_growth_per_day: float = MIN_GROWTH_PER_DAY,
                       ) -> dict[str, Any]:
    """Write the report (see the module doc) and return its JSON content."""
    episodes = load_summaries(root)
    trends, relative = fleet_trends(episodes, min_growth_per_day)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    figures = [("fleet-wide distribution", _distribution_plot(episodes, out / "fleet_distribution.png")),
               ("growth ranking", _ranking_plot(trends, min_growth_per_day, out / "growth_ranking.png"))]
    for trend in trends:
        figures.append((f"{trend.robot_id}: relative gap over time",
                        _trend_plot(trend.robot_id, episodes, relative, out / f"trend_{trend.robot_id}.png")))
    gaps = np.vstack([e.gap for e in episodes])
    report = {
        "format": "so101_fleet.report/1", "dataset": str(root), "metric": "/".join(TREND_METRIC), "unit": "rad",
        "episodes": len(episodes), "arms": len(trends), "min_growth_per_day": min_growth_per_day,
        "growing": [t.robot_id for t in trends if t.growing],
        "ranking": [asdict(t) for t in trends],
        "fleet_distribution": {j: {"median": _num(np.nanmedian(gaps[:, k])), "p10": _num(np.nanpercentile(gaps[:, k], 10)),
                                   "p90": _num(np.nanpercentile(gaps[:, k], 90))} for k, j in enumerate(JOINT_NAMES)},
    }
    (out / "fleet_report.json").write_text(json.dumps(report, indent=1))
    (out / "index.html").write_text(_html(report, figures))
    return report


def _num(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def _trend_plot(robot: str, episodes: Sequence[EpisodeGap], relative: np.ndarray, path: Path) -> Path:
    rows = [i for i, e in enumerate(episodes) if e.robot_id == robot]
    order = sorted(rows, key=lambda i: episodes[i].day)
    days = np.array([episodes[i].day for i in order])
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for k, joint in enumerate(JOINT_NAMES):
        line, = top.plot(days, relative[order, k], "o-", label=joint)
        bottom.plot(days, [episodes[i].gap[k] for i in order], "o-", color=line.get_color())
    top.axhline(1.0, color="#7f7f7f", lw=0.8, ls="--")
    top.set_ylabel("gap / fleet median (same task)")
    bottom.set_ylabel("position RMSE real vs sim (rad)")
    bottom.set_xlabel("day")
    top.set_title(f"{robot}: sim-to-real gap over time")
    top.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _distribution_plot(episodes: Sequence[EpisodeGap], path: Path) -> Path:
    gaps = np.vstack([e.gap for e in episodes])
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.hist(np.nanmean(gaps, axis=1), bins=min(40, max(5, len(episodes) // 3)), color="#1f77b4")
    left.set_xlabel("episode mean position RMSE (rad)")
    left.set_ylabel("episodes")
    right.boxplot([gaps[np.isfinite(gaps[:, k]), k] for k in range(gaps.shape[1])], tick_labels=list(JOINT_NAMES))
    right.tick_params(axis="x", rotation=30, labelsize=7)
    right.set_ylabel("position RMSE (rad)")
    fig.suptitle(f"fleet-wide gap: {len(episodes)} episodes")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _ranking_plot(trends: Sequence[ArmTrend], min_growth_per_day: float, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.25 * len(trends))))
    names = [t.robot_id for t in trends][::-1]
    values = [100 * t.growth_per_day if math.isfinite(t.growth_per_day) else 0.0 for t in trends][::-1]
    ax.barh(names, values, color=["#d62728" if t.growing else "#7f7f7f" for t in trends][::-1])
    ax.axvline(100 * min_growth_per_day, color="#000000", lw=0.8, ls="--")
    ax.set_xlabel("gap growth (% per day)")
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _html(report: dict[str, Any], figures: list[tuple[str, Path]]) -> str:
    def pct(value: float | None) -> str:
        return "–" if value is None or not math.isfinite(value) else f"{100 * value:+.2f}"

    rows = "".join(
        f"<tr><td>{i}</td><td>{html.escape(t['robot_id'])}</td><td>{t['episodes']}</td><td>{t['days_span']:.1f}</td>"
        f"<td>{pct(t['growth_per_day'])} ± {pct(t['growth_stderr']).lstrip('+')}</td>"
        f"<td>{'<b>growing</b>' if t['growing'] else ''}</td>"
        f"<td>{max((v for v in t['latest_gap'].values() if v is not None), default=float('nan')):.4f}</td></tr>"
        for i, t in enumerate(report["ranking"], start=1))
    images = "".join(f"<h3>{html.escape(title)}</h3><img src='{path.name}' alt='{html.escape(title)}'>"
                     for title, path in figures)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>SO-101 fleet gap report</title>"
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}</style></head><body>"
            f"<h1>SO-101 fleet gap report</h1><p>{report['episodes']} episodes of {report['arms']} arms from "
            f"{html.escape(report['dataset'])}; gap = {report['metric']} between the real arm and the MuJoCo replay, "
            "relative to the fleet's median for the same task and joint.</p>"
            f"<p>Arms whose gap grows: <b>{html.escape(', '.join(report['growing']) or 'none')}</b></p>"
            "<table><tr><th>rank</th><th>arm</th><th>episodes</th><th>days</th><th>growth %/day</th><th></th>"
            f"<th>latest worst-joint RMSE (rad)</th></tr>{rows}</table>{images}</body></html>")
