"""Every architecture: output shape, bounded output on bounded input, and ONNX/TorchScript exports equal torch;
the population compensator's network (its branch over the history window, its file round trip)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from so101_common.joints import JOINT_NAMES
from so101_gaponet.context import ContextCompensator
from so101_gaponet.metadata import HISTORY_FEATURES, GapModelMetadata, ModelFileError, Normalisation
from so101_gaponet.model_file import load_model, save_onnx, save_torchscript
from so101_gaponet.models import NETWORK_KINDS, ArchConfig, PerJointLinear, build_model

J, H, K = len(JOINT_NAMES), 5, 4
COLUMNS = len(HISTORY_FEATURES) * J


def _metadata(kind: str) -> GapModelMetadata:
    norm = Normalisation(history_mean=(0.0,) * COLUMNS, history_std=(1.0,) * COLUMNS, command_mean=(0.0,) * J,
                         command_std=(1.0,) * J, delta_mean=(0.0,) * J, delta_std=(1.0,) * J)
    return GapModelMetadata(role="sim_delta", model_kind=kind, joints=JOINT_NAMES, history=H, future_steps=K, rate_hz=30.0,
                            horizon=1, normalisation=norm, delta_bounds=(0.2,) * J)


def _module(kind: str) -> torch.nn.Module:
    torch.manual_seed(3)
    module = build_model(ArchConfig(kind=kind, joints=J, history=H, features=len(HISTORY_FEATURES), future_steps=K, hidden=16))
    if isinstance(module, PerJointLinear):  # zero-initialised: give it weights so the comparison means something
        with torch.no_grad():
            module.weight.normal_(0, 0.3)
            module.bias.normal_(0, 0.3)
    return module.eval()


@pytest.mark.parametrize("kind", NETWORK_KINDS)
def test_shapes_and_bounded_output(kind: str) -> None:
    module = _module(kind)
    history, commands = torch.rand(7, H, COLUMNS) * 6 - 3, torch.rand(7, K, J) * 6 - 3  # within ±3 std
    with torch.no_grad():
        out = module(history, commands)
    assert out.shape == (7, J)
    assert torch.isfinite(out).all() and out.abs().max() < 100.0
    assert out.std(dim=0).min() > 1e-4  # depends on its input on every joint


@pytest.mark.parametrize("kind", NETWORK_KINDS)
def test_exports_equal_torch(kind: str, tmp_path: Path) -> None:
    module, meta = _module(kind), _metadata(kind)
    rng = np.random.default_rng(11)
    history = rng.standard_normal((6, H, COLUMNS)).astype(np.float32)
    commands = rng.standard_normal((6, K, J)).astype(np.float32)
    with torch.no_grad():
        expected = module(torch.from_numpy(history), torch.from_numpy(commands)).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        paths = (save_onnx(module, meta, tmp_path / "m.onnx"), save_torchscript(module, meta, tmp_path / "m.pt"))
    for path in paths:
        model = load_model(path, role="sim_delta")
        assert model.metadata == meta
        got = np.vstack([model.run_normalised(history[i:i + 1], commands[i:i + 1]) for i in range(len(history))])
        np.testing.assert_allclose(got, expected, atol=1e-5, err_msg=f"{kind} {path.suffix}")
        # the runtime's physical-unit call reads (H, F·J) and (K, J) (identity normalisation here)
        np.testing.assert_allclose(model.delta(history[0], commands[0]), expected[0], atol=1e-5)


def test_per_joint_linear_reads_only_its_own_joint() -> None:
    module = _module("linear")
    history, commands = torch.zeros(1, H, COLUMNS), torch.zeros(1, K, J)
    moved_history = history.clone()
    moved_history[0, :, 2] = 1.0  # real_position of joint 2 only
    moved_commands = commands.clone()
    moved_commands[0, :, 4] = 1.0  # commands of joint 4 only
    with torch.no_grad():
        base = module(history, commands)
        by_history = module(moved_history, commands) - base
        by_commands = module(history, moved_commands) - base
    assert torch.count_nonzero(by_history) == 1 and by_history[0, 2] != 0
    assert torch.count_nonzero(by_commands) == 1 and by_commands[0, 4] != 0


def test_ridge_fit_recovers_a_known_per_joint_law() -> None:
    module = build_model(ArchConfig(kind="linear", joints=J, history=H, features=len(HISTORY_FEATURES), future_steps=K))
    assert isinstance(module, PerJointLinear)
    generator = torch.Generator().manual_seed(0)
    history, commands = torch.randn(2000, H, COLUMNS, generator=generator), torch.randn(2000, K, J, generator=generator)
    # Δ_j = 0.8 · (command_{t+2} − position_now) on every joint, + 0.1
    delta = 0.8 * (commands[:, 2] - history[:, -1, :J]) + 0.1
    module.fit_ridge(history, commands, delta, ridge=1e-6)
    with torch.no_grad():
        np.testing.assert_allclose(module(history, commands).numpy(), delta.numpy(), atol=1e-3)


def _context_module(latent: int = 4) -> tuple[ContextCompensator, GapModelMetadata]:
    torch.manual_seed(5)
    rows = 12
    norm = Normalisation(history_mean=(0.1,) * COLUMNS, history_std=(0.5,) * COLUMNS, command_mean=(0.0,) * J,
                         command_std=(0.7,) * J, delta_mean=(0.01,) * J, delta_std=(0.05,) * J)
    scales = np.full(J, 0.05)
    module = ContextCompensator(norm, JOINT_NAMES, K, rows, scales, scales, scales * 4, hidden=16, encoder_hidden=8,
                                latent=latent).eval()
    meta = GapModelMetadata(role="compensator", model_kind="context_mlp", joints=JOINT_NAMES, history=rows,
                            warmup_rows=3, future_steps=K, rate_hz=50.0, horizon=K, normalisation=norm,
                            delta_bounds=(0.2,) * J, architecture=module.record())
    return module, meta


def test_the_population_compensator_exports_equal_torch_and_comes_back_from_its_file(tmp_path: Path) -> None:
    module, meta = _context_module()
    rng = np.random.default_rng(2)
    history = rng.standard_normal((5, meta.history, COLUMNS)).astype(np.float32)
    commands = rng.standard_normal((5, K, J)).astype(np.float32)
    with torch.no_grad():
        expected = module(torch.from_numpy(history), torch.from_numpy(commands)).numpy()
    path = save_onnx(module, meta, tmp_path / "population.onnx")
    model = load_model(path, role="compensator")
    got = np.vstack([model.run_normalised(history[i:i + 1], commands[i:i + 1]) for i in range(len(history))])
    np.testing.assert_allclose(got, expected, atol=1e-5)
    # the trainable module again (what per-arm refinement continues from): the same function
    again, metadata = ContextCompensator.from_onnx(path)
    assert metadata == meta
    with torch.no_grad():
        np.testing.assert_allclose(again(torch.from_numpy(history), torch.from_numpy(commands)).numpy(), expected, atol=1e-6)


def test_the_history_window_tells_the_trunk_which_arm_and_a_model_without_the_branch_ignores_it() -> None:
    module, _ = _context_module()
    plain, _ = _context_module(latent=0)
    history, commands = torch.zeros(1, 12, COLUMNS), torch.zeros(1, K, J)
    other = history.clone()
    other[0, :, 2 * J:] += torch.linspace(0, 1, 12)[:, None]  # the commands sent ran ahead of the positions
    with torch.no_grad():
        assert not torch.allclose(module(history, commands), module(other, commands))
        assert torch.equal(plain(history, commands), plain(other, commands))


def test_a_model_of_another_kind_is_not_taken_for_a_population_compensator(tmp_path: Path) -> None:
    path = save_onnx(_module("joint_mlp"), _metadata("joint_mlp"), tmp_path / "m.onnx")
    with pytest.raises(ModelFileError, match="not the population compensator"):
        ContextCompensator.from_onnx(path)
