"""Small real model files built once per test session (tiny networks, trained for one epoch)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from so101_gaponet.model_file import save_onnx, save_torchscript
from so101_gaponet.synthetic import make_dataset
from so101_gaponet.train import TrainConfig, TrainResult, train


@pytest.fixture(scope="session")
def lag_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("data") / "lag", profile="lag", episodes=3, seconds=12.0, seed=1)


@pytest.fixture(scope="session", params=["deeponet", "mlp"])
def tiny(request: pytest.FixtureRequest, lag_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[TrainResult, Path, Path]:
    """(trained result, ONNX file, TorchScript file) for each architecture."""
    result = train([lag_dataset], TrainConfig(arch=request.param, history=3, epochs=1, hidden=16, progress=False))
    folder = tmp_path_factory.mktemp(request.param)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        onnx_path = save_onnx(result.module, result.metadata, folder / "model.onnx")
        ts_path = save_torchscript(result.module, result.metadata, folder / "model.pt")
    return result, onnx_path, ts_path
