"""The trust model of policy loading: no code from a policy folder runs, the hub stays offline."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

pytest.importorskip("torch")

from so101_policy.loading import load_policy
from so101_policy.spec import PolicyLoadError
from so101_policy.trust import UntrustedPolicyError


def _folder_with_step(tiny_act_dir, tmp_path, step: dict):
    folder = tmp_path / "pretrained_model"
    shutil.copytree(tiny_act_dir, folder)
    path = folder / "policy_preprocessor.json"
    processor = json.loads(path.read_text())
    processor["steps"].insert(0, step)
    path.write_text(json.dumps(processor))
    return folder


@pytest.mark.parametrize("callable_name", ["subprocess.check_call", "subprocess.Popen"])
def test_a_folder_naming_a_callable_runs_nothing_unless_trusted(tiny_act_dir, tmp_path, callable_name):
    marker = tmp_path / "ran"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    folder = _folder_with_step(tiny_act_dir, tmp_path, {"class": callable_name, "config": {"args": command}})
    with pytest.raises(UntrustedPolicyError, match=rf"policy_preprocessor\.json: steps\.0: class '{callable_name}' "
                                                   r"is not part of LeRobot; refused.*trust_remote_code"):
        load_policy(folder)
    assert not marker.exists()  # check_call would have run it to completion before returning
    if callable_name == "subprocess.check_call":  # trusted, the folder's command runs (then LeRobot refuses the type)
        with pytest.raises(PolicyLoadError):
            load_policy(folder, trust_remote_code=True)
        assert marker.exists()


def test_a_lerobot_attribute_that_is_not_a_processor_step_is_refused(tiny_act_dir, tmp_path):
    folder = _folder_with_step(tiny_act_dir, tmp_path, {"class": "lerobot.processor.pipeline.ProcessorStepRegistry"})
    with pytest.raises(UntrustedPolicyError, match="is not a LeRobot processor step class"):
        load_policy(folder)


def test_loading_is_offline_even_with_hf_hub_offline_0_exported(tiny_act_dir, monkeypatch):
    import huggingface_hub.constants as constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # as if imported with the 0 exported
    load_policy(tiny_act_dir)
    assert constants.HF_HUB_OFFLINE is True
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    load_policy(tiny_act_dir, allow_network=True)  # asked for: left as the user set it
    assert constants.HF_HUB_OFFLINE is False and os.environ["HF_HUB_OFFLINE"] == "0"
