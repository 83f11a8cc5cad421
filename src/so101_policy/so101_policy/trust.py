"""What loading a policy may do: no code from the policy's folder, no network unless asked (no rclpy).

A LeRobot ``pretrained_model`` folder is data *and* instructions: ``policy_preprocessor.json`` /
``policy_postprocessor.json`` list processor steps, and LeRobot instantiates each step's class with
the JSON's arguments before it checks the type. A step named by a full import path
(``"class": "subprocess.Popen"``) therefore runs whatever it names. :func:`check_processor_steps`
reads those files first and accepts only steps LeRobot knows: a ``registry_name`` (looked up in
LeRobot's registry of classes its own code registered) or a ``class`` that resolves to a
``ProcessorStep`` subclass defined in ``lerobot.*``. Anything else is refused with a message naming
the file and the step, unless the caller passes ``trust_remote_code=True``.

TorchScript files are programs too (``torch.jit.load`` runs the code they hold): load only those you
trust; ONNX files are data and are what every shipped default uses.

:func:`offline_hub` forces the Hugging Face hub offline (``HF_HUB_OFFLINE=1``, also in an already
imported ``huggingface_hub``), overriding an exported ``HF_HUB_OFFLINE=0``, unless the caller asks for
the network (``allow_network=True``). It stays forced for the rest of the process: policies that load
tokenizers or backbones lazily must not reach the network later either.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

from so101_policy.metadata import read_json_object
from so101_policy.spec import PolicyLoadError

__all__ = ["PROCESSOR_FILES", "UntrustedPolicyError", "check_processor_steps", "offline_hub"]

PROCESSOR_FILES = ("policy_preprocessor.json", "policy_postprocessor.json")
TRUST_HINT = ("if you trust this folder, load it with trust_remote_code (node parameter trust_remote_code:=true, "
              "load_policy(..., trust_remote_code=True))")


class UntrustedPolicyError(PolicyLoadError):
    """A policy folder asks to run code that is not LeRobot's own; refused without trust_remote_code."""


def check_processor_steps(directory: Path, trust_remote_code: bool = False) -> None:
    """Refuse processor steps that would run code from outside LeRobot (see the module docstring)."""
    if trust_remote_code:
        return
    for name in PROCESSOR_FILES:
        path = directory / name
        if not path.is_file():
            continue
        steps = read_json_object(path).get("steps", [])
        if not isinstance(steps, list):
            raise PolicyLoadError(f"{path}: steps: must be a list, got {type(steps).__name__}")
        for index, step in enumerate(steps):
            problem = _step_problem(step)
            if problem:
                raise UntrustedPolicyError(f"{path}: steps.{index}: {problem}; refused, loading it would run code "
                                           f"from this folder ({TRUST_HINT})")


def _step_problem(step: Any) -> str:
    """Why ``step`` is not a known LeRobot processor step ("" when it is)."""
    if not isinstance(step, dict):
        return f"a step must be a JSON object, got {type(step).__name__}"
    if "registry_name" in step:  # LeRobot looks these up among the classes its own code registered
        return "" if isinstance(step["registry_name"], str) else "registry_name must be a string"
    target = step.get("class")
    if not isinstance(target, str):
        return "neither a registry_name nor a class"
    if not target.startswith("lerobot.") or "." not in target[len("lerobot."):]:
        return f"class {target!r} is not part of LeRobot"
    from lerobot.processor.pipeline import ProcessorStep  # LeRobot's own code: safe to import

    module_name, _, attribute = target.rpartition(".")
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError):
        return f"class {target!r} does not exist in the installed LeRobot"
    if not (isinstance(found, type) and issubclass(found, ProcessorStep)
            and str(getattr(found, "__module__", "")).startswith("lerobot.")):
        return f"{target!r} is not a LeRobot processor step class"
    return ""


def offline_hub(allow_network: bool = False) -> None:
    """Force the Hugging Face hub offline for this process (see the module docstring); a no-op with
    ``allow_network``. Call it before LeRobot or huggingface_hub are imported, or at any time after."""
    if allow_network:
        return
    os.environ["HF_HUB_OFFLINE"] = "1"  # not setdefault: an exported HF_HUB_OFFLINE=0 must not win
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:  # read once at its import: set the live value too
        constants.HF_HUB_OFFLINE = True  # type: ignore[attr-defined]
