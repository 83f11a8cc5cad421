"""The replay's command filter for a ``sim_delta`` model: ``a + Δ(sim history, a, upcoming a)``.

Called once per control tick by :meth:`so101_sim2real.replay.mujoco_backend.MujocoSim.simulate` (or the live
twin, :mod:`so101_sim2real.twin`) with the tick's time, the held nominal command and the simulated state. The
model reads the current command and the ``future_steps − 1`` after it: :class:`SimDeltaFilter` knows the whole
command stream (an offline replay does) and picks them with the same zero-order hold as the simulator;
:class:`LiveSimDeltaFilter` does not, and reads them from the policy's latest action chunk at the model's
rate (the current command held where there is no chunk, as the compensator does). Δ is clipped to the
model's bounds (ticks where the model asked for more are counted in ``out_of_bounds``). A non-finite Δ applies the
nominal command and is counted, or, with ``stop_on_fault`` (``so101 replay``), raises :class:`SimDeltaFault`: a
replay must not quietly turn into an uncompensated one. The history is warm from the first tick (front-padded with
the first row, as in training).
A recurrent model (``metadata.state_size > 0``) holds its state in its runtime: the filter takes the
model's ``reset_state`` and starts each stream with it, so one loaded model serves one filter at a time.
"""

from __future__ import annotations

import bisect
import logging
import math
from collections.abc import Callable, Sequence

import numpy as np

from so101_gaponet.chunks import ActionChunk
from so101_gaponet.metadata import GapModelMetadata

__all__ = ["DeltaFunction", "SimDeltaFault", "SimDeltaFilter", "LiveSimDeltaFilter"]

_log = logging.getLogger(__name__)

DeltaFunction = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""``(history (H, 3J), commands (K, J)) -> Δ (J,)`` in rad, e.g. :meth:`so101_gaponet.runtime.GapModel.delta`.

Both inputs are the filter's own buffers, rewritten every tick: read them during the call, copy to keep them."""


class SimDeltaFault(ValueError):
    """The model gave a non-finite Δ (raised with ``stop_on_fault``)."""


class _DeltaTicks:
    """What both filters share: the simulated history ring, the clipped Δ, the non-finite guard."""

    def __init__(self, delta: DeltaFunction, metadata: GapModelMetadata, joints: int,
                 reset_state: Callable[[], None] | None, stop_on_fault: bool = False) -> None:
        if metadata.state_size and reset_state is None:
            raise ValueError("a recurrent sim-delta model needs its reset_state (e.g. GapModel.reset_state) to start a stream")
        self._delta = delta
        self._reset_state = reset_state
        self._history_len, self._future = metadata.history, metadata.future_steps
        self._upper = np.asarray(metadata.delta_bounds, dtype=np.float64)
        self._lower = -self._upper
        self._joints = joints
        self._ring = np.zeros((self._history_len, 3 * joints))
        self._upcoming = np.zeros((self._future, joints))
        self.faults = 0  # ticks where the model gave a non-finite Δ (logged; the nominal command was applied)
        self.out_of_bounds = 0  # ticks where the model asked for a Δ beyond its bounds (clipped)
        self.stop_on_fault = stop_on_fault
        self.restart()

    def restart(self) -> None:
        """Start a new stream: cold history, the model's recurrent state reset."""
        if self._reset_state is not None:
            self._reset_state()
        self._previous: np.ndarray | None = None
        self.ticks = 0
        self.last_delta = np.zeros(self._joints)

    def _look_ahead(self, time: float, target: np.ndarray, upcoming: np.ndarray) -> None:
        """Fill ``upcoming`` (future_steps, J) with the tick's command and the ones after it."""
        raise NotImplementedError

    def __call__(self, time: float, target: np.ndarray, position: np.ndarray, velocity: np.ndarray) -> np.ndarray:
        ring, joints = self._ring, self._joints
        last = ring[-1]
        if self._previous is None:  # the first tick: its command is also the previous one
            self._previous = np.array(target, dtype=np.float64)
        else:
            ring[:-1] = ring[1:]
        last[:joints] = position
        last[joints:2 * joints] = velocity
        last[2 * joints:] = self._previous
        if not self.ticks:
            ring[:-1] = last  # warm history: front-padded with the first row, as in training
        self._previous[:] = target
        self._look_ahead(time, target, self._upcoming)
        wanted = self._delta(ring, self._upcoming)
        delta = np.minimum(np.maximum(wanted, self._lower), self._upper)
        if not math.isfinite(np.add.reduce(delta)):
            self.faults += 1
            if self.stop_on_fault:
                raise SimDeltaFault(f"the sim-delta model returned a non-finite Δ {np.asarray(wanted).tolist()} at "
                                    f"t={time:.3f} s")
            _log.warning("sim-delta model returned non-finite Δ at t=%.3f s (%d so far); applying the nominal command",
                         time, self.faults)
            delta = np.zeros_like(delta)
        elif not np.array_equal(delta, wanted):
            self.out_of_bounds += 1
        self.ticks += 1
        self.last_delta = delta
        return target + delta


class SimDeltaFilter(_DeltaTicks):
    """Per-tick ``a + Δ`` for one known command stream; record of the Δ applied per tick in :attr:`deltas`."""

    def __init__(self, delta: DeltaFunction, metadata: GapModelMetadata, command_time: np.ndarray,
                 command: np.ndarray, reset_state: Callable[[], None] | None = None, stop_on_fault: bool = False) -> None:
        command = np.asarray(command, dtype=np.float64)
        super().__init__(delta, metadata, command.shape[1], reset_state, stop_on_fault)
        self._time = np.asarray(command_time, dtype=np.float64).tolist()  # bisect on a list: a tenth of searchsorted's call
        # The command stream with its last row repeated future_steps − 1 times: the look-ahead is one slice.
        self._command = np.vstack([command, np.repeat(command[-1:], self._future - 1, axis=0)])
        self._last_index = len(command) - 1
        self.deltas: list[np.ndarray] = []

    def _look_ahead(self, time: float, target: np.ndarray, upcoming: np.ndarray) -> None:
        held = bisect.bisect_right(self._time, time + 1e-9) - 1  # the simulator's zero-order hold
        held = min(max(held, 0), self._last_index)
        upcoming[:] = self._command[held:held + self._future]
        upcoming[0] = target  # the tick's own command (equal to the held row; the simulator's copy is authoritative)

    def __call__(self, time: float, target: np.ndarray, position: np.ndarray, velocity: np.ndarray) -> np.ndarray:
        applied = super().__call__(time, target, position, velocity)
        self.deltas.append(self.last_delta)
        return applied


class LiveSimDeltaFilter(_DeltaTicks):
    """Per-tick ``a + Δ`` for a live command stream: the look-ahead from the latest action chunk."""

    def __init__(self, delta: DeltaFunction, metadata: GapModelMetadata, joints: Sequence[str],
                 reset_state: Callable[[], None] | None = None) -> None:
        super().__init__(delta, metadata, len(joints), reset_state)
        self.joints = tuple(joints)
        self.period = 1.0 / metadata.rate_hz  # s between the model's command rows
        self.future_rows = self._future - 1  # upcoming commands the model reads (0: the current one only)
        self.chunk: ActionChunk | None = None  # the policy's upcoming commands (absolute times)

    def _look_ahead(self, time: float, target: np.ndarray, upcoming: np.ndarray) -> None:
        upcoming[0] = target
        rows = self.future_rows
        ahead = self.chunk.upcoming(time, self.period, rows) if self.chunk is not None and rows else None
        upcoming[1:] = target if ahead is None else ahead  # no chunk, or a stale one: the command held
