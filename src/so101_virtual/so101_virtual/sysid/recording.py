"""A recorded motion as system identification needs it: per command frame, the command and the
position the arm reported right after it (SAGE's real layout records them that way; a bag's state
stream is interpolated onto its command stamps by the loader)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from so101_common.joints import JOINT_NAMES

__all__ = ["Recording", "RecordingError"]


class RecordingError(ValueError):
    """A recording that cannot be used for fitting (too short, non-finite, times not increasing)."""


@dataclass(frozen=True, eq=False)
class Recording:
    """One motion: ``time`` (N,) s, ``command`` and ``state`` (N, J) rad in :data:`JOINT_NAMES` order.

    ``state[k]`` is what the arm reported right after ``command[k]`` was sent (before it could act on
    it), so a perfect servo with no lag would have ``state[k] == command[k - 1]``.
    """

    name: str
    time: np.ndarray
    command: np.ndarray
    state: np.ndarray
    source: str = ""  # where it came from, for messages and reports

    def __post_init__(self) -> None:
        time = np.asarray(self.time, dtype=np.float64).reshape(-1)
        command = np.asarray(self.command, dtype=np.float64)
        state = np.asarray(self.state, dtype=np.float64)
        where = self.source or self.name
        shape = (len(time), len(JOINT_NAMES))
        if command.shape != shape or state.shape != shape:
            raise RecordingError(f"{where}: command {command.shape} and state {state.shape} must both be {shape}")
        if len(time) < 10:
            raise RecordingError(f"{where}: {len(time)} frames; at least 10 are needed to fit anything")
        if not (np.isfinite(time).all() and np.isfinite(command).all() and np.isfinite(state).all()):
            raise RecordingError(f"{where}: non-finite times, commands or states")
        if not np.all(np.diff(time) > 0.0):
            raise RecordingError(f"{where}: times must increase strictly")
        object.__setattr__(self, "time", time - time[0])
        object.__setattr__(self, "command", command)
        object.__setattr__(self, "state", state)

    @property
    def duration(self) -> float:
        """Seconds from the first to the last frame."""
        return float(self.time[-1])

    @property
    def frame_period(self) -> float:
        """Median seconds between frames."""
        return float(np.median(np.diff(self.time)))

    def window(self, start: int, stop: int) -> Recording:
        """Frames ``start:stop`` as a recording of their own (time from 0 again)."""
        return Recording(f"{self.name}[{start}:{stop}]", self.time[start:stop], self.command[start:stop],
                         self.state[start:stop], self.source)
