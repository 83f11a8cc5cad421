"""In-process composition of the SO-101 graphs: the nodes of :mod:`so101_bringup.graphs` in one process.

``launch``/``launch_ros`` are not installable everywhere (and not here), so ``make demo``, the bench and
the whole-graph tests run the graphs in one process, one executor thread per node. The graphs are not
written down here: :mod:`so101_bringup.node_specs` resolves a graph for a set of launch arguments to
:class:`~so101_bringup.node_specs.NodeSpec` entries, which :class:`ComposedGraph` starts. Processes and launch-only nodes (robot_state_publisher, RViz) are not started: callers
run the (virtual) arm themselves and pass its ``port`` (and ``calibration_file``), i.e. ``hardware:=real``
from the graph's point of view.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import threading
from collections.abc import Collection
from pathlib import Path
from typing import Any, TypeVar

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation
from rclpy.parameter import Parameter

from so101_bringup.node_processes import NodeProcesses
from so101_bringup.node_specs import NodeSpec
from so101_bringup.share import config_dir
from so101_bringup.start_order import start_order
from so101_common.waiting import wait_for

__all__ = ["ComposedGraph", "NodeFailed"]

NodeT = TypeVar("NodeT")


class NodeFailed(RuntimeError):
    """A node of the graph stopped: ``str()`` is one line naming it and its error."""


class ComposedGraph:
    """Instantiate ``specs`` in one rclpy context and spin each on its own background executor thread.

    ``own_process``: names of nodes to run as child processes instead (``python -m <module>`` with the same
    parameter files, overrides and remappings), as a launch file runs every node; their output goes to this
    process's console, as a launch's ``output='screen'``. Why: one process runs
    its nodes' callbacks one at a time (the GIL); measured in the demo, the compensated deploy graph
    delivered joint states at 75–82 % of the driver's rate in one process. ``low_priority`` and
    ``subscribed_first``: :mod:`so101_bringup.start_order`. Why the monitors start first: a subscriber that joins
    a running publisher can hold that publisher's ``publish`` for about 0.33 s in Fast DDS (measured: about one
    start of the web view in four, with the driver's joint states; the driver process is stopped meanwhile, and
    its servos hold their last goals). Started after its monitors, the driver meets that hold, if at all, in its
    first second, before a session's first motion.
    """

    SUBSCRIBED_TIMEOUT_S = 60.0  # a monitor's start-up (the web view: rerun and the meshes) on a loaded machine

    def __init__(self, specs: list[NodeSpec], config: Path | None = None, namespace: str = "",
                 own_process: Collection[str] = (), low_priority: Collection[str] = (),
                 subscribed_first: Collection[str] = ()) -> None:
        self.specs = specs
        self.config_dir = config if config is not None else config_dir()  # for params_file names
        self.namespace = namespace  # every node (and so every relative topic) under it; "" = the root
        self.order = start_order(specs, own_process, low_priority, subscribed_first)
        self.own_process = self.order.own_process
        self.context = Context()
        self.nodes: dict[str, Any] = {}  # the nodes run in this process, by node name (``node`` gives them typed)
        self._processes = NodeProcesses()
        self._executors: list[SingleThreadedExecutor] = []
        self._threads: list[threading.Thread] = []
        self._failed: dict[str, BaseException] = {}  # composed nodes whose executor stopped on an error

    def node(self, name: str, kind: type[NodeT]) -> NodeT:
        """The node ``name`` run in this process, as a ``kind`` (its class: its services and helpers are typed)."""
        if name not in self.nodes:
            where = "runs in its own process" if name in self.own_process else "is not in the graph"
            raise KeyError(f"node {name!r} {where}; in this process: {sorted(self.nodes)}")
        node = self.nodes[name]
        if not isinstance(node, kind):
            raise TypeError(f"node {name!r} is a {type(node).__name__}, not a {kind.__name__}")
        return node

    @property
    def children(self) -> dict[str, subprocess.Popen[str]]:
        """The nodes in their own process, by node name."""
        return self._processes.children

    def parameter(self, node: str, name: str) -> Any:
        """Node ``node``'s parameter ``name`` as the graph sets it (:meth:`~so101_bringup.node_specs.NodeSpec.parameter`)."""
        return next(s for s in self.specs if s.key == node).parameter(self.config_dir, name)

    def node_stopped(self) -> bool:
        """Whether a node has stopped: one run in its own process exited, or a composed one's callback raised."""
        return self._processes.exited() or bool(self._failed)

    def raise_for_stopped_nodes(self) -> None:
        """:class:`~so101_bringup.children.ChildProcessFailed` with its message if a child node has exited,
        :class:`NodeFailed` naming the node and its error if a composed node's callback raised (its executor
        stops: the node no longer runs, and the graph would otherwise wait on it in silence)."""
        self._processes.raise_for_exited()
        for key, error in self._failed.items():
            text = " ".join(str(error).split())
            raise NodeFailed(f"node {key} stopped: {type(error).__name__}" + (f": {text}" if text else ""))

    def start(self) -> ComposedGraph:
        self._threads.clear()
        self._failed.clear()
        rclpy.init(context=self.context)
        try:
            for spec in self.order.first:
                self._start_process(spec)
            self._await_subscriptions([spec.key for spec in self.order.first])
            for spec in self.order.then:
                if spec.key in self.own_process:
                    self._start_process(spec)
                    continue
                module_name, class_name = spec.factory.split(":")
                ros_args = spec.ros_args(self.config_dir, self.namespace)
                node_class = getattr(importlib.import_module(module_name), class_name)
                overrides = [Parameter(name, value=value) for name, value in spec.overrides.items()]
                self.nodes[spec.key] = node_class(context=self.context, cli_args=ros_args, parameter_overrides=overrides)
        except BaseException:
            self.stop()
            raise
        # One single-threaded executor per node, each on its own thread: a node's wait set stays small
        # and a slow callback (the driver's bus transaction) never delays another node's timers.
        for key, node in self.nodes.items():
            executor = SingleThreadedExecutor(context=self.context)
            executor.add_node(node)
            thread = threading.Thread(target=self._spin, args=(key, executor), name=f"so101-{key}", daemon=True)
            self._executors.append(executor)
            self._threads.append(thread)
            thread.start()
        return self

    def _start_process(self, spec: NodeSpec) -> None:
        module_name = spec.factory.split(":")[0]
        self._processes.start(spec.key, module_name, spec.ros_args(self.config_dir, self.namespace), spec.overrides,
                              self.order.nice(spec.key))

    def _await_subscriptions(self, keys: list[str]) -> None:
        """Wait until each node of ``keys`` (running in its own process) has a subscription on the graph, or
        raise: the child's error if one exits, ``TimeoutError`` naming those still without one."""
        if not keys:
            return
        probe = rclpy.create_node(f"_so101_graph_start_{os.getpid()}", context=self.context,
                                  enable_rosout=False, start_parameter_services=False)
        namespace = self.namespace or "/"

        def subscribed(key: str) -> bool:
            try:
                return bool(probe.get_subscriber_names_and_types_by_node(key, namespace))
            except rclpy_implementation.NodeNameNonExistentError:  # not on the graph yet
                return False

        def waiting() -> list[str]:
            self._processes.raise_for_exited()
            return [key for key in keys if not subscribed(key)]

        try:
            if not wait_for(lambda: not waiting(), timeout=self.SUBSCRIBED_TIMEOUT_S, interval=0.05):
                raise TimeoutError(f"no subscription on the graph from {', '.join(waiting())} after "
                                   f"{self.SUBSCRIBED_TIMEOUT_S:g} s: the nodes after them were not started")
        finally:
            probe.destroy_node()

    @property
    def running(self) -> bool:
        """Whether any node's executor thread, or child process, is still running."""
        return any(thread.is_alive() for thread in self._threads) or self._processes.running

    def _spin(self, key: str, executor: SingleThreadedExecutor) -> None:
        try:
            executor.spin()
        except Exception as error:  # shutdown races surface here; stop() reports nothing more useful
            if self.context.ok():
                self._failed[key] = error
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
