"""The deployment's driver parameters as the preflight judges by them: the deploy graph's driver node, its
parameter file (``config/driver.yaml``) and overrides over :class:`~so101_driver.parameters.FollowerParameters`'
defaults: the same values the driver runs with, so every threshold has one home (no rclpy)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from so101_bringup.node_specs import NodeSpec
from so101_driver.driver_core import DriverConfig
from so101_driver.parameters import FollowerParameters

__all__ = ["DriverSettings", "driver_settings"]


@dataclass(frozen=True)
class DriverSettings:
    parameters: FollowerParameters  # every driver parameter as the deployment sets it
    config: DriverConfig  # the driver core's configuration from them (rate and /diagnostics thresholds)

    @property
    def period_s(self) -> float:
        return 1.0 / self.config.rate_hz

    @property
    def read_budget_s(self) -> float:
        """The share of a cycle a feedback read may take (``DriverConfig.retry_budget_fraction``)."""
        return self.config.retry_budget_fraction * self.period_s


def driver_settings(spec: NodeSpec, config_dir: Path) -> DriverSettings:
    """The parameters ``spec`` (the deploy graph's driver) runs with: an override, else its parameter file's
    value, else the dataclass default; the core configuration built as the driver node builds it."""
    values = {}
    for f in dataclasses.fields(FollowerParameters):
        try:
            values[f.name] = spec.parameter(config_dir, f.name)
        except KeyError:
            continue  # the node's own default
    params = FollowerParameters(**values)
    config = DriverConfig(rate_hz=float(params.rate_hz), configure_servos=params.configure_servos,
                          **params.health_thresholds())
    return DriverSettings(params, config)
