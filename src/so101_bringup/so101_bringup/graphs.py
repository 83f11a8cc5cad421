"""Every SO-101 graph, once, as plain data (no rclpy, no ``launch``): the one source of both forms.

``launch/*.launch.py`` turn a graph into a ``LaunchDescription`` (:mod:`so101_bringup.launch_graph`);
``so101_bringup.composition`` turns the same graph into nodes in one process (:func:`resolve`).

A graph is its launch arguments and its actions: nodes (package, executable, node name, the rclpy
class for in-process use, a parameter file under ``config/``, parameter overrides, remappings) and
processes (``so101 virtual-bus``), each with an optional condition (a launch argument equal to a
value: ``hardware:=virtual``, ``compensation:=true``, ``record:=true``, ``rviz:=true``, ...). Values may
refer to a launch argument (:class:`LaunchArg`), a file in a package's share folder (:class:`ShareFile`)
or that file's text (:class:`FileText`, e.g. ``robot_description``).

Topics are relative, so a whole graph runs under a namespace (``ros2 launch ... --ros-args`` has no
namespace for launch files: push one with ``PushRosNamespace`` in a wrapper launch file, or give
``ComposedGraph(namespace=...)``). Processes and nodes without an rclpy class (robot_state_publisher,
RViz, tf2) are launch-only: the composition's callers start the arm themselves and pass its port.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import yaml

from so101_common import topics

__all__ = ["LaunchArg", "ShareFile", "FileText", "When", "Arg", "NodeDecl", "ProcessDecl", "Graph",
           "ResolvedNode", "ResolvedProcess", "GraphArgumentError", "resolve", "ROBOT", "TELEOP", "DEPLOY",
           "MONITOR", "GRAPHS", "PACKAGE"]

PACKAGE = "so101_bringup"  # the package whose share folder holds config/, launch/ and models/


@dataclass(frozen=True)
class LaunchArg:
    """The value of a launch argument."""

    name: str


@dataclass(frozen=True)
class ShareFile:
    """A file in a package's share folder (``FindPackageShare`` / ``get_package_share_directory``)."""

    package: str
    path: str  # relative, '/'-separated


@dataclass(frozen=True)
class FileText:
    """The text of a file (a parameter such as ``robot_description``)."""

    file: ShareFile


Value = str | int | float | bool | LaunchArg | ShareFile | FileText


@dataclass(frozen=True)
class When:
    """True when launch argument ``arg`` equals ``value`` (``true``/``false`` compare as booleans)."""

    arg: str
    value: str


@dataclass(frozen=True)
class Arg:
    name: str
    default: str | ShareFile | None  # None: the user must give it
    description: str
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeDecl:
    package: str
    executable: str
    name: str | None = None  # node name (None: the executable's own)
    factory: str | None = None  # "module:Class" of the rclpy node, None for launch-only nodes
    params_file: str | None = None  # file under so101_bringup's config/
    overrides: Mapping[str, Value] = field(default_factory=dict)  # parameters over the file
    remaps: tuple[tuple[str, Value], ...] = ()
    namespace: str | None = None  # relative to the graph's namespace
    arguments: tuple[Value, ...] = ()
    when: When | None = None


@dataclass(frozen=True)
class ProcessDecl:
    cmd: tuple[Value, ...]
    when: When | None = None


@dataclass(frozen=True)
class Graph:
    name: str  # also the launch file: launch/<name>.launch.py
    description: str
    args: tuple[Arg, ...]
    actions: tuple[NodeDecl | ProcessDecl, ...]

    def arg(self, name: str) -> Arg:
        return next(a for a in self.args if a.name == name)


@dataclass(frozen=True)
class ResolvedNode:
    """A node with every value worked out for one set of launch arguments."""

    package: str
    executable: str
    name: str | None
    factory: str | None
    params_file: str | None  # path
    overrides: dict[str, object]
    remaps: tuple[tuple[str, str], ...]
    namespace: str | None
    arguments: tuple[str, ...]


@dataclass(frozen=True)
class ResolvedProcess:
    cmd: tuple[str, ...]


