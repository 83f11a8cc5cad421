"""The nodes of a graph for a set of launch arguments, as data (no rclpy).

:func:`graph_nodes` resolves a graph of :mod:`so101_bringup.graphs` (the same data the launch files
describe) to :class:`NodeSpec` entries, and :class:`GraphOptions` is a typed way to give the graphs'
launch arguments. A spec also says how ROS is told about it (:meth:`NodeSpec.ros_args`) and what a
parameter of it is set to (:meth:`NodeSpec.parameter`); :class:`so101_bringup.composition.ComposedGraph`
starts the nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from so101_bringup.graphs import DEPLOY, MONITOR, PACKAGE, ROBOT, TELEOP, Graph, ResolvedNode, resolve
from so101_bringup.share import package_share, share_dir

__all__ = ["NodeSpec", "GraphOptions", "graph_nodes", "robot_graph", "teleop_graph", "deploy_graph", "monitor_graph"]


@dataclass(frozen=True)
class NodeSpec:
    factory: str  # "module:Class" of an rclpy Node subclass accepting **kwargs
    params_file: str | None = None  # path of a ROS parameter file (or a name under config/)
    overrides: Mapping[str, object] = field(default_factory=dict)  # parameters over the YAML file
    remaps: Mapping[str, str] = field(default_factory=dict)  # topic remappings, from → to
    name: str | None = None  # node name (None: the class's own)

    @property
    def key(self) -> str:
        """The node's name, its key in a :class:`~so101_bringup.composition.ComposedGraph`: a ``__node``
        remapping, else ``name``, else the class name (a node class's own default name is not known here)."""
        return self.remaps.get("__node") or self.name or self.factory.rsplit(":", 1)[1]

    def ros_args(self, config_dir: Path, namespace: str = "") -> list[str]:
        """The node's ``--ros-args``: its parameter file (a name under ``config_dir``), name, namespace, remappings."""
        args = ["--ros-args"]
        if self.params_file:
            args += ["--params-file", str(config_dir / self.params_file)]  # an absolute path stays as it is
        if self.name:
            args += ["-r", f"__node:={self.name}"]
        if namespace:
            args += ["-r", f"__ns:={namespace}"]
        for source, target in self.remaps.items():
            args += ["-r", f"{source}:={target}"]
        return args

    def parameter(self, config_dir: Path, name: str) -> Any:
        """Parameter ``name`` as the node is given it: its override, else its parameter file's (``/**``
        section; a name under ``config_dir``), else ``KeyError`` (the node's own default applies; ask the node)."""
        if name in self.overrides:
            return self.overrides[name]
        if self.params_file:
            data = yaml.safe_load((config_dir / self.params_file).read_text()) or {}
            values = data.get("/**", {}).get("ros__parameters", {})
            if name in values:
                return values[name]
        raise KeyError(f"no {name!r} in the overrides or {self.params_file}")


@dataclass(frozen=True)
class GraphOptions:
    """Launch arguments of the robot, teleop and deploy graphs, typed, for an in-process run.

    A field left ``None`` takes the graph's own default: its ``Arg`` in :mod:`so101_bringup.graphs` is the one
    place launch defaults live, for launch files and in-process graphs alike. The hardware is always ``real``
    here: an in-process graph drives the bus on ``port`` (start the virtual arm first for a virtual one)."""

    port: str  # follower bus device (the virtual arm's pty when it is virtual)
    robot_id: str | None = None  # the real arm's LeRobot id: names its calibration file
    calibration_file: str | None = None  # '' = the driver's robot_id default path
    configure_servos: bool | None = None  # the driver makes the servos' settings LeRobot's at start
    leader_port: str | None = None  # teleop only
    leader_calibration_file: str | None = None
    compensation: bool | None = None  # deploy: GapONet compensator in the chain
    gaponet_model: str | None = None  # compensator model file
    command_source: str | None = None  # deploy: "policy" (a trained policy) or "motion" (scripted motion)
    policy_path: str | None = None
    motion: str | None = None
    motion_duration: float | None = None  # s, built-in motions only (0 = the motion's default)
    autostart_motion: bool | None = None  # False: the motion waits for ~/start (or restart() in-process)
    hold_start_pose: bool | None = None  # while waiting, command the motion's first pose
    record: bool | None = None
    bag_root: str | None = None
    task: str | None = None
    gap_profile: str | None = None
    twin: bool | None = None  # deploy: the live gap twin beside the arm (recorded with each episode)
    twin_band_file: str | None = None  # the twin's band file ('' = no band check)
    twin_sim_delta_model: str | None = None  # the twin's sim-delta model ('' = nominal MuJoCo)
    web: bool | None = None  # deploy: the live web view
    web_port: int | None = None
    web_grpc_port: int | None = None
    web_host: str | None = None  # the address a browser reaches this machine at ('' = the host name)
    web_rate_hz: float | None = None  # updates per second sent to browsers, at most

    def arguments(self, graph: Graph) -> dict[str, str]:
        """The options that are set, as ``graph``'s launch arguments (those it declares)."""
        given = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        declared = {a.name for a in graph.args}
        return {k: str(v).lower() if isinstance(v, bool) else str(v)
                for k, v in {"hardware": "real", **given}.items() if k in declared}


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


def monitor_graph(arguments: Mapping[str, str]) -> list[NodeSpec]:
    """The in-process nodes of the monitor graph (the twin, the web view) for its launch arguments (RViz and
    robot_state_publisher are launch-only)."""
    return graph_nodes(MONITOR, arguments)
