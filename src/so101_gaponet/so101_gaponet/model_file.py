"""GapONet model files: ONNX or TorchScript with a JSON metadata record, validated on load.

- ONNX: the JSON sits in ``metadata_props`` under :data:`METADATA_KEY`.
- TorchScript: the JSON sits in the archive as ``_extra_files[TORCHSCRIPT_EXTRA_FILE]``.

The format is recognised from the content (a TorchScript archive is a zip), not the suffix.
:func:`load_model` refuses anything that does not fit: missing file, not a model, missing or
invalid metadata, another schema version, joints, rate or role other than its user's, a graph whose
input/output shapes disagree with the metadata, or one that gives NaN/inf on inputs inside its normalisation
range. The load probe runs the model on an arm at rest at poses across that range (:data:`PROBE_RANGE_STD`)
and keeps what it saw in
``GapModel.probe`` (a Δ beyond the metadata's bounds is reported there and logged, not refused: the
users clip it). Bounds against the deployment's caps: :mod:`so101_gaponet.bounds`.
"""

from __future__ import annotations

import io
import logging
import warnings
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from so101_common.atomic_output import atomic_file, write_bytes_atomically
from so101_gaponet.metadata import METADATA_KEY, TORCHSCRIPT_EXTRA_FILE, GapModelMetadata, ModelFileError
from so101_gaponet.runtime import GapModel, OnnxGapModel, ProbeReport, TorchScriptGapModel

__all__ = ["ModelFileError", "graph_weights", "load_model", "read_metadata", "save_onnx", "save_torchscript", "write_onnx"]

_log = logging.getLogger(__name__)


def _read_bytes(path: Path) -> bytes:
    if not path.is_file():
        raise ModelFileError(f"model file {path} does not exist")
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ModelFileError(f"model file {path} cannot be read: {err}") from err
    if not data:
        raise ModelFileError(f"model file {path} is empty")
    return data


def _onnx_metadata(path: Path, data: bytes) -> tuple[Any, GapModelMetadata]:
    import onnx
    from google.protobuf.message import DecodeError

    try:
        proto = onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as err:
        raise ModelFileError(f"{path} is neither a TorchScript archive nor an ONNX model: {err}") from err
    if not proto.graph.node:
        raise ModelFileError(f"{path} is not an ONNX model (no graph)")
    props = {p.key: p.value for p in proto.metadata_props}
    if METADATA_KEY not in props:
        raise ModelFileError(f"{path}: ONNX model has no {METADATA_KEY!r} metadata (not a GapONet model file)")
    return proto, GapModelMetadata.from_json(props[METADATA_KEY])


def _check_onnx_shapes(path: Path, session: Any, meta: GapModelMetadata) -> None:
    inputs, outputs = session.get_inputs(), session.get_outputs()
    expected_in: list[tuple[int, ...]] = [(meta.history, meta.history_columns), (meta.future_steps, meta.num_joints)]
    expected_out: list[tuple[int, ...]] = [(meta.num_joints,)]
    if meta.state_size:
        expected_in.append((meta.state_size,))
        expected_out.append((meta.state_size,))
    names = "(history, commands, state) and 2 outputs (delta, next_state)" if meta.state_size else "(history, commands) and 1 output"
    if len(inputs) != len(expected_in) or len(outputs) != len(expected_out):
        raise ModelFileError(f"{path}: expected {len(expected_in)} inputs {names}, got {len(inputs)} and {len(outputs)}")
    for kind, args, expected in (("input", inputs, expected_in), ("output", outputs, expected_out)):
        for arg, tail in zip(args, expected, strict=True):
            shape = list(arg.shape)
            if len(shape) != len(tail) + 1 or [int(s) for s in shape[1:] if isinstance(s, int)] != list(tail):
                raise ModelFileError(f"{path}: {kind} {arg.name!r} has shape {shape}, metadata says (batch, {', '.join(map(str, tail))})")


def _load_torchscript(path: Path, data: bytes) -> tuple[Any, GapModelMetadata]:
    import torch

    extra = {TORCHSCRIPT_EXTRA_FILE: ""}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch.jit deprecation notice
            module = torch.jit.load(io.BytesIO(data), map_location="cpu", _extra_files=extra)
    except (RuntimeError, ValueError) as err:
        raise ModelFileError(f"{path} is a zip archive but not a TorchScript model: {err}") from err
    text = extra[TORCHSCRIPT_EXTRA_FILE]
    if not text:
        raise ModelFileError(f"{path}: TorchScript model has no {TORCHSCRIPT_EXTRA_FILE!r} metadata (not a GapONet model file)")
    return module, GapModelMetadata.from_json(text)


