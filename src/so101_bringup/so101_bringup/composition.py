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
import subprocess
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter

from so101_bringup.graphs import DEPLOY, PACKAGE, ROBOT, TELEOP, Graph, ResolvedNode, resolve
from so101_bringup.node_processes import NodeProcesses, parameter_value
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
    """Instantiate ``specs`` in one rclpy context and spin each on its own background executor thread.

    ``own_process``: keys of nodes to run as child processes instead (``python -m <module>`` with the same
    parameter files, overrides and remappings), as a launch file runs every node; their output goes to this
    process's console, as a launch's ``output='screen'``. Why: one process runs
    its nodes' callbacks one at a time (the GIL); measured in the demo, the compensated deploy graph
    delivered joint states at 75–82 % of the driver's rate in one process.
    """

    def __init__(self, specs: list[NodeSpec], config: Path | None = None, namespace: str = "",
                 own_process: Collection[str] = ()) -> None:
        self.specs = specs
        self.config_dir = config if config is not None else config_dir()  # for params_file names
        self.namespace = namespace  # every node (and so every relative topic) under it; "" = the root
        unknown = set(own_process) - {spec.key for spec in specs}
        if unknown:
            raise ValueError(f"own_process names nodes the graph does not have: {sorted(unknown)}")
        self.own_process = frozenset(own_process)
        self.context = Context()
        self.nodes: dict[str, Any] = {}  # by key; callers use each node class's own methods (services, helpers)
        self._processes = NodeProcesses()
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

    @property
    def children(self) -> dict[str, subprocess.Popen[str]]:
        """The nodes in their own process, by key."""
        return self._processes.children

    def parameter(self, key: str, name: str) -> Any:
        """Node ``key``'s parameter ``name`` as the graph sets it (:func:`~so101_bringup.node_processes.parameter_value`)."""
        spec = next(s for s in self.specs if s.key == key)
        return parameter_value(spec.overrides, self.config_dir / spec.params_file if spec.params_file else None, name)

    def child_exited(self) -> bool:
        """Whether a node run in its own process has exited."""
        return self._processes.exited()

    def raise_for_children(self) -> None:
        """:class:`~so101_bringup.children.ChildProcessFailed` with its message if a child node has exited."""
        self._processes.raise_for_exited()

    def start(self) -> ComposedGraph:
        self._threads.clear()
        rclpy.init(context=self.context)
        try:
            for spec in self.specs:
                if spec.key in self.own_process:
                    self._processes.start(spec.key, spec.factory.split(":")[0], self._cli_args(spec), spec.overrides)
                    continue
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
        """Whether any node's executor thread, or child process, is still running."""
        return any(thread.is_alive() for thread in self._threads) or self._processes.running

    def _spin(self, executor: SingleThreadedExecutor) -> None:
        try:
            executor.spin()
        except Exception:  # shutdown races surface here; stop() reports nothing more useful
            if self.context.ok():
                raise

    def stop(self) -> None:
        self._processes.stop()
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
