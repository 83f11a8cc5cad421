"""The sim-delta model's inputs, built the same way offline (training) and online (replay filter).

History rows follow the contract's layout ``[position, velocity, previous_command]``: the state of
the arm Δ drives (the simulated arm; during supervised training, the real trajectory the sim is
meant to follow) and the *nominal* command in force on the previous step — the command the real
arm received in the recording, before Δ. Feeding the nominal command rather than ``a + Δ`` keeps
the model from reading its own past outputs (no feedback loop through the history) and gives it
what the real arm's lag depends on: the commands of the last ~100 ms. Rows before the first one
repeat the first row (the runtime does the same during warm-up). Command rows: the current
command, then the next ``future_steps − 1``, the last one repeated past the end of the motion.
Play offsets: the play (backlash) operators on each joint's command stream, the model's recurrent
state (:class:`..network.PlayStateModel` steps the same recursion in the exported graph).
"""

from __future__ import annotations

import numpy as np

__all__ = ["history_rows", "history_windows", "command_windows", "previous_commands", "play_offsets"]


def previous_commands(command: np.ndarray) -> np.ndarray:
    """``(N, J)``: the nominal command in force before each step (the first step: its own command)."""
    return np.vstack([command[:1], command[:-1]])


def history_rows(position: np.ndarray, velocity: np.ndarray, previous_command: np.ndarray) -> np.ndarray:
    """``(N, 3J)`` rows in the contract's feature order."""
    return np.concatenate([position, velocity, previous_command], axis=1)


def history_windows(rows: np.ndarray, history: int) -> np.ndarray:
    """``(N, H, C)``: for each step the last ``history`` rows ending at it, oldest first, front-padded."""
    padded = np.vstack([np.repeat(rows[:1], history - 1, axis=0), rows])
    return np.lib.stride_tricks.sliding_window_view(padded, history, axis=0).transpose(0, 2, 1)


def command_windows(command: np.ndarray, future_steps: int) -> np.ndarray:
    """``(N, K, J)``: ``command[i], command[i+1], …`` (clamped at the last row) for each step ``i``."""
    index = np.minimum(np.arange(len(command))[:, None] + np.arange(future_steps)[None, :], len(command) - 1)
    return command[index]


def play_offsets(command: np.ndarray, initial_position: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """``(N, R, J)``: ``y_t − a_t`` of the play operators ``y_t = clip(y_{t−1}, a_t − r, a_t + r)``, ``y_{−1}`` = the initial position."""
    radii = np.asarray(radii, dtype=np.float64).reshape(-1, 1)
    command = np.asarray(command, dtype=np.float64)
    offsets = np.empty((len(command), len(radii), command.shape[1]))
    output = np.broadcast_to(np.asarray(initial_position, dtype=np.float64), (len(radii), command.shape[1]))
    for t, current in enumerate(command):
        output = np.minimum(np.maximum(output, current - radii), current + radii)
        offsets[t] = output - current
    return offsets
