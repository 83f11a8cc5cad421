"""In-process composition of the SO-101 graphs: the nodes of :mod:`so101_bringup.graphs` in one process.

``launch``/``launch_ros`` are not installable everywhere (and not here), so ``make demo``, the bench and
the whole-graph tests run the graphs in one process, one executor thread per node. The graphs are not
written down here: :func:`graph_nodes` resolves a graph of :mod:`so101_bringup.graphs` (the same data the
launch files describe) for a set of launch arguments, and :class:`GraphOptions` is a typed way to give
those arguments. Processes and launch-only nodes (robot_state_publisher, RViz) are not started: callers
run the (virtual) arm themselves and pass its ``port`` (and ``calibration_file``), i.e. ``hardware:=real``
from the graph's point of view.
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

from so101_bringup.graphs import DEPLOY, PACKAGE, ROBOT, TELEOP, Graph, ResolvedNode, resolve
from so101_bringup.share import config_dir, package_share, share_dir

__all__ = ["NodeSpec", "GraphOptions", "graph_nodes", "robot_graph", "teleop_graph", "deploy_graph", "ComposedGraph"]


@dataclass(frozen=True)
class NodeSpec:
    factory: str  # "module:Class" of an rclpy Node subclass accepting **kwargs
    params_file: str | None = None  # path of a ROS parameter file (or a name under config/)
    overrides: Mapping[str, object] = field(default_factory=dict)  # parameters over the YAML file
    remaps: Mapping[str, str] = field(default_factory=dict)  # topic remappings, from → to
    name: str | None = None  # node name (None: the class's own)

    @property
    def key(self) -> str:
        """The node's key in ``ComposedGraph.nodes``: its renamed node name, else its class name."""
        return self.remaps.get("__node", self.factory.rsplit(":", 1)[1])


@dataclass(frozen=True)
class GraphOptions:
    """Typed launch arguments of the teleop and deploy graphs (see ``so101_bringup.graphs`` for each one)."""

    port: str  # follower bus device (the virtual arm's pty when hardware is virtual)
    calibration_file: str = ""  # '' = the driver's robot_id default path
    # the driver makes the servos' settings LeRobot's at start (the arm the gap profiles were fitted as; a
    # real arm loses its accelerations at every power-up, a virtual one boots with factory settings)
    configure_servos: bool = True
    leader_port: str = ""  # teleop only
    leader_calibration_file: str = ""
    compensation: bool = True  # deploy: GapONet compensator in the chain
    gaponet_model: str = ""  # '' = the shipped model (share/so101_bringup/models)
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

    def arguments(self, graph: Graph) -> dict[str, str]:
        """These options as ``graph``'s launch arguments (those it declares)."""
        text = {"hardware": "real", "port": self.port, "calibration_file": self.calibration_file,
                "configure_servos": self.configure_servos,
                "leader_port": self.leader_port, "leader_calibration_file": self.leader_calibration_file,
                "compensation": self.compensation, "command_source": self.command_source,
                "policy_path": self.policy_path, "motion": self.motion, "motion_duration": self.motion_duration,
                "autostart_motion": self.autostart_motion, "hold_start_pose": self.hold_start_pose,
                "record": self.record, "bag_root": self.bag_root, "task": self.task, "gap_profile": self.gap_profile}
        if self.gaponet_model:
            text["gaponet_model"] = self.gaponet_model
        declared = {a.name for a in graph.args}
        return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in text.items() if k in declared}


def _share(package: str) -> str:
    return str(share_dir()) if package == PACKAGE else package_share(package)


def graph_nodes(graph: Graph, arguments: Mapping[str, str]) -> list[NodeSpec]:
    """The in-process nodes of ``graph`` for these launch arguments."""
    specs = []
    for node in resolve(graph, arguments, _share, in_process=True):
        assert isinstance(node, ResolvedNode) and node.factory is not None
        remaps = dict(node.remaps)
        specs.append(NodeSpec(node.factory, node.params_file, node.overrides, remaps, node.name))
    return specs


def robot_graph(opts: GraphOptions) -> list[NodeSpec]:
    """The driver alone (the in-process part of ``robot.launch.py``)."""
    return graph_nodes(ROBOT, opts.arguments(ROBOT))


def teleop_graph(opts: GraphOptions) -> list[NodeSpec]:
    return graph_nodes(TELEOP, opts.arguments(TELEOP))


def deploy_graph(opts: GraphOptions) -> list[NodeSpec]:
    return graph_nodes(DEPLOY, opts.arguments(DEPLOY))


class ComposedGraph:
    """Instantiate ``specs`` in one rclpy context and spin each on its own background executor thread."""

    def __init__(self, specs: list[NodeSpec], config: Path | None = None, namespace: str = "") -> None:
        self.specs = specs
        self.config_dir = config if config is not None else config_dir()  # for params_file names
        self.namespace = namespace  # every node (and so every relative topic) under it; "" = the root
        self.context = Context()
        self.nodes: dict[str, Any] = {}  # by key; callers use each node class's own methods (services, helpers)
        self._executors: list[SingleThreadedExecutor] = []
        self._threads: list[threading.Thread] = []

    def _cli_args(self, spec: NodeSpec) -> list[str]:
        args = ["--ros-args"]
        if spec.params_file:
            args += ["--params-file", str(self.config_dir / spec.params_file)]  # an absolute path stays as it is
        if spec.name:
            args += ["-r", f"__node:={spec.name}"]
        if self.namespace:
            args += ["-r", f"__ns:={self.namespace}"]
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
