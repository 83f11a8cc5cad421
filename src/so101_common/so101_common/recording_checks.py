"""Is a recorded motion plausible? One clear error for times that jump and values that cannot be radians.

Every reader of recorded motions (SAGE motion files and run folders, bags) calls these on what it read,
in seconds and radians, before anything is simulated or fitted: a corrupt file otherwise turns into
absurd work (a +1e12 µs jump planned a 16,667-minute fit and a 1.5 GiB replay) or absurd data (a
motion in degrees replayed to sim states of 33 rad; a first row of 1e308 froze the simulator).

- :func:`check_times`: finite, never going back, no step longer than ``max_gap_s``, no longer in all
  than ``max_duration_s``; the error says where the jump is.
- :func:`check_positions`: every value within the joint's range widened by ``margin`` rad, else the
  error names the joint, the value, where it is, and hints at degrees.
- :func:`check_recording`: both. Each takes ``error``, the exception class a reader raises for a bad file
  (default :class:`RecordingCheckError`), so a reader's callers catch what they already catch.

Limits, from SAGE's 34 real SO-101 runs: the longest is 205 s and its largest step between two rows 21 ms;
every value lies inside the joint spec's ranges.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from so101_common.joints import JOINT_NAMES, joint

__all__ = ["RecordingCheckError", "MAX_GAP_S", "MAX_DURATION_S", "RANGE_MARGIN_RAD", "check_times", "check_positions",
           "check_recording"]

MAX_GAP_S = 60.0
"""s: the longest step between two consecutive samples of a recording (SAGE's real runs: 21 ms)."""
MAX_DURATION_S = 3600.0
"""s: the longest recording (SAGE's real runs: 205 s; an hour replays in ~100 MB at 200 Hz)."""
RANGE_MARGIN_RAD = 1.0
"""rad: how far beyond its joint's range a recorded value may lie: an arm calibrated at a homing pose that is
not the URDF's zero records values ~0.8 rad off, and such a recording is still what the arm did; a motion in
degrees leaves the range plus this margin at 3° (gripper) to 4° (wrist roll)."""


class RecordingCheckError(ValueError):
    """A recording whose times or values are not plausible; ``str()`` is one line saying where."""


def _where(index: int, first_line: int | None) -> str:
    return f"line {first_line + index}" if first_line is not None else f"sample {index}"


def check_times(time_s: ArrayLike, source: object, *, first_line: int | None = None, max_gap_s: float = MAX_GAP_S,
                max_duration_s: float = MAX_DURATION_S, error: type[Exception] = RecordingCheckError) -> None:
    """Raise ``error`` unless ``time_s`` (s) is finite, never decreases, steps at most
    ``max_gap_s`` between samples and spans at most ``max_duration_s``. ``first_line``: the file line of the
    first sample (then the error names lines, else sample indexes)."""
    time = np.asarray(time_s, dtype=np.float64).reshape(-1)
    if time.size == 0:
        return
    bad = np.flatnonzero(~np.isfinite(time))
    if bad.size:
        raise error(f"{source}: {_where(int(bad[0]), first_line)}: timestamp {time[bad[0]]} is not a number")
    steps = np.diff(time)
    if steps.size:
        back = np.flatnonzero(steps < 0)
        if back.size:
            i = int(back[0])
            raise error(f"{source}: time goes back by {-steps[i]:.6g} s from {_where(i, first_line)} to "
                                      f"{_where(i + 1, first_line)} ({time[i]:.6g} → {time[i + 1]:.6g} s)")
        i = int(steps.argmax())
        if steps[i] > max_gap_s:
            raise error(
                f"{source}: time jumps by {steps[i]:.6g} s from {_where(i, first_line)} to {_where(i + 1, first_line)} "
                f"({time[i]:.6g} → {time[i + 1]:.6g} s; at most {max_gap_s:g} s between samples): a corrupt or spliced "
                f"recording; cut it at the jump")
    duration = float(time[-1] - time[0])
    if duration > max_duration_s:
        raise error(f"{source}: the recording spans {duration:.6g} s, more than {max_duration_s:g} s: "
                                  "split it into shorter recordings")


def check_positions(position_rad: ArrayLike, source: object, names: Sequence[str] = JOINT_NAMES, *,
                    first_line: int | None = None, margin: float = RANGE_MARGIN_RAD, allow_nan: bool = False,
                    error: type[Exception] = RecordingCheckError) -> None:
    """Raise ``error`` unless every value of ``position_rad`` ``(N, J)`` (rad, columns
    ``names``) lies within its joint's range widened by ``margin`` rad; NaN (an unmeasured sample) is
    refused unless ``allow_nan``."""
    position = np.asarray(position_rad, dtype=np.float64)
    if position.size == 0:
        return
    position = position.reshape(len(position), -1)
    for column, name in enumerate(names):
        spec = joint(name)
        values = position[:, column]
        lower, upper = spec.lower - margin, spec.upper + margin
        with np.errstate(invalid="ignore"):
            outside = ~((values >= lower) & (values <= upper)) if not allow_nan else (values < lower) | (values > upper)
        if not outside.any():
            continue
        i = int(np.flatnonzero(outside)[0])
        value = float(values[i])
        range_text = f"its range is [{spec.lower:.3g}, {spec.upper:.3g}] rad"
        if math.isnan(value):
            raise error(f"{source}: {_where(i, first_line)}: {name} is not a number ({range_text})")
        in_degrees = math.isfinite(value) and abs(value) > math.pi and lower <= math.radians(value) <= upper
        hint = "; is the file in degrees? Radians = degrees × π/180" if in_degrees else "; not a joint angle in radians"
        raise error(f"{source}: {_where(i, first_line)}: {name} = {value:.6g}, which cannot be radians for "
                                  f"this joint ({range_text}){hint}")


def check_recording(time_s: ArrayLike, position_rad: ArrayLike, source: object, names: Sequence[str] = JOINT_NAMES, *,
                    first_line: int | None = None, allow_nan: bool = False,
                    error: type[Exception] = RecordingCheckError) -> None:
    """:func:`check_times` and :func:`check_positions` with their default limits."""
    check_times(time_s, source, first_line=first_line, error=error)
    check_positions(position_rad, source, names, first_line=first_line, allow_nan=allow_nan, error=error)
