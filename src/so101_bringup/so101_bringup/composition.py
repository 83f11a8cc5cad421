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

import ctypes
import importlib
import signal
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rclpy
import yaml
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter

from so101_bringup.children import raise_for_child
from so101_bringup.graphs import DEPLOY, PACKAGE, ROBOT, TELEOP, Graph, ResolvedNode, resolve
from so101_bringup.share import config_dir, package_share, share_dir

_PR_SET_PDEATHSIG = 1  # <sys/prctl.h>
# loaded before any fork: the child only calls it
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None

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


def _stop_with_parent() -> None:
    """In a child node, between fork and exec: Ctrl-C when this process dies, however it dies (Linux).

    A driver left running by a killed parent would hold the arm's port and its last command, torque on; a
    Ctrl-C from the terminal reaches both anyway, a ``kill -9`` of the parent only this way. Linux sends it
    when the *thread* that started the child ends: start a graph from a thread that outlives it (the main one)."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGINT)


def _forward(child: subprocess.Popen[str], lines: deque[str]) -> None:
    """Copy a child node's output to this console line by line, keeping its last lines."""
    assert child.stdout is not None
    for line in child.stdout:
        lines.append(line)
        sys.stderr.write(line)


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
        self.children: dict[str, subprocess.Popen[str]] = {}  # by key: the nodes in their own process
        self._child_output: dict[str, deque[str]] = {}  # by key: each child's last lines (its error, if it fails)
        self._child_readers: dict[str, threading.Thread] = {}
        self._child_files: tempfile.TemporaryDirectory[str] | None = None
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

    def _start_child(self, spec: NodeSpec) -> None:
        """``spec``'s node in its own process; its overrides go in a parameter file after the node's own."""
        if self._child_files is None:
            self._child_files = tempfile.TemporaryDirectory(prefix="so101_nodes_")
        folder = Path(self._child_files.name)
        args = self._cli_args(spec)
        if spec.overrides:
            overrides = folder / f"{spec.key}.yaml"
            overrides.write_text(yaml.safe_dump({"/**": {"ros__parameters": dict(spec.overrides)}}))
            args += ["--params-file", str(overrides)]
        child = subprocess.Popen([sys.executable, "-m", spec.factory.split(":")[0], *args], text=True, bufsize=1,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=_stop_with_parent)
        self.children[spec.key] = child
        lines: deque[str] = deque(maxlen=100)
        self._child_output[spec.key] = lines
        reader = threading.Thread(target=_forward, args=(child, lines), name=f"so101-{spec.key}-output", daemon=True)
        self._child_readers[spec.key] = reader
        reader.start()

    def parameter(self, key: str, name: str) -> Any:
        """Node ``key``'s parameter ``name`` as the graph sets it: its override, else its parameter file's
        (``/**`` section), else ``KeyError`` (the node's own default applies; ask the node)."""
        spec = next(s for s in self.specs if s.key == key)
        if name in spec.overrides:
            return spec.overrides[name]
        if spec.params_file:
            data = yaml.safe_load((self.config_dir / spec.params_file).read_text()) or {}
            values = data.get("/**", {}).get("ros__parameters", {})
            if name in values:
                return values[name]
        raise KeyError(f"{key} gets no {name!r} from the graph")

    def child_exited(self) -> bool:
        """Whether a node run in its own process has exited."""
        return any(child.poll() is not None for child in self.children.values())

    def raise_for_children(self) -> None:
        """:class:`~so101_bringup.children.ChildProcessFailed` with its message if a child node has exited."""
        for key, child in self.children.items():
            if child.poll() is not None:
                self._child_readers[key].join(timeout=5.0)  # its last lines: the output ends when it has exited
                # killed by a signal, its last line is whatever it was logging: the exit status says more
                output = "".join(self._child_output[key]) if child.returncode > 0 else ""
                raise_for_child(f"node {key}", child.returncode, output)

    def start(self) -> ComposedGraph:
        self._threads.clear()
        rclpy.init(context=self.context)
        try:
            for spec in self.specs:
                if spec.key in self.own_process:
                    self._start_child(spec)
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
        return any(thread.is_alive() for thread in self._threads) or any(c.poll() is None for c in self.children.values())

    def _spin(self, executor: SingleThreadedExecutor) -> None:
        try:
            executor.spin()
        except Exception:  # shutdown races surface here; stop() reports nothing more useful
            if self.context.ok():
                raise

    def stop(self) -> None:
        for child in self.children.values():  # Ctrl-C, as a launch stops its nodes: they shut down cleanly
            if child.poll() is None:
                child.send_signal(signal.SIGINT)
        for child in self.children.values():
            try:
                child.wait(timeout=10.0)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        for reader in self._child_readers.values():
            reader.join(timeout=5.0)
        self.children.clear()
        self._child_output.clear()
        self._child_readers.clear()
        if self._child_files is not None:
            self._child_files.cleanup()
            self._child_files = None
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
