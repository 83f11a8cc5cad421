"""ONNX and TorchScript runners behind one interface, with the metadata's normalisation applied here.

Both runners are built for one call per control step: single-threaded, inputs preallocated, no
allocation beyond what the backend itself does. A recurrent model (``metadata.state_size > 0``)
keeps its state here: every call advances it, :meth:`GapModel.reset_state` starts a new stream. The model file contract (what is validated and
how files are recognised) lives in :mod:`so101_gaponet.model_file`.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from so101_gaponet.metadata import GapModelMetadata

__all__ = ["GapModel", "OnnxGapModel", "TorchScriptGapModel", "ProbeReport"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProbeReport:
    """What the load probe saw: the model run on an arm at rest at poses across its declared normalisation range."""

    inputs: int  # probe inputs run
    range_std: float  # the poses lie within the position normalisation's mean ± range_std · std
    out_of_bounds: int  # inputs on which some joint's Δ left the metadata's bounds
    largest_ratio: float  # the largest |Δ| / bound seen (any joint, any input)
    worst_joint: str  # the joint of largest_ratio

    @property
    def within_bounds(self) -> bool:
        return self.out_of_bounds == 0

    def describe(self) -> str:
        if self.within_bounds:
            return f"within bounds on {self.inputs} probe inputs (largest |Δ| {self.largest_ratio:.2g} × bound)"
        return (f"Δ beyond its bounds on {self.out_of_bounds} of {self.inputs} probe inputs (an arm at rest inside its "
                f"normalisation range, ±{self.range_std:g} std): up to {self.largest_ratio:.3g} × the bound on {self.worst_joint}")


class GapModel(ABC):
    """A loaded gap model (either role): ``delta(history, commands)`` in physical units (rad)."""

    format_name: str = ""

    def __init__(self, path: Path, metadata: GapModelMetadata) -> None:
        self.path = path
        self.metadata = metadata
        norm = metadata.normalisation
        self._history_mean = np.asarray(norm.history_mean, dtype=np.float32)
        self._history_scale = 1.0 / np.asarray(norm.history_std, dtype=np.float32)
        self._command_mean = np.asarray(norm.command_mean, dtype=np.float32)
        self._command_scale = 1.0 / np.asarray(norm.command_std, dtype=np.float32)
        self._delta_mean = np.asarray(norm.delta_mean, dtype=np.float64)
        self._delta_std = np.asarray(norm.delta_std, dtype=np.float64)
        # Preallocated, normalised model inputs (batch of one).
        self._history_in = np.zeros((1, metadata.history, metadata.history_columns), dtype=np.float32)
        self._commands_in = np.zeros((1, metadata.future_steps, metadata.num_joints), dtype=np.float32)
        # Recurrent state (batch of one); zeros = the start of a stream, as the graph expects.
        self._state = np.zeros((1, metadata.state_size), dtype=np.float32)
        self.probe: ProbeReport | None = None  # set by so101_gaponet.model_file.load_model

    @property
    def stateful(self) -> bool:
        return self.metadata.state_size > 0

    @property
    def state(self) -> np.ndarray:
        """A copy of the recurrent state the next call will read, ``(state_size,)``."""
        return self._state[0].copy()

    def reset_state(self) -> None:
        """Start a new stream: the next call reads a zero state (no-op for a stateless model)."""
        self._state[:] = 0.0

    def delta(self, history: np.ndarray, commands: np.ndarray) -> np.ndarray:
        """Δ (rad, unclipped, float64, ``(J,)``) for raw ``history`` ``(H, F·J)`` and ``commands`` ``(future_steps, J)``.

        ``commands[0]`` is the current command, the rows after it the upcoming ones.
        """
        history_in, commands_in = self._history_in[0], self._commands_in[0]
        np.subtract(history, self._history_mean, out=history_in, casting="unsafe")
        history_in *= self._history_scale
        np.subtract(commands, self._command_mean, out=commands_in, casting="unsafe")
        commands_in *= self._command_scale
        raw = self.run_normalised(self._history_in, self._commands_in)
        return raw[0] * self._delta_std + self._delta_mean  # float64: the scales are

    @abstractmethod
    def run_normalised(self, history: np.ndarray, commands: np.ndarray) -> np.ndarray:
        """The bare model on normalised float32 inputs ``(B, H, F·J)``, ``(B, future_steps, J)`` → ``(B, J)``.

        A recurrent model reads its held state (batch of one) and keeps the state it returns.
        """

    def describe(self) -> dict[str, Any]:
        """A flat summary for diagnostics and logs."""
        meta = self.metadata
        return {
            "model_path": str(self.path),
            "model_format": self.format_name,
            "model_role": meta.role,
            "model_kind": meta.model_kind,
            "history": meta.history,
            "future_steps": meta.future_steps,
            "rate_hz": meta.rate_hz,
            "horizon": meta.horizon,
            "trained_on": ",".join(str(d) for d in meta.provenance.get("datasets", [])),
            "trained_date": str(meta.provenance.get("date", "")),
            "git_rev": str(meta.provenance.get("git_rev", "")),
            "load_probe": "not run" if self.probe is None else self.probe.describe(),
        }


class OnnxGapModel(GapModel):
    """onnxruntime on the CPU, one intra-/inter-op thread."""

    format_name = "onnx"

    def __init__(self, path: Path, metadata: GapModelMetadata, session: Any) -> None:
        super().__init__(path, metadata)
        self._session = session
        self._input_names = [i.name for i in session.get_inputs()]
        self._output_names = [o.name for o in session.get_outputs()[: 2 if self.stateful else 1]]
        # The step's own buffers bound to the session once, by address: a step runs the graph on them with no
        # feed dictionary, input check or output allocation (measured: ~20 µs of a ~90 µs run, package README).
        self._delta_out = np.zeros((1, metadata.num_joints), dtype=np.float32)
        self._next_state = np.zeros_like(self._state)  # apart from the input: the graph reads the state while it writes
        self._binding = session.io_binding()
        inputs = (self._history_in, self._commands_in, self._state)[: 3 if self.stateful else 2]
        for name, array in zip(self._input_names, inputs, strict=True):
            self._binding.bind_input(name, "cpu", 0, np.float32, list(array.shape), array.ctypes.data)
        for name, array in zip(self._output_names, (self._delta_out, self._next_state), strict=False):
            self._binding.bind_output(name, "cpu", 0, np.float32, list(array.shape), array.ctypes.data)

    @staticmethod
    def make_session(model_bytes: bytes, batch_dims: Sequence[str] = ()) -> Any:
        """A session for batches of one: ``batch_dims``, the graph's symbolic batch dimensions, are fixed
        to 1, so onnxruntime folds the shape arithmetic once instead of on every call."""
        import onnxruntime as ort

        options = ort.SessionOptions()
        for name in batch_dims:
            options.add_free_dimension_override_by_name(name, 1)
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        return ort.InferenceSession(model_bytes, sess_options=options, providers=["CPUExecutionProvider"])

    def run_normalised(self, history: np.ndarray, commands: np.ndarray) -> np.ndarray:
        if history is self._history_in and commands is self._commands_in:  # the step's own buffers: bound
            self._session.run_with_iobinding(self._binding)
            if self.stateful:
                self._state[:] = self._next_state
            return self._delta_out
        feeds = {self._input_names[0]: history, self._input_names[1]: commands}
        if not self.stateful:
            return self._session.run(self._output_names, feeds)[0]
        feeds[self._input_names[2]] = self._state
        delta, next_state = self._session.run(self._output_names, feeds)
        self._state[:] = next_state
        return delta


class TorchScriptGapModel(GapModel):
    """``torch.jit`` module under ``torch.no_grad()`` with one intra-op thread."""

    format_name = "torchscript"

    def __init__(self, path: Path, metadata: GapModelMetadata, module: Any) -> None:
        import torch

        super().__init__(path, metadata)
        torch.set_num_threads(1)
        self._torch = torch
        self._module = module.eval()
        # Tensors sharing memory with the preallocated numpy inputs: no copy per step.
        self._history_tensor = torch.from_numpy(self._history_in)
        self._commands_tensor = torch.from_numpy(self._commands_in)
        self._state_tensor = torch.from_numpy(self._state)

    def run_normalised(self, history: np.ndarray, commands: np.ndarray) -> np.ndarray:
        torch = self._torch
        with torch.no_grad():
            if history is self._history_in and commands is self._commands_in:
                inputs = (self._history_tensor, self._commands_tensor)
            else:
                inputs = (torch.from_numpy(np.ascontiguousarray(history, dtype=np.float32)),
                          torch.from_numpy(np.ascontiguousarray(commands, dtype=np.float32)))
            if not self.stateful:
                return self._module(*inputs).numpy()
            delta, next_state = self._module(*inputs, self._state_tensor)
            self._state[:] = next_state.numpy()
        return delta.numpy()
