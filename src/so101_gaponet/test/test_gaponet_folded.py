"""The per-joint compensator's ONNX file holds the folded network: the same Δ as the trained module, half the
nodes once onnxruntime has loaded it, and the trainable weights under their names (per-arm refinement reads them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from so101_common.joints import JOINT_NAMES
from so101_gaponet.export import reproduction_error, write_and_check
from so101_gaponet.folded import FoldedJointInputs, exported_module
from so101_gaponet.inputs import RelativeStateInputs
from so101_gaponet.metadata import HISTORY_FEATURES, GapModelMetadata, Normalisation
from so101_gaponet.model_file import graph_weights, load_model, save_onnx
from so101_gaponet.models import ArchConfig, build_model
from so101_gaponet.train import load_start

J, H, K = len(JOINT_NAMES), 4, 5  # K: the file's command rows (the network reads one more: the gravity pose)
COLUMNS = len(HISTORY_FEATURES) * J


def _compensator(kind: str, measured_inputs: bool = False) -> tuple[RelativeStateInputs, GapModelMetadata]:
    """A compensator with random weights and a normalisation that is not the identity (the fold must carry it)."""
    torch.manual_seed(4)
    rng = np.random.default_rng(4)
    norm = Normalisation(history_mean=tuple(rng.uniform(-0.5, 0.5, COLUMNS)), history_std=tuple(rng.uniform(0.2, 1.5, COLUMNS)),
                         command_mean=tuple(rng.uniform(-0.5, 0.5, J)), command_std=tuple(rng.uniform(0.2, 1.5, J)),
                         delta_mean=(0.0,) * J, delta_std=(0.02,) * J)
    arch = ArchConfig(kind=kind, joints=J, history=H, features=len(HISTORY_FEATURES), future_steps=K + 1, hidden=16)
    module = RelativeStateInputs(build_model(arch), norm, JOINT_NAMES, rng.uniform(0.01, 0.05, J), measured_inputs=measured_inputs)
    meta = GapModelMetadata(role="compensator", model_kind=kind, joints=JOINT_NAMES, history=H, future_steps=K, rate_hz=50.0,
                            horizon=K, normalisation=norm, delta_bounds=(0.2,) * J, architecture=arch.record())
    return module.eval(), meta


def _inputs(count: int) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(9)
    return (torch.from_numpy(rng.standard_normal((count, H, COLUMNS)).astype(np.float32)),
            torch.from_numpy(rng.standard_normal((count, K, J)).astype(np.float32)))


def _nodes_at_run(path: Path, optimised: Path) -> int:
    """How many nodes onnxruntime runs per call, once it has optimised the graph for a batch of one (as the runtime)."""
    options = ort.SessionOptions()
    options.add_free_dimension_override_by_name("batch", 1)
    options.log_severity_level = 3  # (its notice that an optimised graph is for this machine only)
    options.optimized_model_filepath = str(optimised)
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return len(onnx.load(str(optimised)).graph.node)


@pytest.mark.parametrize("measured_inputs", [False, True])
def test_the_folded_network_is_the_trained_one(measured_inputs: bool, tmp_path: Path) -> None:
    module, meta = _compensator("joint_mlp", measured_inputs)
    folded, keeps_weights = exported_module(module, meta)
    assert isinstance(folded, FoldedJointInputs) and keeps_weights
    history, commands = _inputs(16)
    with torch.no_grad():
        expected = module(history, commands).numpy()
        np.testing.assert_allclose(folded(history, commands).numpy(), expected, rtol=1e-6, atol=1e-5)
    # float32 rounding of outputs up to ~50 (random weights on inputs scaled by 1/Δ's spread)
    assert write_and_check(module, meta, tmp_path / "model.onnx", "onnx") <= 1e-5 + 1e-6 * np.abs(expected).max()


def test_the_file_runs_half_the_nodes_and_keeps_the_weights_it_is_refined_from(tmp_path: Path) -> None:
    module, meta = _compensator("joint_mlp")
    unfolded = save_onnx(module, meta, tmp_path / "unfolded.onnx")
    folded = tmp_path / "folded.onnx"
    write_and_check(module, meta, folded, "onnx")
    at_run, before = _nodes_at_run(folded, tmp_path / "o1.onnx"), _nodes_at_run(unfolded, tmp_path / "o2.onnx")
    assert at_run <= 12 and 2 * at_run <= before, (at_run, before)
    weights = graph_weights(folded)
    for name, parameter in module.named_parameters():
        np.testing.assert_array_equal(weights[name], parameter.detach().numpy(), err_msg=name)
    start = load_start(folded)  # the trainable network, rebuilt from the folded file
    assert reproduction_error(start.module, meta, load_model(folded)) < 1e-5
    assert not isinstance(start.module, FoldedJointInputs)


def test_other_networks_are_exported_as_they_are() -> None:
    module, meta = _compensator("mlp")
    assert exported_module(module, meta) == (module, False)
