"""Exported models reproduce the torch module: ONNX vs TorchScript vs torch on random inputs."""

from __future__ import annotations

import numpy as np
import torch

from so101_gaponet.model_file import load_model


def test_onnx_torchscript_and_torch_agree(tiny) -> None:
    result, onnx_path, ts_path = tiny
    meta = result.metadata
    rng = np.random.default_rng(42)
    history = rng.standard_normal((5, meta.history, meta.history_columns)).astype(np.float32)
    commands = rng.standard_normal((5, meta.future_steps, meta.num_joints)).astype(np.float32)
    with torch.no_grad():
        golden = result.module(torch.from_numpy(history), torch.from_numpy(commands)).numpy()
    for path in (onnx_path, ts_path):
        model = load_model(path)
        got = np.vstack([model.run_normalised(history[i:i + 1], commands[i:i + 1]) for i in range(5)])
        np.testing.assert_allclose(got, golden, atol=1e-5, err_msg=str(path))
    assert np.abs(golden).max() > 1e-3  # a non-trivial output, not zeros everywhere


def test_runtime_applies_the_metadata_normalisation(tiny) -> None:
    result, onnx_path, _ = tiny
    meta, norm = result.metadata, result.metadata.normalisation
    rng = np.random.default_rng(7)
    history = rng.standard_normal((meta.history, meta.history_columns)) * 0.3
    commands = rng.standard_normal((meta.future_steps, meta.num_joints)) * 0.3
    h_n = (history - np.array(norm.history_mean)) / np.array(norm.history_std)
    c_n = (commands - np.array(norm.command_mean)) / np.array(norm.command_std)
    with torch.no_grad():
        raw = result.module(torch.tensor(h_n[None], dtype=torch.float32), torch.tensor(c_n[None], dtype=torch.float32)).numpy()[0]
    expected = raw * np.array(norm.delta_std) + np.array(norm.delta_mean)
    np.testing.assert_allclose(load_model(onnx_path).delta(history, commands), expected, atol=1e-5)