def graph_weights(path: str | Path) -> dict[str, np.ndarray]:
    """An ONNX model file's named initializers (the weights a trainable module is rebuilt from)."""
    import onnx
    from onnx import numpy_helper

    return {i.name: numpy_helper.to_array(i) for i in onnx.load(str(path)).graph.initializer}


def read_metadata(path: str | Path) -> GapModelMetadata:
    """The validated metadata of a model file, without building a runner: the graph is neither loaded into a
    session nor probed (:func:`load_model` does both)."""
    path = Path(path)
    data = _read_bytes(path)
    if zipfile.is_zipfile(io.BytesIO(data)):
        return _load_torchscript(path, data)[1]
    return _onnx_metadata(path, data)[1]


def load_model(path: str | Path, joints: Sequence[str] | None = None, rate_hz: float | None = None,
               role: str | None = None) -> GapModel:
    """Load and validate a model file; ``joints``/``rate_hz``/``role`` are its user's configuration to check against."""
    path = Path(path)
    data = _read_bytes(path)
    model: GapModel
    if zipfile.is_zipfile(io.BytesIO(data)):
        module, meta = _load_torchscript(path, data)
        _checked(path, meta, joints, rate_hz, role)
        model = TorchScriptGapModel(path, meta, module)
    else:
        proto, meta = _onnx_metadata(path, data)
        _checked(path, meta, joints, rate_hz, role)
        batch_dims = {arg.type.tensor_type.shape.dim[0].dim_param for arg in proto.graph.input
                      if arg.type.tensor_type.shape.dim and arg.type.tensor_type.shape.dim[0].dim_param}
        try:
            session = OnnxGapModel.make_session(data, sorted(batch_dims))
        except Exception as err:  # onnxruntime raises its own exception types for invalid graphs
            raise ModelFileError(f"{path}: onnxruntime cannot load the graph: {err}") from err
        _check_onnx_shapes(path, session, meta)
        model = OnnxGapModel(path, meta, session)
    model.probe = _probe(path, model)
    _log.info("loaded %s model %s (%s %s, history %d, %d command rows at %g Hz)", model.format_name, path, meta.role,
              meta.model_kind, meta.history, meta.future_steps, meta.rate_hz)
    if not model.probe.within_bounds:
        _log.warning("%s: %s; it is clipped to them", path, model.probe.describe())
    return model


def _checked(path: Path, meta: GapModelMetadata, joints: Sequence[str] | None, rate_hz: float | None, role: str | None) -> None:
    try:
        meta.check_against(None if joints is None else tuple(joints), rate_hz, role)
    except ModelFileError as err:
        raise ModelFileError(f"{path}: {err}") from err


PROBE_RANGE_STD = 3.0  # the probe's poses lie within mean ± this many std of the model's position normalisation
PROBE_RANDOM_POSES = 8  # random poses (fixed seed) besides the constant ones


def _probe_poses(meta: GapModelMetadata) -> list[tuple[np.ndarray, np.ndarray]]:
    """Raw ``(history, commands)`` of an arm at rest at poses across the declared position range (each joint at
    its mean ± 1 and ± ``PROBE_RANGE_STD`` std, then random poses inside that range), commanded to stay."""
    joints = meta.num_joints
    mean = np.asarray(meta.normalisation.history_mean[:joints])  # the position columns come first
    std = np.asarray(meta.normalisation.history_std[:joints])
    rng = np.random.default_rng(0)
    levels: list[np.ndarray] = [np.full(joints, v) for v in (-1.0, 1.0, -PROBE_RANGE_STD, PROBE_RANGE_STD)]
    levels += [rng.uniform(-PROBE_RANGE_STD, PROBE_RANGE_STD, joints) for _ in range(PROBE_RANDOM_POSES)]
    inputs = []
    for level in levels:
        pose = mean + level * std
        row = np.concatenate([pose, np.zeros(joints), pose])  # position, velocity, previous command
        inputs.append((np.tile(row, (meta.history, 1)), np.tile(pose, (meta.future_steps, 1))))
    return inputs


