"""Gap summaries (JSON) and reports (PNG + one self-contained HTML page) for paired datasets.

``summarize`` turns a dataset into plain JSON: per episode, quantity, metric and joint, plus the
mean over episodes ("overall"). ``write_report`` draws per-episode time plots (command, real, sim per
joint), a per-joint error bar chart and a summary table; ``write_comparison`` draws the grouped
before/after bar chart for two datasets (e.g. without/with compensation) and a delta table.

Faults are not gaps: samples inside an episode's servo-fault spans (``PairedEpisode.faults()``) are left
out of the metrics; the summary lists the spans (``faults``), the page has a table of them and the time
plots shade them.
"""

from __future__ import annotations

import base64
import html
import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from so101_common.atomic_output import staged_folder
from so101_common.joints import JOINT_NAMES
from so101_common.paired_dataset import FaultSpan, PairedDataset, PairedEpisode
from so101_common.servo_faults import format_fault
from so101_sim2real.analysis.metrics import QUANTITIES, MetricsConfig, episode_metrics

__all__ = ["SUMMARY_FORMAT", "ReportError", "summarize", "write_report", "write_comparison", "HEADLINE_METRICS"]

_LOG = logging.getLogger(__name__)

SUMMARY_FORMAT = "so101_sim2real.gap_summary/1"
HEADLINE_METRICS: tuple[str, ...] = ("rmse", "mae", "large_gap_ratio", "corr", "max_lag")
_UNITS = {"position": "rad", "velocity": "rad/s", "effort": "N·m"}
_COLOURS = {"command": "#7f7f7f", "real": "#1f77b4", "sim": "#d62728"}


class ReportError(ValueError):
    """Datasets that cannot be summarised or compared (empty, different joints)."""


def summarize(dataset: PairedDataset, config: MetricsConfig | None = None, source: str = "") -> dict[str, Any]:
    """Metrics of every episode and their mean over episodes, as JSON-ready dicts (NaN → null)."""
    config = config or MetricsConfig()
    if not len(dataset):
        raise ReportError(f"dataset {source or ''} has no episodes".replace("  ", " "))
    dt = 1.0 / dataset.rate_hz
    episodes: dict[str, Any] = {}
    stacked: dict[str, dict[str, list[np.ndarray]]] = {q: {} for q in QUANTITIES}
    for episode in dataset:
        episode_config = MetricsConfig(config.large_gap_thresholds,
                                       config.unsigned_real_effort or bool(episode.metadata.get("real_effort_unsigned")))
        healthy = _without_faults(episode)
        if healthy is None:
            _LOG.warning("episode %s is faulted throughout: no metrics", episode.name)
            continue
        metrics = episode_metrics(healthy, dt, episode_config)
        episodes[episode.name] = {q: {m: _per_joint(v) for m, v in metrics[q].items()} for q in QUANTITIES}
        for q in QUANTITIES:
            for m, v in metrics[q].items():
                stacked[q].setdefault(m, []).append(v)
    overall: dict[str, Any] = {}
    for q in QUANTITIES:
        overall[q] = {}
        for m, values in stacked[q].items():
            matrix = np.vstack(values)
            with np.errstate(invalid="ignore"):
                counts = np.isfinite(matrix).sum(axis=0)
                mean = np.where(counts > 0, np.nansum(matrix, axis=0) / np.maximum(counts, 1), np.nan)
            overall[q][m] = _per_joint(mean)
    return {
        "format": SUMMARY_FORMAT,
        "dataset": source,
        "rate_hz": dataset.rate_hz,
        "joints": list(JOINT_NAMES),
        "large_gap_thresholds": dict(config.large_gap_thresholds),
        "episodes": episodes,
        "overall": overall,
        # episodes paired from a cut bag: their data stops at the cut
        "truncated_inputs": {e.name: list(e.metadata["truncated"]) for e in dataset if e.metadata.get("truncated")},
        # servo faults (s on the episode's time axis): their samples are not in the metrics
        "faults": {e.name: [span.model_dump() for span in e.faults()] for e in dataset if e.faults()},
    }


