"""The band of each joint's rolling gap on one arm in good order (no rclpy): recorded once, checked live.

A band file (YAML, :class:`TwinBand`) holds, per joint, the mean and standard deviation of the rolling RMSE
of the position gap (rad) and of the velocity gap (rad/s, where the arm reported velocities), taken over
every warm sample of recordings of this arm, and the band ``[low, high] = mean ∓ max(k·std, margin)``
(``low`` ≥ 0). The rolling window is the twin's (:class:`so101_sim2real.twin.RollingRmse`) and is stored
with the band: a twin with another window refuses the file. Samples inside a servo fault are left out
(faults are not gaps).

Sources: bags recorded with the twin running (its ``twin/gap`` topic: the gap of the twin that will check
the band, its sim-delta model included) or paired datasets (``sim − real`` of ``so101 pair --sim mujoco``:
the nominal MuJoCo, the twin without a sim-delta model). ``so101 twin-band`` writes the file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import yaml

from so101_common import topics
from so101_common.joints import JOINT_NAMES
from so101_common.paired_dataset import FaultSpan, PairedDataset
from so101_common.schema import Number, StrictModel, load_yaml
from so101_sim2real.twin import RollingRmse, TwinError

__all__ = ["BAND_FORMAT", "QuantityBand", "JointBand", "TwinBand", "Excursion", "GapSeries", "rolling_gap_rmse",
           "fit_band", "series_from_bag", "series_from_dataset", "load_band", "write_band", "QUANTITIES"]

BAND_FORMAT = "so101_sim2real.twin_band"
QUANTITIES = {"position": "rad", "velocity": "rad/s"}  # the gaps a band covers, and their units
DEFAULT_GAP_TOPIC = topics.absolute(topics.TWIN_GAP)


class QuantityBand(StrictModel):
    mean: Number  # of the rolling RMSE over the recordings
    std: Number
    low: Number  # the band: a rolling RMSE in [low, high] is this arm in good order
    high: Number


class JointBand(StrictModel):
    position: QuantityBand  # rad
    velocity: QuantityBand | None = None  # rad/s; None where the recordings had no measured velocity


class TwinBand(StrictModel):
    format: Literal["so101_sim2real.twin_band"] = "so101_sim2real.twin_band"  # BAND_FORMAT
    schema_version: Literal[1] = 1
    window_s: Number  # s, the rolling RMSE window the band was computed with
    k: Number  # band half-width in standard deviations
    samples: int  # warm samples the band was computed from
    sources: list[str]  # what was recorded (bags, datasets)
    joints: dict[str, JointBand]

    def check(self, position_rmse: np.ndarray, velocity_rmse: np.ndarray) -> list[Excursion]:
        """The joints whose rolling RMSE ((J,) in :data:`JOINT_NAMES` order) is outside the band."""
        found = []
        for index, name in enumerate(JOINT_NAMES):
            joint = self.joints.get(name)
            if joint is None:
                continue
            for quantity, values in (("position", position_rmse), ("velocity", velocity_rmse)):
                band = getattr(joint, quantity)
                value = float(values[index])
                if band is not None and math.isfinite(value) and not band.low <= value <= band.high:
                    found.append(Excursion(name, quantity, value, band.low, band.high))
        return found


@dataclass(frozen=True)
class Excursion:
    """One joint's rolling gap outside its band."""

    joint: str
    quantity: str  # "position" or "velocity"
    value: float
    low: float
    high: float

    def describe(self) -> str:
        unit = QUANTITIES[self.quantity]
        side = "above" if self.value > self.high else "below"
        return (f"{self.joint}: {self.quantity} gap RMSE {self.value:.4f} {unit} {side} its band "
                f"{self.low:.4f}–{self.high:.4f} {unit}")


@dataclass(frozen=True)
class GapSeries:
    """One recording's gaps (sim − real), (N,) s and (N, J) in :data:`JOINT_NAMES` order; ``keep`` (N,) False
    where a sample must be left out (a servo fault)."""

    source: str
    time: np.ndarray
    position_gap: np.ndarray
    velocity_gap: np.ndarray
    keep: np.ndarray


