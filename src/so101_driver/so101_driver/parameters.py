"""Parameters of the driver and leader nodes: the one place for their defaults, descriptions and ranges.

``config/driver.yaml`` and ``config/leader.yaml`` set deployment values over these; the nodes declare
every field with a ``ParameterDescriptor`` (``so101_ros.node_params``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict, cast

from so101_common.joints import JOINT_NAMES
from so101_common.parameters import parameter
from so101_driver.bus import DEFAULT_REPLY_GAP_MS
from so101_driver.driver_core import DriverConfig
from so101_driver.errors import DriverError

__all__ = ["ArmParameters", "FollowerParameters", "LEADER_DEFAULTS", "HEALTH_PARAMETERS", "HealthThresholds"]

_HEALTH = DriverConfig()  # the core's defaults (the /diagnostics thresholds, max_relative_target)


class HealthThresholds(TypedDict):
    """The /diagnostics thresholds: :class:`DriverConfig` fields, each set from the arm parameter of its name."""

    temperature_warn_c: float
    voltage_warn_min_v: float
    voltage_warn_max_v: float
    voltage_sag_warn_fraction: float
    current_warn_a: float
    fault_warn_per_s: float
    fault_error_per_s: float
    rate_warn_fraction: float
    rate_error_fraction: float


HEALTH_PARAMETERS: tuple[str, ...] = tuple(HealthThresholds.__annotations__)


@dataclass(frozen=True)
class ArmParameters:
    """What every SO-101 arm node (follower and leader) reads at start-up."""

    port: str = parameter("/dev/ttyACM0", "serial port of the arm's bus adapter (see `so101 scan`)")
    baudrate: int = parameter(1_000_000, "bus baud rate (STS3215 factory rate: 1000000)", low=9600, high=1_000_000)
    robot_id: str = parameter("so101_follower", "LeRobot calibration id: <calibration dir>/robots/so_follower/<id>.json "
                              "(teleoperators/so_leader/ for the leader)")
    calibration_file: str = parameter("", "explicit LeRobot calibration JSON; overrides robot_id when set")
    rate_hz: float = parameter(100.0, "control cycle rate (Hz): one sync read (+ one sync write) per cycle",
                               low=1.0, high=1000.0)
    diagnostics_rate_hz: float = parameter(1.0, "/diagnostics publishing rate (Hz)", low=0.01, high=100.0)
    joint_names: list[str] = parameter(list(JOINT_NAMES), "the SO-101 joints, any order: the order of joint_states")
    timeout_ms: float = parameter(20.0, "reply deadline per bus transaction (ms), plus the reply's wire time; every "
                                  "transaction waits at least twice the bus's usual latency, and the start (servo "
                                  "configuration, torque on) at least LeRobot's 50 ms",
                                  low=1.0, high=1000.0)
    retries: int = parameter(1, "extra tries per transaction before a servo counts as faulted", low=0, high=10)
    reply_gap_ms: float = parameter(DEFAULT_REPLY_GAP_MS, "a sync read ends when replies flowed and the line then "
                                    "stays quiet this long (ms)", low=0.5, high=100.0)
    # /diagnostics thresholds (DriverConfig fields of the same name); 0 switches a voltage/current check off
    fault_warn_per_s: float = parameter(_HEALTH.fault_warn_per_s, "retries + timeouts + corrupt packets per "
                                        "second: WARN at or above", low=0.0, high=1e4)
    fault_error_per_s: float = parameter(_HEALTH.fault_error_per_s, "... ERROR at or above", low=0.0, high=1e4)
    rate_warn_fraction: float = parameter(_HEALTH.rate_warn_fraction, "achieved / configured cycle rate: WARN below",
                                          low=0.0, high=1.0)
    rate_error_fraction: float = parameter(_HEALTH.rate_error_fraction, "... ERROR below", low=0.0, high=1.0)
    temperature_warn_c: float = parameter(_HEALTH.temperature_warn_c, "servo temperature (°C): WARN at or above",
                                          low=0.0, high=120.0)
    voltage_warn_min_v: float = parameter(_HEALTH.voltage_warn_min_v, "supply voltage (V): WARN below (0: off; "
                                          "12 V arm: e.g. 10.5)", low=0.0, high=30.0)
    voltage_warn_max_v: float = parameter(_HEALTH.voltage_warn_max_v, "supply voltage (V): WARN above (0: off)",
                                          low=0.0, high=30.0)
    voltage_sag_warn_fraction: float = parameter(_HEALTH.voltage_sag_warn_fraction, "WARN below this fraction of "
                                                 "the highest voltage the servo reported (0: off)", low=0.0, high=1.0)
    current_warn_a: float = parameter(_HEALTH.current_warn_a, "|Present_Current| (A): WARN at or above (0: off)",
                                      low=0.0, high=10.0)

    def __post_init__(self) -> None:
        names = list(self.joint_names)
        if sorted(names) != sorted(JOINT_NAMES):
            raise DriverError(f"joint_names must be the SO-101 joints {list(JOINT_NAMES)} (any order), got {names}")

    def health_thresholds(self) -> HealthThresholds:
        """The /diagnostics thresholds as :class:`DriverConfig` keyword arguments."""
        # built from HealthThresholds' own keys, so the dict is one (mypy cannot follow the comprehension)
        return cast(HealthThresholds, {name: float(getattr(self, name)) for name in HEALTH_PARAMETERS})


@dataclass(frozen=True)
class FollowerParameters(ArmParameters):
    """The follower also writes goals."""

    configure_servos: bool = parameter(True, "make the servos' settings LeRobot's at start (P16/I0/D32, accelerations, "
                                       "gripper limits), as LeRobot does on every connect: only settings that differ "
                                       "are written (the accelerations are lost at every power-up)")
    torque_on_start: bool = parameter(True, "enable torque at start, holding the arm where it is")
    write_on_command: bool = parameter(True, "write a command's goals to the servos as it arrives (one SYNC_WRITE, at "
                                       "most one per cycle: faster commands are coalesced, the latest wins); false: "
                                       "goals wait for the next cycle (0 to 1/rate_hz later)")
    max_relative_target: float = parameter(_HEALTH.max_relative_target, "rad: the most a goal written to a servo may "
                                           "lie from its present position, every write (LeRobot's max_relative_target): "
                                           "no command, filtered or not, can jump the arm", low=0.01, high=6.3)
    log_throttle: float = parameter(1.0, "s between two log lines about rejected joint_command messages",
                                    low=0.0, high=3600.0)


LEADER_DEFAULTS: Mapping[str, object] = {"port": "/dev/ttyACM1", "robot_id": "so101_leader"}
"""Where the leader's defaults differ from :class:`ArmParameters`."""