class GraphArgumentError(ValueError):
    """A launch argument that the graph does not declare, lacks, or does not allow (one line)."""


_BOOL_WORDS = {"true": True, "1": True, "false": False, "0": False}


def _equal(left: str, right: str) -> bool:
    """Equality the way ``launch``'s ``EqualsSubstitution`` compares (booleans, then numbers, then text)."""
    a, b = left.lower(), right.lower()
    if a in _BOOL_WORDS and b in _BOOL_WORDS:
        return _BOOL_WORDS[a] == _BOOL_WORDS[b]
    try:
        return abs(float(left) - float(right)) <= 1e-9 * max(1.0, abs(float(left)), abs(float(right)))
    except ValueError:
        return left == right


def _parameter(text: str) -> object:
    """A launch argument's text as a parameter value, typed the way launch_ros types it (YAML)."""
    if text == "":
        return ""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return text if value is None or isinstance(value, dict | list) else value


def resolve(graph: Graph, arguments: Mapping[str, str], share: Callable[[str], str], in_process: bool = False
            ) -> list[ResolvedNode | ResolvedProcess]:
    """The actions of ``graph`` whose condition holds for ``arguments`` (launch argument → text), with
    every value worked out; ``share(package)`` is a package's share folder. ``in_process``: only the
    nodes with an rclpy class (what :class:`~so101_bringup.composition.ComposedGraph` can start)."""
    known = {a.name for a in graph.args}
    unknown = sorted(set(arguments) - known)
    if unknown:
        raise GraphArgumentError(f"{graph.name}: unknown launch arguments {unknown}; known: {sorted(known)}")
    values: dict[str, str] = {}
    for a in graph.args:
        if a.name in arguments:
            values[a.name] = str(arguments[a.name])
        elif a.default is None:
            raise GraphArgumentError(f"{graph.name}: launch argument {a.name!r} is required ({a.description})")
        else:
            values[a.name] = a.default if isinstance(a.default, str) else _path(a.default, share)
        if a.choices and values[a.name] not in a.choices:
            raise GraphArgumentError(f"{graph.name}: {a.name}:={values[a.name]!r} is not one of {list(a.choices)}")

    def text(value: Value) -> str:
        if isinstance(value, LaunchArg):
            return values[value.name]
        if isinstance(value, ShareFile):
            return _path(value, share)
        if isinstance(value, FileText):
            with open(_path(value.file, share), encoding="utf-8") as f:
                return f.read()
        return str(value).lower() if isinstance(value, bool) else str(value)

    def parameter(value: Value) -> object:
        if isinstance(value, LaunchArg):
            return _parameter(values[value.name])
        if isinstance(value, ShareFile | FileText):
            return text(value)
        return value

    resolved: list[ResolvedNode | ResolvedProcess] = []
    for action in graph.actions:
        if action.when is not None and not _equal(values[action.when.arg], action.when.value):
            continue
        if in_process and (isinstance(action, ProcessDecl) or action.factory is None):
            continue
        if isinstance(action, ProcessDecl):
            resolved.append(ResolvedProcess(tuple(text(v) for v in action.cmd)))
            continue
        resolved.append(ResolvedNode(
            package=action.package, executable=action.executable, name=action.name, factory=action.factory,
            params_file=_path(ShareFile(PACKAGE, f"config/{action.params_file}"), share) if action.params_file else None,
            overrides={k: parameter(v) for k, v in action.overrides.items()},
            remaps=tuple((source, text(target)) for source, target in action.remaps),
            namespace=action.namespace, arguments=tuple(text(v) for v in action.arguments)))
    return resolved


def _path(file: ShareFile, share: Callable[[str], str]) -> str:
    return "/".join([share(file.package).rstrip("/"), file.path])


# ---------------------------------------------------------------------------------------------- graphs

_BOOL = ("true", "false")
_DESCRIPTION = ShareFile("so101_description", "urdf/so101.urdf")


def _when(arg: str, value: str) -> When:
    return When(arg, value)


