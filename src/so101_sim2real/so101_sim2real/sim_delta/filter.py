"""The replay's command filter for a ``sim_delta`` model: ``a + Δ(sim history, a, upcoming a)``.

Called once per control tick by :meth:`so101_sim2real.replay.mujoco_backend.MujocoSim.simulate` with the
tick's time, the held nominal command and the simulated state. It knows the whole command stream
(the replay does), so it hands the model the current command and the ``future_steps − 1`` after it,
chosen with the same zero-order hold as the simulator. Δ is clipped to the model's bounds (ticks where the
model asked for more are counted in :attr:`SimDeltaFilter.out_of_bounds`). A non-finite Δ applies the
nominal command and is counted, or, with ``stop_on_fault`` (``so101 replay``), raises :class:`SimDeltaFault`:
a replay must not quietly turn into an uncompensated one. The
history is warm from the first tick (front-padded with the first row, as in training). A recurrent
model (``metadata.state_size > 0``) holds its state in its runtime: the filter takes the model's
``reset_state`` and starts the stream with it, so one loaded model serves one filter at a time.
"""

from __future__ import annotations

import bisect
import logging
import math
from collections.abc import Callable

import numpy as np

from so101_gaponet.metadata import GapModelMetadata

__all__ = ["DeltaFunction", "SimDeltaFault", "SimDeltaFilter"]

_log = logging.getLogger(__name__)

DeltaFunction = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""``(history (H, 3J), commands (K, J)) -> Δ (J,)`` in rad, e.g. :meth:`so101_gaponet.runtime.GapModel.delta`.

Both inputs are the filter's own buffers, rewritten every tick: read them during the call, copy to keep them."""


class SimDeltaFault(ValueError):
    """The model gave a non-finite Δ (raised with ``stop_on_fault``)."""


class SimDeltaFilter:
    """Per-tick ``a + Δ`` for one command stream; record of the Δ applied per tick in :attr:`deltas`."""

    def __init__(self, delta: DeltaFunction, metadata: GapModelMetadata, command_time: np.ndarray,
                 command: np.ndarray, reset_state: Callable[[], None] | None = None, stop_on_fault: bool = False) -> None:
        if metadata.state_size and reset_state is None:
            raise ValueError("a recurrent sim-delta model needs its reset_state (e.g. GapModel.reset_state) to start a stream")
        if reset_state is not None:
            reset_state()
        self._delta = delta
        self._history_len, self._future = metadata.history, metadata.future_steps
        self._upper = np.asarray(metadata.delta_bounds, dtype=np.float64)
        self._lower = -self._upper
        self._time = np.asarray(command_time, dtype=np.float64).tolist()  # bisect on a list: a tenth of searchsorted's call
        command = np.asarray(command, dtype=np.float64)
        # The command stream with its last row repeated future_steps − 1 times: the look-ahead is one slice.
        self._command = np.vstack([command, np.repeat(command[-1:], self._future - 1, axis=0)])
        self._last_index = len(command) - 1
        self._joints = joints = command.shape[1]
        self._ring = np.zeros((self._history_len, 3 * joints))
        self._upcoming = np.zeros((self._future, joints))
        self._previous: np.ndarray | None = None
        self.deltas: list[np.ndarray] = []
        self.faults = 0  # ticks where the model gave a non-finite Δ (logged; the nominal command was applied)
        self.out_of_bounds = 0  # ticks where the model asked for a Δ beyond its bounds (clipped)
        self.stop_on_fault = stop_on_fault

    def __call__(self, time: float, target: np.ndarray, position: np.ndarray, velocity: np.ndarray) -> np.ndarray:
        held = bisect.bisect_right(self._time, time + 1e-9) - 1  # the simulator's zero-order hold
        held = min(max(held, 0), self._last_index)
        ring, joints = self._ring, self._joints
        last = ring[-1]
        if self._previous is None:  # the first tick: its command is also the previous one
            self._previous = np.array(target, dtype=np.float64)
        else:
            ring[:-1] = ring[1:]
        last[:joints] = position
        last[joints:2 * joints] = velocity
        last[2 * joints:] = self._previous
        if not self.deltas:
            ring[:-1] = last  # warm history: front-padded with the first row, as in training
        self._previous[:] = target
        upcoming = self._upcoming
        upcoming[:] = self._command[held:held + self._future]
        upcoming[0] = target  # the tick's own command (equal to the held row; the simulator's copy is authoritative)
        wanted = self._delta(ring, upcoming)
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
        self.deltas.append(delta)
        return target + delta
