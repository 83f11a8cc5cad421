"""In-process composition of the SO-101 graphs with the same nodes and YAML files as ``launch/``.

``launch``/``launch_ros`` are not installable everywhere (and not here), so ``make demo`` and the
whole-graph tests run the graphs in one process on a multi-threaded rclpy executor. The node
lists below mirror ``launch/robot.launch.py``, ``teleop.launch.py`` and ``deploy.launch.py``
(``test/test_composition.py`` checks they agree).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter

__all__ = ["CONFIG_DIR", "NodeSpec", "GraphOptions", "robot_graph", "teleop_graph", "deploy_graph", "ComposedGraph"]

WORKSPACE = Path(__file__).resolve().parents[3]
CONFIG_DIR = WORKSPACE / "config"
MODELS_DIR = WORKSPACE / "models"


@dataclass(frozen=True)
class NodeSpec:
    factory: str  # "module:Class" of an rclpy Node subclass accepting **kwargs
    params_file: str | None = None  # file name under config/
    overrides: Mapping[str, object] = field(default_factory=dict)  # parameters over the YAML file
    remaps: Mapping[str, str] = field(default_factory=dict)  # topic remappings, from → to

    @property
    def key(self) -> str:
        """The node's key in ``ComposedGraph.nodes``: its renamed node name, else its class name."""
        return self.remaps.get("__node", self.factory.rsplit(":", 1)[1])


@dataclass(frozen=True)
class GraphOptions:
    port: str  # follower bus device (the virtual arm's pty when hardware is virtual)
    calibration_file: str = ""  # '' = the driver's robot_id default path
    leader_port: str = ""  # teleop only
    leader_calibration_file: str = ""
    compensation: bool = True  # deploy: GapONet compensator in the chain
    gaponet_model: str = str(MODELS_DIR / "gaponet_so101_default.onnx")
    command_source: str = "motion"  # deploy: "policy" (a trained policy) or "motion" (scripted motion)
    policy_path: str = ""
    motion: str = "sweep"
    motion_duration: float = 0.0  # s, built-in motions only (0 = the motion's default)
    autostart_motion: bool = True  # False: the motion waits for ~/start (or restart() in-process)
    hold_start_pose: bool = False  # while waiting, command the motion's first pose
    record: bool = False
    bag_root: str = "bags"
    task: str = "demo"
    gap_profile: str = ""


def robot_graph(opts: GraphOptions) -> list[NodeSpec]:
    overrides: dict[str, object] = {"port": opts.port}
    if opts.calibration_file:
        overrides["calibration_file"] = opts.calibration_file
    return [NodeSpec("so101_driver.driver_node:DriverNode", "driver.yaml", overrides)]


def _recorder(opts: GraphOptions) -> list[NodeSpec]:
    if not opts.record:
        return []
    overrides = {"bag_root": opts.bag_root, "task": opts.task}
    if opts.gap_profile:
        overrides["gap_profile"] = opts.gap_profile
    return [NodeSpec("so101_recorder.recorder_node:RecorderNode", "recorder.yaml", overrides)]


def teleop_graph(opts: GraphOptions) -> list[NodeSpec]:
    leader: dict[str, object] = {"port": opts.leader_port}
    if opts.leader_calibration_file:
        leader["calibration_file"] = opts.leader_calibration_file
    return [
        *robot_graph(opts),
        NodeSpec("so101_driver.leader_node:LeaderNode", "leader.yaml", leader),
        NodeSpec("so101_safety.safety_node:SafetyNode", "safety.yaml",
                 remaps={"input": "/leader/joint_states", "output": "/joint_command"}),
        *_recorder(opts),
    ]


def deploy_graph(opts: GraphOptions) -> list[NodeSpec]:
    if opts.command_source == "policy":
        source = NodeSpec("so101_policy.policy_node:PolicyNode", "policy.yaml", {"policy_path": opts.policy_path})
    elif opts.command_source == "motion":
        source = NodeSpec("so101_bringup.motion_player_node:MotionPlayerNode", None,
                          {"motion": opts.motion, "duration": opts.motion_duration, "autostart": opts.autostart_motion,
                           "hold_start_pose": opts.hold_start_pose},
                          remaps={"output": "/policy/joint_command"})
    else:
        raise ValueError(f"command_source must be 'policy' or 'motion', got {opts.command_source!r}")
    chain = [source]
    if opts.compensation:
        chain.append(NodeSpec("so101_gaponet.compensator_node:CompensatorNode", "compensator.yaml",
                              {"model_path": opts.gaponet_model}))
    safety_input = "/gaponet/joint_command" if opts.compensation else "/policy/joint_command"
    chain.append(NodeSpec("so101_safety.safety_node:SafetyNode", "safety.yaml",
                          remaps={"input": safety_input, "output": "/joint_command"}))
    return [*robot_graph(opts), *chain, *_recorder(opts)]


class ComposedGraph:
    """Instantiate ``specs`` in one rclpy context and spin each on its own background executor thread."""

    def __init__(self, specs: list[NodeSpec], config_dir: Path = CONFIG_DIR) -> None:
        self.specs = specs
        self.config_dir = config_dir
        self.context = Context()
        self.nodes: dict[str, Any] = {}  # by key; callers use each node class's own methods (services, helpers)
        self._executors: list[SingleThreadedExecutor] = []
        self._threads: list[threading.Thread] = []

    def _cli_args(self, spec: NodeSpec) -> list[str]:
        args = ["--ros-args"]
        if spec.params_file:
            args += ["--params-file", str(self.config_dir / spec.params_file)]
        for source, target in spec.remaps.items():
            args += ["-r", f"{source}:={target}"]
        return args

    def start(self) -> ComposedGraph:
        self._threads.clear()
        rclpy.init(context=self.context)
        try:
            for spec in self.specs:
                module_name, class_name = spec.factory.split(":")
                node_class = getattr(importlib.import_module(module_name), class_name)
                overrides = [Parameter(name, value=value) for name, value in spec.overrides.items()]
                self.nodes[spec.key] = node_class(context=self.context, cli_args=self._cli_args(spec),
                                                  parameter_overrides=overrides)
        except BaseException:
            self.stop()
            raise
        # One single-threaded executor per node, each on its own thread: a node's wait set stays small
        # and a slow callback (the driver's bus transaction) never delays another node's timers.
        for key, node in self.nodes.items():
            executor = SingleThreadedExecutor(context=self.context)
            executor.add_node(node)
            thread = threading.Thread(target=self._spin, args=(executor,), name=f"so101-{key}", daemon=True)
            self._executors.append(executor)
            self._threads.append(thread)
            thread.start()
        return self

    @property
    def running(self) -> bool:
        """Whether any node's executor thread is still spinning."""
        return any(thread.is_alive() for thread in self._threads)

    def _spin(self, executor: SingleThreadedExecutor) -> None:
        try:
            executor.spin()
        except Exception:  # shutdown races surface here; stop() reports nothing more useful
            if self.context.ok():
                raise

    def stop(self) -> None:
        # Order matters: the executor thread must be gone before nodes are destroyed, or callbacks
        # still queued on it touch destroyed entities.
        for executor in self._executors:
            executor.shutdown(timeout_sec=2.0)
        for thread in self._threads:
            thread.join(timeout=5.0)
        self._executors.clear()
        for node in self.nodes.values():
            node.destroy_node()
        self.nodes.clear()
        if self.context.ok():
            rclpy.shutdown(context=self.context)

    def __enter__(self) -> ComposedGraph:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