_ROBOT_ARGS = (
    Arg("hardware", "virtual", "real: the arm on `port`; virtual: start `so101 virtual-bus` on `port` first",
        ("real", "virtual")),
    Arg("port", "/tmp/so101_follower", "serial port of the follower bus (the virtual arm's link path)"),
    Arg("robot_id", "so101_follower", "LeRobot calibration id (real hardware)"),
    Arg("calibration_file", "", "real hardware: this calibration file instead of robot_id's"),
    Arg("profile", "default", "gap profile of the virtual arm"),
    Arg("configure_servos", "true", "real hardware: the driver makes the servos' settings LeRobot's at start (P 16 / D 32, "
        "accelerations, gripper limits), as LeRobot does on every connect, writing only those that differ; false: "
        "leave the servos as they are. The virtual arm is always configured",
        _BOOL),
    Arg("rviz", "false", "start RViz", _BOOL),
    Arg("use_sim_time", "false", "use /clock", _BOOL),
)


def _driver(hardware: str, calibration: Value, configure_servos: Value) -> NodeDecl:
    return NodeDecl(
        "so101_driver", "driver", "so101_driver", "so101_driver.driver_node:DriverNode", "driver.yaml",
        {"port": LaunchArg("port"), "robot_id": LaunchArg("robot_id"), "calibration_file": calibration,
         "configure_servos": configure_servos, "use_sim_time": LaunchArg("use_sim_time")},
        when=_when("hardware", hardware))


_ROBOT_ACTIONS: tuple[NodeDecl | ProcessDecl, ...] = (
    ProcessDecl(("so101", "virtual-bus", "--link", LaunchArg("port"), "--profile", LaunchArg("profile")),
                when=_when("hardware", "virtual")),
    # the virtual arm ships its own calibration; a real arm uses robot_id's LeRobot file (or calibration_file).
    # The virtual arm's servos start with factory settings (P 32, no acceleration ramp): configured as LeRobot
    # configures a follower, it is the arm its gap profile was fitted as (and the compensator harness runs).
    _driver("virtual", ShareFile(PACKAGE, "config/calibration/virtual_follower.json"), True),
    _driver("real", LaunchArg("calibration_file"), LaunchArg("configure_servos")),
    NodeDecl("robot_state_publisher", "robot_state_publisher",
             overrides={"robot_description": FileText(_DESCRIPTION), "use_sim_time": LaunchArg("use_sim_time")}),
    NodeDecl("rviz2", "rviz2", arguments=("-d", ShareFile("so101_description", "rviz/so101.rviz")),
             when=_when("rviz", "true")),
)

ROBOT = Graph("robot", "SO-101 driver + robot_state_publisher (+ RViz); the real arm or the virtual SO-101",
              _ROBOT_ARGS, _ROBOT_ACTIONS)

_RECORD_ARGS = (
    Arg("record", "false", "start the episode recorder", _BOOL),
    Arg("bag_root", "bags", "folder the recorder writes its bags into"),
    Arg("gap_profile", "", "gap profile name stored with each episode (virtual arm runs)"),
)


def _recorder() -> NodeDecl:
    return NodeDecl("so101_recorder", "recorder", "recorder", "so101_recorder.recorder_node:RecorderNode",
                    "recorder.yaml", {"bag_root": LaunchArg("bag_root"), "task": LaunchArg("task"),
                                      "gap_profile": LaunchArg("gap_profile")},
                    when=_when("record", "true"))


def _safety(source: str, when: When | None = None) -> NodeDecl:
    return NodeDecl("so101_safety", "safety_filter", "safety_filter", "so101_safety.safety_node:SafetyNode",
                    "safety.yaml", remaps=(("input", source), ("output", topics.JOINT_COMMAND)), when=when)


def _leader(hardware: str, calibration: Value) -> NodeDecl:
    return NodeDecl("so101_driver", "leader", "so101_leader", "so101_driver.leader_node:LeaderNode", "leader.yaml",
                    {"port": LaunchArg("leader_port"), "robot_id": LaunchArg("leader_id"),
                     "calibration_file": calibration}, when=_when("hardware", hardware))