def rolling_gap_rmse(series: GapSeries, window_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Position and velocity rolling RMSE (M, J) at the series' warm, kept samples, as the twin computes them
    (a left-out sample restarts the window, as the twin restarts after a pause)."""
    rmse = RollingRmse(window_s)
    position, velocity = [], []
    start = None
    for k, stamp in enumerate(series.time):
        if not series.keep[k]:
            start = None
            continue
        if start is None:
            start = stamp
            rmse.reset()
        p, v = rmse.add(float(stamp), series.position_gap[k], series.velocity_gap[k])
        if stamp - start >= window_s - 1e-9:
            position.append(p)
            velocity.append(v)
    shape = (0, len(JOINT_NAMES))
    return (np.array(position) if position else np.zeros(shape)), (np.array(velocity) if velocity else np.zeros(shape))


def fit_band(series: Sequence[GapSeries], window_s: float, k: float = 4.0, position_margin: float = 0.005,
             velocity_margin: float = 0.05) -> TwinBand:
    """The band of the rolling gap over ``series`` (see the module doc)."""
    if not (window_s > 0 and k > 0 and position_margin >= 0 and velocity_margin >= 0):
        raise TwinError(f"window_s and k must be > 0 and the margins >= 0 (got {window_s}, {k}, "
                        f"{position_margin}, {velocity_margin})")
    rolled = [rolling_gap_rmse(s, window_s) for s in series]
    position = np.vstack([p for p, _ in rolled]) if rolled else np.zeros((0, len(JOINT_NAMES)))
    velocity = np.vstack([v for _, v in rolled]) if rolled else np.zeros((0, len(JOINT_NAMES)))
    if len(position) < 2:
        raise TwinError(f"the recordings hold {len(position)} warm samples: record more than {window_s:g} s "
                        "of the arm moving (twin running) or pair longer runs")

    def band(values: np.ndarray, margin: float) -> QuantityBand | None:
        values = values[np.isfinite(values)]
        if len(values) < 2:
            return None
        mean, std = float(values.mean()), float(values.std())
        half = max(k * std, margin)
        return QuantityBand(mean=mean, std=std, low=max(0.0, mean - half), high=mean + half)

    joints = {}
    for index, name in enumerate(JOINT_NAMES):
        position_band = band(position[:, index], position_margin)
        assert position_band is not None  # positions are always measured
        joints[name] = JointBand(position=position_band, velocity=band(velocity[:, index], velocity_margin))
    return TwinBand(window_s=window_s, k=k, samples=len(position), sources=[s.source for s in series], joints=joints)


def _outside(time: np.ndarray, spans: Iterable[FaultSpan]) -> np.ndarray:
    keep = np.ones(len(time), dtype=bool)
    for span in spans:
        end = math.inf if span.end is None else span.end
        keep &= ~((time >= span.start) & (time <= end))
    return keep


def series_from_bag(path: str | Path, gap_topic: str = DEFAULT_GAP_TOPIC) -> GapSeries:
    """The twin's gaps as a bag recorded them (``twin/gap``: position and velocity gaps by joint name)."""
    from so101_recorder.bag_reader import Bag, read_joint_states
    from so101_recorder.errors import RecorderError

    try:
        bag = Bag(path)
        gaps = read_joint_states(bag, gap_topic)
    except RecorderError as err:
        raise TwinError(f"cannot read the twin's gaps from {path}: {err}") from err
    if len(gaps) == 0:
        raise TwinError(f"bag {path}: no messages on {gap_topic} (was the twin running while it recorded?)")
    faults = bag.episode.faults if bag.episode is not None else []
    return GapSeries(str(path), gaps.time, gaps.position, gaps.velocity, _outside(gaps.time, faults))


def series_from_dataset(path: str | Path) -> list[GapSeries]:
    """``sim − real`` of every episode of a paired dataset (its fault masks left out)."""
    dataset = PairedDataset.load(path)
    return [GapSeries(f"{path}:{episode.name}", episode.time, episode.sim_position - episode.real_position,
                      episode.sim_velocity - episode.real_velocity, ~episode.fault_mask())
            for episode in dataset]


def load_band(path: str | Path) -> TwinBand:
    """A band file; one :class:`~so101_common.schema.SchemaError` line naming the file and key if it is wrong."""
    band = load_yaml(path, TwinBand)
    unknown = sorted(set(band.joints) - set(JOINT_NAMES))
    if unknown:
        raise TwinError(f"{path}: joints: unknown joints {unknown}; the arm's are {list(JOINT_NAMES)}")
    return band


def write_band(path: str | Path, band: TwinBand) -> Path:
    path = Path(path)
    header = (f"# Rolling gap band of one SO-101 (so101 twin-band): per joint, mean and std of the rolling RMSE of\n"
              f"# the twin's gap (sim − measured) over {band.window_s:g} s windows; band = mean ∓ max({band.k:g}·std, "
              f"margin).\n# Position in rad, velocity in rad/s.\n")
    path.write_text(header + yaml.safe_dump(band.model_dump(mode="json"), sort_keys=False))
    return path
