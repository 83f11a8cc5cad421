"""Parameters of the gap twin node: the one place for their defaults, descriptions and ranges (no rclpy)."""

from __future__ import annotations

from dataclasses import dataclass

from so101_common.parameters import parameter
from so101_sim2real.twin import TwinConfig

__all__ = ["TwinParameters"]

_DEFAULTS = TwinConfig()


@dataclass(frozen=True)
class TwinParameters:
    sim_delta_model: str = parameter("", "sim-delta model file (role sim_delta; ONNX, or TorchScript: code, only files "
                                         "you trust): the sim is driven with command + Δ at the model's rate; '' = "
                                         "the nominal MuJoCo, the sim of the offline gap (so101 pair --sim mujoco)")
    band_file: str = parameter("", "band of this arm's rolling gap (so101 twin-band); /diagnostics warns when a "
                                   "joint leaves it; '' = no band check")
    window_s: float = parameter(_DEFAULTS.window_s, "rolling RMSE window (s); must equal the band file's",
                                low=0.1, high=600.0)
    restart_after_s: float = parameter(_DEFAULTS.restart_after_s, "a pause in the command stream longer than this "
                                       "(s) restarts the twin from the measured pose", low=0.01, high=3600.0)
    hold_after_s: float = parameter(_DEFAULTS.hold_after_s, "joint states stamped this long (s) after the last "
                                    "command run the sim on, holding that command (as the arm does); a command "
                                    "that comes later than this is applied late and counted", low=0.01, high=60.0)
    history_s: float = parameter(_DEFAULTS.history_s, "s of simulated samples kept to pair joint states that "
                                                      "arrive late", low=0.05, high=60.0)
    diagnostics_period: float = parameter(1.0, "period of the /diagnostics status (s); a joint leaving or "
                                               "re-entering its band is published at once", low=0.01, high=3600.0)