TELEOP = Graph(
    "teleop", "Teleoperation: leader arm → safety filter → driver (+ optional episode recorder)",
    (*_ROBOT_ARGS,
     Arg("leader_port", "/tmp/so101_leader", "serial port of the leader bus (the virtual leader's link path)"),
     Arg("leader_id", "so101_leader", "LeRobot leader calibration id (real hardware)"),
     Arg("leader_calibration_file", "", "real hardware: this leader calibration file instead of leader_id's"),
     Arg("task", "teleop", "task name stored with each episode"),
     *_RECORD_ARGS),
    (*_ROBOT_ACTIONS,
     ProcessDecl(("so101", "virtual-bus", "--link", LaunchArg("leader_port"), "--role", "leader"),
                 when=_when("hardware", "virtual")),
     _leader("virtual", ShareFile(PACKAGE, "config/calibration/virtual_leader.json")),
     _leader("real", LaunchArg("leader_calibration_file")),
     _safety(topics.LEADER_STATES),
     _recorder()))

_TWIN_ARGS = (
    Arg("twin_band_file", "", "band of this arm's rolling gap (so101 twin-band): /diagnostics warns when a joint "
        "leaves it; '' = no band check"),
    Arg("twin_sim_delta_model", "", "sim-delta model the twin's MuJoCo is driven through (command + Δ); '' = the "
        "nominal MuJoCo of the offline gap"),
)


def _twin(when: When | None, command_topic: Value = topics.POLICY_COMMAND) -> NodeDecl:
    """The live gap twin: MuJoCo on the policy's commands beside the measured arm (so101_sim2real.twin_node)."""
    return NodeDecl("so101_sim2real", "twin", "twin", "so101_sim2real.twin_node:TwinNode", None,
                    {"band_file": LaunchArg("twin_band_file"), "sim_delta_model": LaunchArg("twin_sim_delta_model"),
                     "use_sim_time": LaunchArg("use_sim_time")},
                    remaps=((topics.POLICY_COMMAND, command_topic),), when=when)


_WEB_ARGS = (
    Arg("web_port", "9090", "web view: HTTP port of the page (open http://<this machine>:<web_port>/ in a browser)"),
    Arg("web_grpc_port", "9876", "web view: port the browser reads the live data from"),
    Arg("web_host", "", "web view: the address a browser reaches this machine at, for the printed URL ('' = the "
        "host name)"),
    Arg("web_rate_hz", "30", "web view: updates per second sent to browsers, at most (lower for slow clients)"),
)


def _web(when: When | None, command_topic: Value = topics.JOINT_COMMAND) -> NodeDecl:
    """The live web view: the arm, its command and its twin in 3D, plots, servo telemetry (so101_apps.web_view_node)."""
    return NodeDecl("so101_apps", "web_view", "web_view", "so101_apps.web_view_node:WebViewNode", None,
                    {"web_port": LaunchArg("web_port"), "grpc_port": LaunchArg("web_grpc_port"),
                     "host": LaunchArg("web_host"), "rate_hz": LaunchArg("web_rate_hz"),
                     "use_sim_time": LaunchArg("use_sim_time")},
                    remaps=((topics.JOINT_COMMAND, command_topic),), when=when)


