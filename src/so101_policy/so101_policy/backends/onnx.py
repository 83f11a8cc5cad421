"""ONNX policies run with onnxruntime: inputs named after the features, the first output is the actions.

ONNX files are data (a graph of standard operators), not code: the preferred format for shipped and
downloaded policies.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from so101_policy.images import images_for
from so101_policy.metadata import read_metadata, spec_from_metadata
from so101_policy.spec import (
    METADATA_KEY,
    STATE_KEY,
    FeatureMismatchError,
    PolicyLoadError,
    PolicyObservation,
    PolicySpec,
)

__all__ = ["ONNX_SUFFIXES", "OnnxPolicy", "load_onnx"]

ONNX_SUFFIXES = (".onnx",)


class OnnxPolicy:
    """An ONNX model run with onnxruntime (inputs named after the features, first output = actions)."""

    def __init__(self, session: Any, spec: PolicySpec) -> None:
        self.session = session
        self.spec = spec
        names = [i.name for i in session.get_inputs()]
        wanted = [STATE_KEY, *spec.image_features]
        missing = [n for n in wanted if n not in names]
        extra = [n for n in names if n not in wanted]
        if missing or extra:
            raise FeatureMismatchError(f"{spec.source}: ONNX inputs {names} do not match the metadata's features "
                                       f"{wanted} (missing {missing}, unexpected {extra})")
        self._output = session.get_outputs()[0].name

    def predict(self, obs: PolicyObservation) -> np.ndarray:
        feeds = {STATE_KEY: self.spec.state_array(obs.state)[None, :]}
        feeds.update({k: v[None] for k, v in images_for(self.spec, obs).items()})
        (out,) = self.session.run([self._output], feeds)
        return self.spec.actions_from_output(out)

    def reset(self) -> None:
        pass


def load_onnx(path: str | os.PathLike[str], device: str = "cpu", threads: int = 1) -> OnnxPolicy:
    p = Path(path)
    if not p.is_file():
        raise PolicyLoadError(f"ONNX policy {str(p)!r} does not exist or is not a file")
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if device.startswith("cuda") else \
        ["CPUExecutionProvider"]
    providers = [pr for pr in providers if pr in ort.get_available_providers()] or ["CPUExecutionProvider"]
    try:
        session = ort.InferenceSession(str(p), sess_options=options, providers=providers)
    except Exception as err:
        raise PolicyLoadError(f"{p}: not a loadable ONNX model: {err}") from err
    embedded = session.get_modelmeta().custom_metadata_map.get(METADATA_KEY)
    meta, where = read_metadata(p, embedded)
    return OnnxPolicy(session, spec_from_metadata(meta, kind="onnx", source=str(p), where=where))
