"""How far the virtual arm's physics ran behind wall time, as wall seconds per band of lag (no rclpy).

A physical arm never lags: its servos answer with the arm as it is. The virtual arm's physics is a
thread that must get about a third of a core; on a machine too busy to give it that, the servos answer
with an arm as old as the thread is behind, and a recording shows that age as lag on top of the arm's
gap. :class:`LagClock` accumulates, each time the thread wakes, the wall time since its previous wake
in the band of the lag it finds (the lag only grows while it waits: the band of its end); a
:class:`LagHistogram` is a snapshot of those totals, and the difference of two is an interval's
(``so101 demo`` reads one per recording from ``so101 virtual-bus --status-file``).
"""

from __future__ import annotations

import bisect
import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LAG_BANDS_MS", "LagClock", "LagHistogram", "read_status_file", "write_status_file"]

# lower edges of the bands above the first (ms): under 5, 5–10, 10–20, 20–40, 40–80, 80 and more
LAG_BANDS_MS: tuple[float, ...] = (5.0, 10.0, 20.0, 40.0, 80.0)


@dataclass(frozen=True)
class LagHistogram:
    """Wall seconds spent in each band of lag (``len(LAG_BANDS_MS) + 1`` bands, lowest first)."""

    seconds: tuple[float, ...] = (0.0,) * (len(LAG_BANDS_MS) + 1)

    def __post_init__(self) -> None:
        if len(self.seconds) != len(LAG_BANDS_MS) + 1:
            raise ValueError(f"expected {len(LAG_BANDS_MS) + 1} bands, got {len(self.seconds)}")

    @property
    def total_s(self) -> float:
        return sum(self.seconds)

    def since(self, earlier: LagHistogram) -> LagHistogram:
        """The interval between ``earlier`` and this snapshot of the same clock."""
        return LagHistogram(tuple(max(0.0, a - b) for a, b in zip(self.seconds, earlier.seconds, strict=True)))

    def fraction_behind(self, at_least_ms: float) -> float:
        """The share of the time the physics was ``at_least_ms`` (a band's edge) or more behind; 0 without time."""
        if at_least_ms not in LAG_BANDS_MS:
            raise ValueError(f"{at_least_ms} ms is not a band edge; they are {LAG_BANDS_MS}")
        total = self.total_s
        return sum(self.seconds[LAG_BANDS_MS.index(at_least_ms) + 1:]) / total if total > 0 else 0.0

    def to_dict(self) -> dict[str, object]:
        return {"bands_ms": list(LAG_BANDS_MS), "seconds": [round(s, 4) for s in self.seconds]}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> LagHistogram:
        bands, seconds = data.get("bands_ms"), data.get("seconds")
        if not isinstance(bands, list) or bands != list(LAG_BANDS_MS):
            raise ValueError(f"lag bands {bands!r} are not {list(LAG_BANDS_MS)}")
        if not isinstance(seconds, list) or not all(isinstance(s, (int, float)) for s in seconds):
            raise ValueError(f"lag seconds {seconds!r} are not a list of numbers")
        return cls(tuple(float(s) for s in seconds))


class LagClock:
    """The physics thread's running totals (thread-safe: the thread records, anyone snapshots)."""

    def __init__(self) -> None:
        self._seconds = [0.0] * (len(LAG_BANDS_MS) + 1)
        self._lock = threading.Lock()

    def record(self, lag_s: float, interval_s: float) -> None:
        """``interval_s`` of wall time that ended ``lag_s`` behind."""
        band = bisect.bisect_right(LAG_BANDS_MS, lag_s * 1000.0)
        with self._lock:
            self._seconds[band] += max(0.0, interval_s)

    def snapshot(self) -> LagHistogram:
        with self._lock:
            return LagHistogram(tuple(self._seconds))


def write_status_file(path: str | os.PathLike[str], lag: LagHistogram, overruns: int) -> None:
    """The running virtual arm's status for other processes, replaced whole (a reader never sees half)."""
    target = Path(path)
    partial = target.with_name(target.name + ".partial")
    partial.write_text(json.dumps({"physics_lag": lag.to_dict(), "overruns": overruns}))
    os.replace(partial, target)


def read_status_file(path: str | os.PathLike[str]) -> LagHistogram:
    """The physics' lag so far from :func:`write_status_file`'s file. Raises ``OSError``/``ValueError``."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or not isinstance(data.get("physics_lag"), dict):
        raise ValueError(f"{path} holds no physics_lag")
    return LagHistogram.from_dict(data["physics_lag"])