DEPLOY = Graph(
    "deploy", "Policy deployment: policy (or a scripted motion) → GapONet compensator → safety filter → driver",
    (*_ROBOT_ARGS,
     Arg("command_source", "policy", "policy: a trained policy (policy_path); motion: a scripted motion",
         ("policy", "motion")),
     Arg("policy_path", "", "LeRobot pretrained_model dir, TorchScript or ONNX file (command_source:=policy)"),
     Arg("motion", "sweep", "built-in motion (sweep, wave, hold) or SAGE motion file (command_source:=motion)"),
     Arg("motion_duration", "0.0", "s of a built-in motion (0: the motion's default)"),
     Arg("autostart_motion", "true", "false: the motion waits for ~/start", _BOOL),
     Arg("hold_start_pose", "false", "while waiting, command the motion's first pose", _BOOL),
     Arg("compensation", "true", "GapONet compensator in the chain", _BOOL),
     Arg("gaponet_model", ShareFile(PACKAGE, "models/gaponet_so101_default.onnx"), "compensator model file"),
     Arg("task", "deploy", "task name stored with each episode"),
     Arg("twin", "false", "run the live gap twin (MuJoCo on policy/joint_command beside the arm; recorded with "
         "each episode)", _BOOL),
     *_TWIN_ARGS,
     Arg("web", "false", "serve the live web view (rerun's web viewer: the arm, its command and twin, plots, servo "
         "telemetry and faults)", _BOOL),
     *_WEB_ARGS,
     *_RECORD_ARGS),
    (*_ROBOT_ACTIONS,
     NodeDecl("so101_policy", "policy", "policy", "so101_policy.policy_node:PolicyNode", "policy.yaml",
              {"policy_path": LaunchArg("policy_path")}, when=_when("command_source", "policy")),
     NodeDecl("so101_policy", "motion_player", "motion_player", "so101_policy.motion_player_node:MotionPlayerNode",
              None, {"motion": LaunchArg("motion"), "duration": LaunchArg("motion_duration"),
                     "autostart": LaunchArg("autostart_motion"), "hold_start_pose": LaunchArg("hold_start_pose")},
              remaps=(("output", topics.POLICY_COMMAND), ("output_chunk", topics.POLICY_ACTION_CHUNK)),
              when=_when("command_source", "motion")),
     NodeDecl("so101_gaponet", "compensator", "gaponet_compensator", "so101_gaponet.compensator_node:CompensatorNode",
              "compensator.yaml", {"model_path": LaunchArg("gaponet_model")}, when=_when("compensation", "true")),
     _safety(topics.COMPENSATED_COMMAND, _when("compensation", "true")),
     _safety(topics.POLICY_COMMAND, _when("compensation", "false")),
     _twin(_when("twin", "true")),
     _web(_when("web", "true")),
     _recorder()))

MONITOR = Graph(
    "monitor", "Live monitoring: the live gap twin, the web view (web:=true), and RViz with the measured arm and, as "
    "a ghost, the commanded arm",
    (Arg("command_topic", topics.absolute(topics.JOINT_COMMAND), "command stage to show as the ghost arm (absolute: the ghost's "
         "robot_state_publisher runs in the commanded/ namespace)"),
     Arg("twin", "true", "run the live gap twin beside the arm", _BOOL),
     Arg("twin_command_topic", topics.POLICY_COMMAND, "command stream the twin replays (the offline gap's: the "
         "policy's command)"),
     *_TWIN_ARGS,
     Arg("web", "false", "serve the live web view in a browser (rerun's web viewer; the command ghost is "
         "command_topic)", _BOOL),
     *_WEB_ARGS,
     Arg("rviz", "true", "start RViz", _BOOL),
     Arg("use_sim_time", "false", "use /clock", _BOOL)),
    (_twin(_when("twin", "true"), LaunchArg("twin_command_topic")),
     _web(_when("web", "true"), LaunchArg("command_topic")),
     # the commanded arm: a second robot_state_publisher under the "commanded/" TF prefix, pinned onto the base
     NodeDecl("tf2_ros", "static_transform_publisher",
              arguments=("--frame-id", "base_link", "--child-frame-id", "commanded/base_link")),
     NodeDecl("robot_state_publisher", "robot_state_publisher", namespace="commanded",
              overrides={"robot_description": FileText(_DESCRIPTION), "frame_prefix": "commanded/",
                         "use_sim_time": LaunchArg("use_sim_time")},
              remaps=((topics.JOINT_STATES, LaunchArg("command_topic")),)),
     NodeDecl("rviz2", "rviz2", arguments=("-d", ShareFile("so101_description", "rviz/so101_monitor.rviz")),
              overrides={"use_sim_time": LaunchArg("use_sim_time")}, when=_when("rviz", "true"))))

GRAPHS: dict[str, Graph] = {g.name: g for g in (ROBOT, TELEOP, DEPLOY, MONITOR)}