def _probe(path: Path, model: GapModel) -> ProbeReport:
    """Run the model on its normalisation means (zeros), then on an arm at rest across its declared position
    range: a graph whose real shapes differ from the declared ones, or that gives NaN/inf there, is refused;
    one whose Δ leaves its bounds is reported."""
    meta = model.metadata
    try:
        out = model.run_normalised(np.zeros((1, meta.history, meta.history_columns), np.float32),
                                   np.zeros((1, meta.future_steps, meta.num_joints), np.float32))
    except Exception as err:  # backend-specific errors for shape mismatches
        raise ModelFileError(f"{path}: the model fails on inputs of the declared shapes: {err}") from err
    if tuple(np.shape(out)) != (1, meta.num_joints):
        raise ModelFileError(f"{path}: output shape {tuple(np.shape(out))} disagrees with the metadata's (1, {meta.num_joints})")
    norm = meta.normalisation
    deltas = [np.asarray(out[0], dtype=np.float64) * np.asarray(norm.delta_std) + np.asarray(norm.delta_mean)]
    for history, commands in _probe_poses(meta):
        model.reset_state()  # every probe starts a stream
        deltas.append(model.delta(history, commands))
    model.reset_state()  # the probe is not part of any stream
    bounds = np.asarray(meta.delta_bounds, dtype=np.float64)
    ratios = np.abs(np.array(deltas)) / bounds
    if not np.isfinite(ratios).all():
        raise ModelFileError(f"{path}: the model returns non-finite Δ on an arm at rest inside its normalisation "
                             f"range (position mean ± {PROBE_RANGE_STD:g} std)")
    worst = np.unravel_index(int(ratios.argmax()), ratios.shape)[1]
    return ProbeReport(len(deltas), PROBE_RANGE_STD, int((ratios > 1.0).any(axis=1).sum()), float(ratios.max()),
                       meta.joints[worst])


def save_onnx(module: Any, meta: GapModelMetadata, path: str | Path, fold_constants: bool = True) -> Path:
    """Export a torch module with ``forward(history, commands)`` to ONNX and attach the metadata.

    A recurrent model (``meta.state_size > 0``) has ``forward(history, commands, state) -> (delta, next_state)``.
    ``fold_constants=False`` leaves what reads only weights and buffers as the graph's nodes (onnxruntime folds them
    at load), so the weights stay the graph's named initializers (:mod:`so101_gaponet.folded`).
    """
    import onnx
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    module = module.eval()
    example: tuple[torch.Tensor, ...] = (torch.zeros(1, meta.history, meta.history_columns),
                                         torch.zeros(1, meta.future_steps, meta.num_joints))
    input_names, output_names = ["history", "commands"], ["delta"]
    if meta.state_size:  # recurrent: forward(history, commands, state) -> (delta, next_state)
        example += (torch.zeros(1, meta.state_size),)
        input_names.append("state")
        output_names.append("next_state")
    buffer = io.BytesIO()
    # The TorchScript-based exporter: ~0.1 s for these small graphs where the torch.export-based one
    # (dynamo=True) takes several seconds; both give the same graph here. Its deprecation notice is muted.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(module, example, buffer,  # type: ignore[arg-type]  # a file object works; torch annotates paths only
                          input_names=input_names, output_names=output_names,
                          dynamic_axes={name: {0: "batch"} for name in input_names + output_names},
                          opset_version=17, dynamo=False, do_constant_folding=fold_constants)
    proto = onnx.load_model_from_string(buffer.getvalue())
    proto.producer_name = "so101_gaponet"
    return write_onnx(proto, meta, path)


def write_onnx(proto: Any, meta: GapModelMetadata, path: str | Path) -> Path:
    """Attach ``meta`` to the ONNX model ``proto``, check it and write it to ``path``, complete or absent."""
    import onnx

    entry = proto.metadata_props.add()
    entry.key, entry.value = METADATA_KEY, meta.to_json()
    onnx.checker.check_model(proto)
    write_bytes_atomically(Path(path), proto.SerializeToString())
    return Path(path)


def save_torchscript(module: Any, meta: GapModelMetadata, path: str | Path) -> Path:
    """Script a torch module with ``forward(history, commands)`` and save it with the metadata."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit deprecation notices
        scripted = torch.jit.script(module.eval())
        with atomic_file(path) as tmp:  # complete or absent
            torch.jit.save(scripted, str(tmp), _extra_files={TORCHSCRIPT_EXTRA_FILE: meta.to_json()})
    return path