def _without_faults(episode: PairedEpisode) -> PairedEpisode | None:
    """The episode without its faulted samples (itself when it has none; None when fewer than 2 remain)."""
    mask = episode.fault_mask()
    if not mask.any():
        return episode
    keep = ~mask
    if keep.sum() < 2:
        return None
    return PairedEpisode(episode.name, episode.time[keep], **{k: v[keep] for k, v in episode.arrays().items()
                                                               if k != "time"}, metadata=episode.metadata)


def write_report(dataset: PairedDataset, summary: dict[str, Any], out_dir: str | Path,
                 max_episode_plots: int = 40) -> Path:
    """PNG plots, ``summary.json`` and ``report.html`` (PNGs embedded) in ``out_dir``; returns the HTML path.
    Complete or absent: written under a temporary name, published when all is written (report.html last)."""
    with staged_folder(out_dir, marker="report.html") as staging:
        _write_report(dataset, summary, staging, max_episode_plots)
    return Path(out_dir) / "report.html"


def _write_report(dataset: PairedDataset, summary: dict[str, Any], out: Path, max_episode_plots: int) -> None:
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    figures: list[tuple[str, Path]] = []
    bars = out / "error_by_joint.png"
    _error_bars(summary, bars)
    figures.append(("Position error by joint (mean over episodes)", bars))
    for episode in list(dataset)[:max_episode_plots]:
        path = out / f"episode_{episode.name}_position.png"
        _time_plot(episode, path)
        figures.append((f"Episode {episode.name}: position", path))
    if len(dataset) > max_episode_plots:
        _LOG.info("plotted the first %d of %d episodes", max_episode_plots, len(dataset))
    tables = [("Overall (mean over episodes)", _metric_table(summary["overall"])),
              ("Position RMSE per episode (rad)", _episode_table(summary, "position", "rmse"))]
    if summary.get("truncated_inputs"):
        tables.insert(0, ("Episodes from truncated bags (data stops at the cut)", _truncation_table(summary)))
    if summary.get("faults"):
        tables.insert(0, ("Servo faults (their spans are shaded in the plots and left out of the metrics)",
                          _fault_table(summary)))
    page = _html_page(f"Sim-to-real gap: {summary.get('dataset') or 'dataset'}", tables, figures, summary)
    (out / "report.html").write_text(page)


def write_comparison(summaries: Sequence[dict[str, Any]], labels: Sequence[str], out_dir: str | Path) -> dict[str, Any]:
    """Grouped per-joint bars and a delta table for two summaries (before, after); returns the comparison."""
    if len(summaries) != 2 or len(labels) != 2:
        raise ReportError("a comparison takes exactly two datasets and two labels")
    if summaries[0]["joints"] != summaries[1]["joints"]:
        raise ReportError("the two datasets have different joints")
    delta: dict[str, Any] = {}
    for q in QUANTITIES:
        delta[q] = {}
        for m in ("rmse", "mae", "large_gap_ratio"):
            before = _array(summaries[0]["overall"][q][m])
            after = _array(summaries[1]["overall"][q][m])
            with np.errstate(invalid="ignore", divide="ignore"):
                change = np.where(before > 0, (after - before) / before * 100.0, np.nan)
            delta[q][m] = {"before": _per_joint(before), "after": _per_joint(after),
                           "delta": _per_joint(after - before), "change_percent": _per_joint(change)}
    comparison = {"format": SUMMARY_FORMAT + "+comparison", "labels": list(labels),
                  "datasets": [s.get("dataset", "") for s in summaries], "joints": summaries[0]["joints"],
                  "delta": delta}
    with staged_folder(out_dir, marker="comparison.html") as staging:
        _write_comparison(summaries, labels, comparison, staging)
    return comparison


