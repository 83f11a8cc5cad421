"""The preflight's ROS node: it sits in the policy's seat of the deploy chain (``policy/joint_command`` into the
safety filter), listens to what the chain does (``joint_states``, the filter's ``joint_command``, ``/diagnostics``),
and calls the filter's ``~/estop`` and ``~/reset`` and reads its parameters, as any user of the chain does.

The preflight flow (:mod:`.flow`) calls it from its own thread while the node spins on the composition's executor:
commands are published from the caller's thread, what arrives is kept under a lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.parameter import parameter_value_to_python
from rclpy.parameter_client import AsyncParameterClient
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from so101_apps.preflight.chain_checks import Trace
from so101_apps.preflight.motion_plan import Plan, Recording
from so101_common import topics
from so101_common.joints import JOINT_NAMES
from so101_common.waiting import wait_for
from so101_ros.stamps import seconds

__all__ = ["PreflightNode", "SAFETY_FILTER", "DRIVER"]

SAFETY_FILTER = "safety_filter"  # the deploy graph's node names
DRIVER = "so101_driver"
COMMAND_RATE_HZ = 100.0  # the preflight publishes its motions at the driver's default rate


class PreflightNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("preflight", **kwargs)
        self._lock = threading.Lock()
        self.trace = Trace()
        self._recording: Recording | None = None
        self._recording_start = 0.0
        self.measured = np.full(len(JOINT_NAMES), np.nan)
        self.states_received = 0
        self.driver_rates: list[float] = []  # achieved cycle rates the driver reported (windows of >= 0.5 s)
        self.currents: dict[str, list[float]] = {n: [] for n in JOINT_NAMES}  # A, per report
        self.loads: dict[str, list[float]] = {n: [] for n in JOINT_NAMES}  # fraction of stall, per report
        self.volts: dict[str, list[float]] = {n: [] for n in JOINT_NAMES}  # V, per report
        self.filter_states: list[tuple[float, str]] = []
        self._pub = self.create_publisher(JointState, topics.POLICY_COMMAND, 10)
        self._command = JointState(name=list(JOINT_NAMES))
        self.create_subscription(JointState, topics.JOINT_STATES, self._on_state, 50)
        self.create_subscription(JointState, topics.JOINT_COMMAND, self._on_output, 50)
        self.create_subscription(DiagnosticArray, topics.DIAGNOSTICS, self._on_diagnostics, 50)
        self._estop = self.create_client(Trigger, f"{SAFETY_FILTER}/estop")
        self._reset = self.create_client(Trigger, f"{SAFETY_FILTER}/reset")
        self._filter_parameters = AsyncParameterClient(self, SAFETY_FILTER)

    # ------------------------------------------------------------------ what arrives
    def _on_state(self, msg: JointState) -> None:
        now = time.monotonic()
        position, effort = _ordered(msg.name, msg.position), _ordered(msg.name, msg.effort)
        velocity = _ordered(msg.name, msg.velocity)
        with self._lock:
            self.measured = position
            self.states_received += 1
            self.trace.states.append((now, position))
            if self._recording is not None:
                self._recording.add(now - self._recording_start, position, velocity, effort)

    def _on_output(self, msg: JointState) -> None:
        stamp = seconds(msg.header.stamp)
        with self._lock:
            self.trace.outputs.append((time.monotonic(), stamp, _ordered(msg.name, msg.position)))

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        now = time.monotonic()
        with self._lock:
            for status in msg.status:
                values = {kv.key: kv.value for kv in status.values}
                if "configured_rate_hz" in values:  # the driver's bus entry (so101_driver.health)
                    if float(values.get("window_s", "0")) >= 0.5:
                        self.driver_rates.append(float(values["achieved_rate_hz"]))
                    self.trace.torque.append((now, values.get("torque_enabled") == "True"))
                elif values.get("joint") in self.currents and "current_a" in values:  # a servo entry
                    self.currents[values["joint"]].append(float(values["current_a"]))
                    self.loads[values["joint"]].append(float(values["load_permille"]) / 1000.0)
                    self.volts[values["joint"]].append(float(values["voltage_v"]))
                elif status.name.startswith(f"{SAFETY_FILTER}:") and "state" in values:
                    self.filter_states.append((now, values["state"]))

    def arm(self) -> np.ndarray:
        with self._lock:
            return self.measured.copy()

    def known(self) -> bool:
        """Every joint measured."""
        return bool(np.all(np.isfinite(self.arm())))

    # ------------------------------------------------------------------ commands
    def publish(self, positions: Sequence[float] | np.ndarray) -> None:
        self._command.header.stamp = self.get_clock().now().to_msg()
        self._command.position = [float(p) for p in positions]
        self._pub.publish(self._command)

    def play(self, plan: Plan, check: Callable[[], None], until: float | None = None,
             on_tick: Callable[[float], bool] | None = None) -> Recording:
        """Publish ``plan``'s targets at :data:`COMMAND_RATE_HZ` (for ``until`` s, default its duration) and record
        the joint states meanwhile. ``check`` runs every tick (it raises when the chain fails); ``on_tick(t)`` may
        return False to skip publishing at ``t`` (a staged silence)."""
        recording = Recording()
        period = 1.0 / COMMAND_RATE_HZ
        end = plan.duration if until is None else until
        start = time.monotonic()
        with self._lock:
            self._recording, self._recording_start = recording, start
        try:
            tick = 0
            while (t := time.monotonic() - start) <= end:
                check()
                if on_tick is None or on_tick(t):
                    self.publish(plan.target(t))
                tick += 1
                time.sleep(max(0.0, start + tick * period - time.monotonic()))
        finally:
            with self._lock:
                self._recording = None
        return recording

    # ------------------------------------------------------------------ the safety filter's services
    def estop(self, timeout: float = 5.0) -> float:
        """``~/estop`` of the safety filter; returns the monotonic time of its answer (it has latched by then)."""
        return self._call(self._estop, "estop", timeout)[1]

    def reset(self, timeout: float = 5.0) -> float:
        """``~/reset`` of the safety filter; returns the monotonic time it was asked (it may release from then on)."""
        return self._call(self._reset, "reset", timeout)[0]

    def _call(self, client: Any, what: str, timeout: float) -> tuple[float, float]:
        """Call a Trigger service; (monotonic time of the request, of the answer)."""
        if not client.wait_for_service(timeout_sec=timeout):
            raise RuntimeError(f"the safety filter's ~/{what} service is not available")
        asked = time.monotonic()
        future = client.call_async(Trigger.Request())
        if not wait_for(future.done, timeout=timeout, interval=0.002) or future.result() is None:
            raise RuntimeError(f"the safety filter did not answer ~/{what}")
        if not future.result().success:
            raise RuntimeError(f"the safety filter refused ~/{what}: {future.result().message}")
        return asked, time.monotonic()

    def safety_parameters(self, names: Sequence[str], timeout: float = 10.0) -> dict[str, Any]:
        """The safety filter's parameters ``names`` as the running node has them (None: not set)."""
        if not self._filter_parameters.wait_for_services(timeout_sec=timeout):
            raise RuntimeError("the safety filter's parameter services are not available")
        future = self._filter_parameters.get_parameters(list(names))
        if not wait_for(future.done, timeout=timeout, interval=0.005) or future.result() is None:
            raise RuntimeError("the safety filter did not answer get_parameters")
        return {name: parameter_value_to_python(value)
                for name, value in zip(names, future.result().values, strict=True)}


def _ordered(names: Sequence[str], values: Sequence[float]) -> np.ndarray:
    """``values`` by ``names`` in :data:`JOINT_NAMES` order (NaN where missing)."""
    lookup = dict(zip(names, values, strict=False))
    return np.array([float(lookup.get(n, np.nan)) for n in JOINT_NAMES])
