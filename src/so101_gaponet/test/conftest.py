"""Small real model files built once per test session (tiny networks, trained for one epoch)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from so101_common.joints import JOINT_NAMES
from so101_gaponet.metadata import GapModelMetadata, Normalisation
from so101_gaponet.model_file import save_onnx, save_torchscript, write_onnx
from so101_gaponet.runtime import GapModel
from so101_gaponet.synthetic import make_dataset
from so101_gaponet.train import TrainConfig, TrainResult, train


class ErrorFeedbackModel(GapModel):
    """A model with a known law: Δ = gain · (target − latest measured position), identity normalisation,
    no integral feedback (the law alone)."""

    format_name = "test"

    def __init__(self, template: GapModelMetadata, gain: float, sign_flip: bool = False) -> None:
        columns, joints = template.history_columns, template.num_joints
        norm = Normalisation(history_mean=(0.0,) * columns, history_std=(1.0,) * columns, command_mean=(0.0,) * joints,
                             command_std=(1.0,) * joints, delta_mean=(0.0,) * joints, delta_std=(1.0,) * joints)
        super().__init__(Path("feedback"), template.model_copy(update={"normalisation": norm, "feedback_gain": None}))
        self.gain, self.sign_flip, self.calls = gain, sign_flip, 0

    def run_normalised(self, history: np.ndarray, commands: np.ndarray) -> np.ndarray:
        self.calls += 1
        sign = -1.0 if self.sign_flip and self.calls % 2 else 1.0  # a model that chatters step to step
        return sign * self.gain * (commands[:, 0] - history[:, -1, :6])


@pytest.fixture()
def feedback_model(tiny: tuple[TrainResult, Path, Path]) -> Callable[..., ErrorFeedbackModel]:
    """Factory of :class:`ErrorFeedbackModel` on the metadata of a trained model (joints, rate, history)."""
    return lambda gain, sign_flip=False: ErrorFeedbackModel(tiny[0].metadata, gain, sign_flip)


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


def write_adversarial_onnx(path: Path, bound: float, slew: float | None = None, role: str = "compensator") -> Path:
    """The model of issue 19: Δ = 0 on an all-zero (normalised) input, 1e9 rad on every other joint input;
    metadata ``delta_bounds`` = ``bound`` for every joint (1e30 in the issue), identity normalisation, 50 Hz,
    history 1. Built with onnx.helper (no training): ``sign(Σ|history| + Σ|commands|) · 1e9``."""
    from onnx import TensorProto, helper

    joints, columns = len(JOINT_NAMES), 3 * len(JOINT_NAMES)
    norm = Normalisation(history_mean=(0.0,) * columns, history_std=(1.0,) * columns, command_mean=(0.0,) * joints,
                         command_std=(1.0,) * joints, delta_mean=(0.0,) * joints, delta_std=(1.0,) * joints)
    meta = GapModelMetadata(role=role, model_kind="linear", joints=JOINT_NAMES, history=1, future_steps=1, rate_hz=50.0,
                            horizon=1, normalisation=norm, delta_bounds=(bound,) * joints,
                            delta_slew_limit=None if slew is None else (slew,) * joints)
    axes = helper.make_tensor("axes", TensorProto.INT64, [2], [1, 2])
    one = helper.make_tensor("one", TensorProto.INT64, [1], [1])
    big = helper.make_tensor("big", TensorProto.FLOAT, [1, joints], [1e9] * joints)
    nodes = [helper.make_node("Abs", ["history"], ["abs_h"]), helper.make_node("Abs", ["commands"], ["abs_c"]),
             helper.make_node("ReduceSum", ["abs_h", "axes"], ["sum_h"], keepdims=0),
             helper.make_node("ReduceSum", ["abs_c", "axes"], ["sum_c"], keepdims=0),
             helper.make_node("Add", ["sum_h", "sum_c"], ["total"]), helper.make_node("Sign", ["total"], ["nonzero"]),
             helper.make_node("Unsqueeze", ["nonzero", "one"], ["column"]),
             helper.make_node("Mul", ["column", "big"], ["delta"])]
    graph = helper.make_graph(
        nodes, "adversarial", [helper.make_tensor_value_info("history", TensorProto.FLOAT, ["batch", 1, columns]),
                               helper.make_tensor_value_info("commands", TensorProto.FLOAT, ["batch", 1, joints])],
        [helper.make_tensor_value_info("delta", TensorProto.FLOAT, ["batch", joints])], initializer=[axes, one, big])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)  # onnxruntime reads ≤ 13
    return write_onnx(proto, meta, path)


@pytest.fixture()
def adversarial_onnx(tmp_path: Path) -> Callable[..., Path]:
    """Factory ``(bound, slew=None, role="compensator") -> path`` of :func:`write_adversarial_onnx` files."""
    return lambda bound, slew=None, role="compensator": write_adversarial_onnx(
        tmp_path / f"adversarial_{role}_{bound:g}_{slew}.onnx", bound, slew, role)