def _write_comparison(summaries: Sequence[dict[str, Any]], labels: Sequence[str], comparison: dict[str, Any],
                      out: Path) -> None:
    delta = comparison["delta"]
    (out / "comparison.json").write_text(json.dumps(comparison, indent=2) + "\n")
    figures = []
    for m in ("rmse", "large_gap_ratio"):
        path = out / f"comparison_position_{m}.png"
        _grouped_bars(summaries, labels, "position", m, path)
        figures.append((f"Position {m}: {labels[0]} vs {labels[1]}", path))
    tables = [(f"{q.capitalize()} {m} ({labels[0]} → {labels[1]})", _delta_table(delta[q][m], labels))
              for q in ("position", "velocity") for m in ("rmse", "mae", "large_gap_ratio")]
    page = _html_page(f"Sim-to-real gap: {labels[0]} vs {labels[1]}", tables, figures, comparison)
    (out / "comparison.html").write_text(page)


# ----------------------------------------------------------------------------------------------- plots


def _time_plot(episode: PairedEpisode, path: Path, seconds: float = 15.0) -> None:
    """Command, real and sim per joint over the first ``seconds`` (longer spans blur into bands)."""
    shown = episode.time <= episode.time[0] + seconds
    t = episode.time[shown]
    healthy = ~episode.fault_mask()
    fig, axes = plt.subplots(3, 2, figsize=(12, 8.5), sharex=True)
    for j, (name, ax) in enumerate(zip(JOINT_NAMES, axes.T.ravel(), strict=True)):
        ax.plot(t, episode.command[shown, j], color=_COLOURS["command"], lw=1.0, ls="--", label="command")
        ax.plot(t, episode.real_position[shown, j], color=_COLOURS["real"], lw=1.4, label="real")
        ax.plot(t, episode.sim_position[shown, j], color=_COLOURS["sim"], lw=1.2, alpha=0.85, label="sim")
        rmse = np.sqrt(np.nanmean((episode.sim_position[healthy, j] - episode.real_position[healthy, j]) ** 2))
        for fault in episode.faults():
            if fault.joint in (name, "bus"):
                ax.axvspan(fault.start, t[-1] if fault.end is None else fault.end, color="#ffb3b3", alpha=0.5,
                           label=f"fault: {fault.fault}")
        ax.set_title(f"{name}  (sim−real RMSE {rmse:.3f} rad)", fontsize=10)
        ax.set_ylabel("rad")
        ax.grid(True, alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("time (s)")
    axes[0, 0].legend(loc="upper right", fontsize=8, ncol=3)
    span = "" if shown.all() else f" (first {seconds:g} s of {episode.time[-1]:.0f} s; RMSE over all)"
    fig.suptitle(f"{episode.name}: joint positions{span}", fontsize=13)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _error_bars(summary: dict[str, Any], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(9, 4))
    x = np.arange(len(JOINT_NAMES))
    for k, (m, colour) in enumerate((("rmse", "#1f77b4"), ("mae", "#ff7f0e"))):
        values = _array(summary["overall"]["position"][m])
        ax.bar(x + (k - 0.5) * 0.38, values, 0.38, label=m.upper(), color=colour)
    ax.set_xticks(x, JOINT_NAMES, rotation=15)
    ax.set_ylabel("sim − real position error (rad)")
    ax.set_title("Position gap by joint (mean over episodes)")
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _grouped_bars(summaries: Sequence[dict[str, Any]], labels: Sequence[str], quantity: str, metric: str,
                  path: Path) -> None:
    fig, ax = plt.subplots(figsize=(9, 4))
    x = np.arange(len(JOINT_NAMES))
    for k, (summary, label, colour) in enumerate(zip(summaries, labels, ("#9e9e9e", "#2ca02c"), strict=False)):
        values = _array(summary["overall"][quantity][metric])
        bars = ax.bar(x + (k - 0.5) * 0.38, values, 0.38, label=label, color=colour)
        ax.bar_label(bars, fmt="%.3f", fontsize=7, padding=1)
    ax.set_xticks(x, JOINT_NAMES, rotation=15)
    unit = "" if metric == "large_gap_ratio" else f" ({_UNITS[quantity]})"
    ax.set_ylabel(f"{metric}{unit}")
    ax.set_title(f"{quantity.capitalize()} {metric} by joint: {labels[0]} vs {labels[1]}")
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ----------------------------------------------------------------------------------------------- html


def _metric_table(overall: dict[str, Any]) -> str:
    head = "".join(f"<th>{html.escape(j)}</th>" for j in JOINT_NAMES)
    rows = []
    for q in QUANTITIES:
        for m in HEADLINE_METRICS:
            cells = "".join(f"<td>{_fmt(overall[q][m][j])}</td>" for j in JOINT_NAMES)
            rows.append(f"<tr><th>{q}</th><th>{m}</th>{cells}</tr>")
    return f"<table><tr><th>quantity</th><th>metric</th>{head}</tr>{''.join(rows)}</table>"


def _episode_table(summary: dict[str, Any], quantity: str, metric: str) -> str:
    head = "".join(f"<th>{html.escape(j)}</th>" for j in JOINT_NAMES)
    rows = "".join(
        f"<tr><th>{html.escape(name)}</th>" + "".join(f"<td>{_fmt(values[quantity][metric][j])}</td>"
                                                      for j in JOINT_NAMES) + "</tr>"
        for name, values in summary["episodes"].items())
    return f"<table><tr><th>episode</th>{head}</tr>{rows}</table>"


def _truncation_table(summary: dict[str, Any]) -> str:
    rows = "".join(f"<tr><th>{html.escape(name)}</th><td style='text-align:left'>{html.escape(note)}</td></tr>"
                   for name, notes in summary["truncated_inputs"].items() for note in notes)
    return f"<table><tr><th>episode</th><th>input</th></tr>{rows}</table>"


def _fault_table(summary: dict[str, Any]) -> str:
    rows = "".join(f"<tr><th>{html.escape(name)}</th><td style='text-align:left'>"
                   f"{html.escape(format_fault(FaultSpan(**span)))}</td></tr>"
                   for name, spans in summary["faults"].items() for span in spans)
    return f"<table><tr><th>episode</th><th>fault</th></tr>{rows}</table>"


def _delta_table(entry: dict[str, Any], labels: Sequence[str]) -> str:
    rows = "".join(
        f"<tr><th>{html.escape(j)}</th><td>{_fmt(entry['before'][j])}</td><td>{_fmt(entry['after'][j])}</td>"
        f"<td>{_fmt(entry['delta'][j])}</td><td>{_fmt(entry['change_percent'][j], percent=True)}</td></tr>"
        for j in JOINT_NAMES)
    return (f"<table><tr><th>joint</th><th>{html.escape(labels[0])}</th><th>{html.escape(labels[1])}</th>"
            f"<th>Δ</th><th>change</th></tr>{rows}</table>")


def _html_page(title: str, tables: list[tuple[str, str]], figures: list[tuple[str, Path]],
               data: dict[str, Any]) -> str:
    parts = [f"<h2>{html.escape(t)}</h2>{table}" for t, table in tables]
    for caption, path in figures:
        encoded = base64.b64encode(path.read_bytes()).decode("ascii")
        parts.append(f"<figure><img alt='{html.escape(caption)}' src='data:image/png;base64,{encoded}'>"
                     f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    style = ("body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;font-size:13px}"
             "th{background:#f4f4f4}img{max-width:100%}figcaption{color:#555;font-size:13px}")
    notes = ("<p>error = sim − real on a common time grid. max_lag &gt; 0: sim lags real. "
             "Real SAGE efforts are unsigned current estimates; those episodes compare |sim effort|.</p>")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body><h1>{html.escape(title)}</h1>{notes}{''.join(parts)}"
            f"<details><summary>JSON</summary><pre>{html.escape(json.dumps(data, indent=1)[:200000])}</pre>"
            f"</details></body></html>\n")


# ----------------------------------------------------------------------------------------------- helpers


def _per_joint(values: np.ndarray) -> dict[str, float | None]:
    return {name: (float(v) if math.isfinite(float(v)) else None) for name, v in zip(JOINT_NAMES, values, strict=True)}


def _array(per_joint: dict[str, float | None]) -> np.ndarray:
    return np.array([np.nan if per_joint[j] is None else per_joint[j] for j in JOINT_NAMES], dtype=np.float64)


def _fmt(value: float | None, percent: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    return f"{value:+.1f} %" if percent else f"{value:.4g}"
