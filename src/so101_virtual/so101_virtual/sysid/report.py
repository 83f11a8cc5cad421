"""The fit report: per arm joint, how the physical arm and the virtual one (fitted, and the base
profile it started from) track the recorded commands, on recordings the fit did not use.

Targets (``so101 fit-profile`` prints whether they hold): the virtual arm's command→state RMSE within
±25 % of the physical arm's, and its lag within one frame of the physical arm's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from so101_common.atomic_output import staged_folder
from so101_common.joints import ARM_JOINT_NAMES, JOINT_NAMES
from so101_virtual.sysid.fit import FitResult
from so101_virtual.sysid.metrics import state_rmse, tracking_lag, tracking_rmse
from so101_virtual.sysid.recording import Recording

__all__ = ["JointComparison", "RMSE_TOLERANCE", "LAG_TOLERANCE_FRAMES", "compare", "format_table", "write_report"]

RMSE_TOLERANCE = 0.25  # virtual RMSE within ±25 % of the physical arm's
LAG_TOLERANCE_FRAMES = 1.0

_ARM = [JOINT_NAMES.index(n) for n in ARM_JOINT_NAMES]


@dataclass(frozen=True)
class JointComparison:
    """One arm joint on the evaluation recordings (RMSE in rad, lag in frames)."""

    joint: str
    real_rmse: float
    virtual_rmse: float
    real_lag: float
    virtual_lag: float
    base_rmse: float  # the base profile's command→state RMSE
    base_lag: float
    base_state_error: float  # RMSE of the base profile's state against the recorded state
    virtual_state_error: float  # the same for the fitted profile

    @property
    def ratio(self) -> float:
        return self.virtual_rmse / self.real_rmse if self.real_rmse > 0.0 else math.nan

    @property
    def base_ratio(self) -> float:
        return self.base_rmse / self.real_rmse if self.real_rmse > 0.0 else math.nan

    @property
    def rmse_ok(self) -> bool:
        return abs(self.ratio - 1.0) <= RMSE_TOLERANCE

    @property
    def lag_ok(self) -> bool:
        return abs(self.virtual_lag - self.real_lag) <= LAG_TOLERANCE_FRAMES


def compare(recordings: Sequence[Recording], fitted: Sequence[np.ndarray],
            base: Sequence[np.ndarray]) -> list[JointComparison]:
    """Per arm joint figures of the real, fitted and base arms on ``recordings``."""
    commands = [r.command for r in recordings]
    states = [r.state for r in recordings]
    figures = {
        "real_rmse": tracking_rmse(commands, states), "virtual_rmse": tracking_rmse(commands, fitted),
        "real_lag": tracking_lag(commands, states), "virtual_lag": tracking_lag(commands, fitted),
        "base_rmse": tracking_rmse(commands, base), "base_lag": tracking_lag(commands, base),
        "base_state_error": state_rmse(base, states), "virtual_state_error": state_rmse(fitted, states),
    }
    return [JointComparison(JOINT_NAMES[j], **{k: float(v[j]) for k, v in figures.items()}) for j in _ARM]


def format_table(rows: Sequence[JointComparison]) -> str:
    """The per-joint table as printed (and pasted into READMEs)."""
    head = ("| joint | real RMSE (rad) | virtual RMSE (rad) | ratio | base ratio | real lag (frames) "
            "| virtual lag (frames) | state error base → fitted (rad) |")
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        mark_r = "" if r.rmse_ok else " ✗"
        mark_l = "" if r.lag_ok else " ✗"
        lines.append(f"| {r.joint} | {r.real_rmse:.4f} | {r.virtual_rmse:.4f} | {r.ratio:.2f}{mark_r} | "
                     f"{r.base_ratio:.2f} | {r.real_lag:.2f} | {r.virtual_lag:.2f}{mark_l} | "
                     f"{r.base_state_error:.4f} → {r.virtual_state_error:.4f} |")
    return "\n".join(lines)


def _plot(path: Path, recording: Recording, fitted: np.ndarray, base: np.ndarray) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(_ARM), 1, figsize=(10, 2.2 * len(_ARM)), sharex=True)
    for ax, j in zip(axes, _ARM, strict=True):
        ax.plot(recording.time, recording.command[:, j], color="0.6", lw=1, label="command")
        ax.plot(recording.time, recording.state[:, j], color="k", lw=1.2, label="real")
        ax.plot(recording.time, base[:, j], color="tab:blue", lw=1, ls="--", label="base profile")
        ax.plot(recording.time, fitted[:, j], color="tab:red", lw=1, label="fitted profile")
        ax.set_ylabel(f"{JOINT_NAMES[j]}\n(rad)")
    axes[0].legend(loc="upper right", ncol=4, fontsize=8)
    axes[0].set_title(f"{recording.name}: real vs fitted virtual vs base virtual")
    axes[-1].set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_report(folder: str | Path, result: FitResult, rows: Sequence[JointComparison],
                 recordings: Sequence[Recording], fitted: Sequence[np.ndarray], base: Sequence[np.ndarray],
                 command_line: str = "") -> list[Path]:
    """``fit_report.json`` and ``fit_report.png`` (the evaluation recording where the arm moves most): complete or
    absent (written under a temporary name, published when both are written, the JSON last)."""
    folder = Path(folder)
    data = {
        "command": command_line,
        "profile": result.profile.name,
        "evaluated_on": [r.name for r in recordings],
        "fitted_on": result.windows,
        "simulations": result.simulations,
        "targets": {"rmse_ratio_tolerance": RMSE_TOLERANCE, "lag_tolerance_frames": LAG_TOLERANCE_FRAMES},
        "joints": [asdict(r) | {"ratio": r.ratio, "rmse_ok": r.rmse_ok, "lag_ok": r.lag_ok} for r in rows],
        "met": all(r.rmse_ok and r.lag_ok for r in rows),
        "fit_error": {"initial": dict(zip(JOINT_NAMES, result.initial_error.tolist(), strict=True)),
                      "fitted": dict(zip(JOINT_NAMES, result.fitted_error.tolist(), strict=True))},
        "parameters": {"initial": result.initial.overlay(), "fitted": result.fitted.overlay()},
    }
    names = ["fit_report.json"]
    with staged_folder(folder, marker="fit_report.json") as staging:
        (staging / "fit_report.json").write_text(json.dumps(data, indent=2, allow_nan=True) + "\n")
        if recordings:
            motion = [float(np.abs(np.diff(r.command[:, _ARM], axis=0)).sum()) for r in recordings]
            k = int(np.argmax(motion))
            _plot(staging / "fit_report.png", recordings[k], fitted[k], base[k])
            names.append("fit_report.png")
    return [folder / name for name in names]
