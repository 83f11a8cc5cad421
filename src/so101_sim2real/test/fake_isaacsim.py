"""A recording fake of the Isaac Sim modules that ``isaac/so101_isaac_bridge.py`` imports.

Isaac Sim cannot run here, so the bridge script is run against this fake. Its node types, port names
and port types, and the URDF importer's config fields and enum, are data copied from the upstream
definitions (IsaacSim v5.1.0; the .ogn files and the importer's commands are identical in v5.0.0):
a renamed node or port, a wrongly typed value, an int where the importer binds an enum, or an On
Physics Step node in a graph that is not on-demand fails here as it would in Isaac Sim.

The app's main loop is a model of ``omni.kit.loop-isaac``'s ``RunLoopRunner`` (IsaacSim v5.1.0,
``plugins/omni.kit.loop/RunLoopRunner.cpp``, the same in v5.0.0) with the settings a standalone app starts
with (``apps/isaacsim.exp.base.kit``): each ``SimulationApp.update()`` advances simulation time by the
manual step size in manual mode (the wall time the frame took otherwise), and when the rate limit is on
sleeps until 1/rateLimitFrequency of wall time has passed since the frame began. Wall time is simulated:
a frame's own work takes ``frame_work_s``.
"""

from __future__ import annotations

import enum
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OGN_NODES", "OmniGraphError", "UrdfJointTargetType", "ImportConfig", "FakeIsaacSim", "SO101_JOINTS", "ROBOT_ROOT",
           "MainLoop"]

# --- OmniGraph node definitions: {node type: {"inputs": {port: type}, "outputs": {port: type}}} ---------
OGN_NODES: dict[str, dict[str, dict[str, str]]] = {
    # source/extensions/isaacsim.core.nodes/nodes/OgnOnPhysicsStep.ogn
    "isaacsim.core.nodes.OnPhysicsStep": {
        "inputs": {},
        "outputs": {"step": "execution", "deltaSimulationTime": "double", "deltaSystemTime": "double"},
    },
    # Kit's omni.graph.action (used by isaacsim.ros2.bridge python/impl/og_shortcuts/og_utils.py); fires per
    # rendered frame. Listed so a graph ticked by it builds here and the timing test, not the fake, rejects it.
    "omni.graph.action.OnPlaybackTick": {
        "inputs": {},
        "outputs": {"tick": "execution", "time": "double", "frame": "double", "deltaSeconds": "double"},
    },
    # source/extensions/isaacsim.core.nodes/nodes/OgnIsaacReadSimulationTime.ogn
    "isaacsim.core.nodes.IsaacReadSimulationTime": {
        "inputs": {"resetOnStop": "bool", "referenceTimeNumerator": "int64", "referenceTimeDenominator": "uint64"},
        "outputs": {"simulationTime": "double"},
    },
    # source/extensions/isaacsim.core.nodes/python/nodes/OgnIsaacArticulationController.ogn
    "isaacsim.core.nodes.IsaacArticulationController": {
        "inputs": {"execIn": "execution", "targetPrim": "target", "robotPath": "string", "jointNames": "token[]",
                   "jointIndices": "int[]", "positionCommand": "double[]", "velocityCommand": "double[]",
                   "effortCommand": "double[]"},
        "outputs": {},
    },
    # source/extensions/isaacsim.ros2.bridge/nodes/OgnROS2PublishClock.ogn
    "isaacsim.ros2.bridge.ROS2PublishClock": {
        "inputs": {"execIn": "execution", "context": "uint64", "nodeNamespace": "string", "topicName": "string",
                   "qosProfile": "string", "queueSize": "uint64", "timeStamp": "double"},
        "outputs": {},
    },
    # source/extensions/isaacsim.ros2.bridge/nodes/OgnROS2PublishJointState.ogn
    "isaacsim.ros2.bridge.ROS2PublishJointState": {
        "inputs": {"execIn": "execution", "context": "uint64", "targetPrim": "target", "nodeNamespace": "string",
                   "topicName": "string", "qosProfile": "string", "queueSize": "uint64", "timeStamp": "double"},
        "outputs": {},
    },
    # source/extensions/isaacsim.ros2.bridge/nodes/OgnROS2SubscribeJointState.ogn
    "isaacsim.ros2.bridge.ROS2SubscribeJointState": {
        "inputs": {"execIn": "execution", "context": "uint64", "nodeNamespace": "string", "topicName": "string",
                   "qosProfile": "string", "queueSize": "uint64"},
        "outputs": {"execOut": "execution", "timeStamp": "double", "jointNames": "token[]",
                    "positionCommand": "double[]", "velocityCommand": "double[]", "effortCommand": "double[]"},
    },
}
PHYSICS_STEP_NODE = "isaacsim.core.nodes.OnPhysicsStep"
URDF_IMPORTER = "isaacsim.asset.importer.urdf"
ROS2_BRIDGE = "isaacsim.ros2.bridge"


class OmniGraphError(Exception):
    """Stands in for og.OmniGraphError."""


def _accepts(ogn_type: str, value: Any) -> bool:
    """Whether og.Controller would take this Python value for an attribute of this .ogn type."""
    if ogn_type in ("string", "token"):
        return isinstance(value, str)
    if ogn_type == "target":  # a prim path, or a list of them
        return isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
    if ogn_type == "bool":
        return isinstance(value, bool)
    if ogn_type in ("int64", "uint64"):
        return isinstance(value, int) and not isinstance(value, bool) and (ogn_type == "int64" or value >= 0)
    if ogn_type == "double":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if ogn_type.endswith("[]"):
        return isinstance(value, list) and all(_accepts(ogn_type[:-2], v) for v in value)
    return False


class GraphPipelineStage(enum.Enum):
    """omni.graph.core.GraphPipelineStage (Kit); Isaac uses ONDEMAND for physics-step graphs
    (isaacsim.core.nodes python/tests/test_physics_step.py)."""

    GRAPH_PIPELINE_STAGE_SIMULATION = 10
    GRAPH_PIPELINE_STAGE_PRERENDER = 20
    GRAPH_PIPELINE_STAGE_POSTRENDER = 30
    GRAPH_PIPELINE_STAGE_ONDEMAND = 200


class Keys:
    CREATE_NODES = "create_nodes"
    CONNECT = "connect"
    SET_VALUES = "set_values"


@dataclass
class Graph:
    path: str
    evaluator: str
    pipeline_stage: GraphPipelineStage
    nodes: dict[str, str] = field(default_factory=dict)  # node name → node type
    connections: list[tuple[str, str]] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)  # "node.inputs:port" → value


# --- URDF importer: isaacsim.asset.importer.urdf bindings (_urdf) --------------------------------------
class UrdfJointTargetType(enum.Enum):
    """bindings/isaacsim.asset.importer.urdf/IsaacsimAssetImporterUrdfBindings.cpp: py::enum_, no int conversion."""

    JOINT_DRIVE_NONE = 0
    JOINT_DRIVE_POSITION = 1
    JOINT_DRIVE_VELOCITY = 2


class ImportConfig:
    """_urdf.ImportConfig: the def_readwrite fields of the bindings with their C++ defaults
    (include/isaacsim/asset/importer/urdf/IUrdf.h).

    pybind11 converts Python numbers for bool/float fields but an enum field takes only the enum, and a
    class without py::dynamic_attr() has no other attributes.
    """

    _FIELDS: dict[str, Any] = {
        "merge_fixed_joints": True, "convex_decomp": False, "import_inertia_tensor": True, "fix_base": True,
        "self_collision": False, "density": 0.0, "default_drive_type": UrdfJointTargetType.JOINT_DRIVE_POSITION,
        "subdivision_scheme": "BILINEAR", "default_drive_strength": 1e3, "default_position_drive_damping": 1e2,
        "distance_scale": 1.0, "up_vector": (0.0, 0.0, 1.0), "create_physics_scene": False,
        "make_default_prim": False, "collision_from_visuals": False, "replace_cylinders_with_capsules": False,
        "parse_mimic": True, "override_joint_dynamics": False,
    }
    # the fields the fake and the tests read
    fix_base: bool
    merge_fixed_joints: bool
    default_drive_type: UrdfJointTargetType
    default_drive_strength: float

    def __init__(self) -> None:
        for name, default in self._FIELDS.items():
            object.__setattr__(self, name, default)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._FIELDS:
            raise AttributeError(f"'ImportConfig' object has no attribute '{name}'")
        if name == "default_drive_type" and not isinstance(value, UrdfJointTargetType):
            raise TypeError("(): incompatible function arguments. The following argument types are supported:\n"
                            "    1. (self: ImportConfig, arg0: UrdfJointTargetType) -> None")
        object.__setattr__(self, name, value)


# --- USD: just the stage and schema calls the script makes (UsdPhysics/PhysxSchema attribute names) ------
class Prim:
    def __init__(self, path: str, type_name: str) -> None:
        self.path = path
        self.type_name = type_name
        self.attributes: dict[str, Any] = {}
        self.applied: list[str] = []

    def IsA(self, schema: type) -> bool:
        return self.type_name == getattr(schema, "type_name", None)

    def GetPrim(self) -> Prim:
        return self


class Stage:
    def __init__(self) -> None:
        self.prims: dict[str, Prim] = {}

    def define(self, path: str, type_name: str) -> Prim:
        prim = self.prims.setdefault(str(path), Prim(str(path), type_name))
        return prim

    def Traverse(self) -> Iterator[Prim]:
        return iter(list(self.prims.values()))


class _Schema:
    type_name = ""

    @classmethod
    def Define(cls, stage: Stage, path: str) -> Prim:
        return stage.define(path, cls.type_name)


class _DriveAPI:
    def __init__(self, prim: Prim, instance: str) -> None:
        self.prim = prim
        self.prefix = f"drive:{instance}:physics:"

    @classmethod
    def Apply(cls, prim: Prim, instance: str) -> _DriveAPI:
        if instance not in ("angular", "linear", "transX", "transY", "transZ", "rotX", "rotY", "rotZ"):
            raise ValueError(f"invalid DriveAPI instance {instance!r}")
        prim.applied.append(f"PhysicsDriveAPI:{instance}")
        return cls(prim, instance)

    def CreateStiffnessAttr(self, value: float) -> None:
        self.prim.attributes[self.prefix + "stiffness"] = float(value)

    def CreateDampingAttr(self, value: float) -> None:
        self.prim.attributes[self.prefix + "damping"] = float(value)

    def CreateMaxForceAttr(self, value: float) -> None:
        self.prim.attributes[self.prefix + "maxForce"] = float(value)


class _PhysxSceneAPI:
    def __init__(self, prim: Prim) -> None:
        self.prim = prim

    @classmethod
    def Apply(cls, prim: Prim) -> _PhysxSceneAPI:
        prim.applied.append("PhysxSceneAPI")
        return cls(prim)

    def CreateTimeStepsPerSecondAttr(self, value: int) -> None:
        if not isinstance(value, int):  # physxScene:timeStepsPerSecond is a uint
            raise TypeError(f"timeStepsPerSecond takes an int, got {value!r}")
        self.prim.attributes["physxScene:timeStepsPerSecond"] = value


# --- the recording fake -----------------------------------------------------------------------------
SO101_JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
ROBOT_ROOT = "/so101/base_link"  # what URDFParseAndImportFile(get_articulation_root=True) returns here


# apps/isaacsim.exp.base.kit [settings.app]: runLoops.main.rateLimitEnabled = false, manualModeEnabled = true;
# RunLoopRunner.cpp defaults: rateLimitFrequency 60 (kDefaultFrequency), manual step 1/60 s (m_deltaTime)
STANDALONE_SETTINGS = {"/app/runLoops/main/rateLimitEnabled": False, "/app/runLoops/main/manualModeEnabled": True,
                       "/app/runLoops/main/rateLimitFrequency": 60.0}


class MainLoop:
    """The main run loop's clocks: what ``omni.kit.loop._loop.acquire_loop_interface()`` and the settings drive."""

    def __init__(self, settings: dict[str, Any], frame_work_s: float) -> None:
        self.settings = settings
        self.frame_work_s = frame_work_s
        self.manual_step_size = 1.0 / 60.0
        self.wall_time = 0.0
        self.sim_time = 0.0
        self.frames = 0

    # the loop interface's bindings (BindingsRunLoopRunnerPython.cpp)
    def set_manual_step_size(self, dt: float) -> None:
        self.manual_step_size = float(dt)

    def get_manual_step_size(self) -> float:
        return self.manual_step_size

    def set_manual_mode(self, enabled: bool) -> None:
        self.settings["/app/runLoops/main/manualModeEnabled"] = bool(enabled)

    def get_manual_mode(self) -> bool:
        return bool(self.settings["/app/runLoops/main/manualModeEnabled"])

    def update(self) -> None:
        """RunLoopThread::update: the frame's dt, its work, then the rate-limit sleep."""
        elapsed = self.frame_work_s
        if self.settings["/app/runLoops/main/rateLimitEnabled"]:
            elapsed = max(elapsed, 1.0 / float(self.settings["/app/runLoops/main/rateLimitFrequency"]))
        self.sim_time += self.manual_step_size if self.get_manual_mode() else elapsed
        self.wall_time += elapsed
        self.frames += 1


class _Settings:
    """carb.settings' ISettings for the keys the script writes (typed setters, as the bindings have)."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def set_bool(self, path: str, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"set_bool({path!r}) got {value!r}")
        self.values[path] = value

    def set_float(self, path: str, value: float) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"set_float({path!r}) got {value!r}")
        self.values[path] = float(value)

    def get(self, path: str) -> Any:
        return self.values.get(path)


class FakeIsaacSim:
    """Builds the fake module tree, records every call, and lets a test make the ROS 2 bridge fail."""

    def __init__(self, bridge_starts: bool = True, bridge_registers_nodes: bool = True, frames: int = 1,
                 frame_work_s: float = 0.002) -> None:
        # bridge_starts=False: on_startup finds no ROS 2 libraries and disables the extension.
        # bridge_registers_nodes=False: it stays enabled but get_startup_status() failed, so it returned
        # before register_nodes() (python/impl/extension.py).
        self.bridge_starts = bridge_starts
        self.bridge_registers_nodes = bridge_registers_nodes
        self.stage = Stage()
        self.graphs: dict[str, Graph] = {}
        self.enabled_extensions: list[str] = []
        self.import_configs: list[ImportConfig] = []
        self.app_configs: list[dict[str, Any]] = []
        self.app_closed = False
        self.timeline_playing = False
        self.frames = frames  # frames the app runs before the user closes it
        self.settings: dict[str, Any] = dict(STANDALONE_SETTINGS)
        self.main_loop = MainLoop(self.settings, frame_work_s)

    # omni.kit.commands.execute
    def execute(self, name: str, **kwargs: Any) -> tuple[bool, Any]:
        if URDF_IMPORTER not in self.enabled_extensions:
            raise KeyError(f"command {name} is not registered (extension {URDF_IMPORTER} disabled)")
        if name == "URDFCreateImportConfig":
            if kwargs:
                raise TypeError(f"URDFCreateImportConfig takes no arguments, got {sorted(kwargs)}")
            return True, ImportConfig()
        if name == "URDFParseAndImportFile":
            # python/impl/commands.py: __init__(self, urdf_path, import_config, dest_path, get_articulation_root)
            allowed = {"urdf_path", "import_config", "dest_path", "get_articulation_root"}
            if not set(kwargs) <= allowed:
                raise TypeError(f"URDFParseAndImportFile got unexpected arguments {sorted(set(kwargs) - allowed)}")
            config = kwargs.get("import_config")
            if not isinstance(config, ImportConfig):
                raise TypeError(f"import_config must be an ImportConfig, got {config!r}")
            self.import_configs.append(config)
            for joint in SO101_JOINTS:  # the importer authors a position drive on every revolute joint
                prim = self.stage.define(f"/so101/joints/{joint}", "PhysicsRevoluteJoint")
                prim.attributes["drive:angular:physics:stiffness"] = config.default_drive_strength
            self.stage.define("/so101/joints/base_fixed", "PhysicsFixedJoint")
            root = ROBOT_ROOT if kwargs.get("get_articulation_root") else "/so101"
            return True, root
        raise KeyError(f"unknown command {name}")

    # omni.graph.core.Controller.edit
    def edit_graph(self, graph_spec: dict[str, Any], edits: dict[str, list[tuple[Any, ...]]]) -> tuple[Any, ...]:
        unknown = set(graph_spec) - {"graph_path", "evaluator_name", "pipeline_stage"}
        if unknown:
            raise ValueError(f"unknown graph keys {sorted(unknown)}")
        stage = graph_spec.get("pipeline_stage", GraphPipelineStage.GRAPH_PIPELINE_STAGE_SIMULATION)
        if not isinstance(stage, GraphPipelineStage):
            raise TypeError(f"pipeline_stage must be an og.GraphPipelineStage, got {stage!r}")
        graph = self.graphs.setdefault(graph_spec["graph_path"], Graph(
            graph_spec["graph_path"], graph_spec.get("evaluator_name", "push"), stage))
        for name, node_type in edits.get(Keys.CREATE_NODES, []):
            registered = node_type in OGN_NODES and (self.bridge_registers_nodes
                                                     or not node_type.startswith(ROS2_BRIDGE + "."))
            if not registered:
                raise OmniGraphError(f"node type {node_type!r} is not registered")
            graph.nodes[name] = node_type
        for source, target in edits.get(Keys.CONNECT, []):
            source_type = self._port_type(graph, source, "outputs")
            target_type = self._port_type(graph, target, "inputs")
            if source_type != target_type:
                raise OmniGraphError(f"cannot connect {source} ({source_type}) to {target} ({target_type})")
            graph.connections.append((source, target))
        for attribute, value in edits.get(Keys.SET_VALUES, []):
            port_type = self._port_type(graph, attribute, "inputs")
            if not _accepts(port_type, value):
                raise OmniGraphError(f"{attribute} is {port_type}, cannot take {value!r}")
            graph.values[attribute] = value
        # OgnOnPhysicsStep.cpp: outside an on-demand graph the node never fires (Isaac only logs an error).
        if PHYSICS_STEP_NODE in graph.nodes.values() and stage is not GraphPipelineStage.GRAPH_PIPELINE_STAGE_ONDEMAND:
            raise OmniGraphError("Physics OnSimulationStep node detected in a non on-demand Graph")
        return graph, [], [], {}

    @staticmethod
    def _port_type(graph: Graph, attribute: str, direction: str) -> str:
        node, _, port = attribute.partition(".")
        if node not in graph.nodes:
            raise OmniGraphError(f"{attribute}: no node {node!r} in {graph.path}")
        prefix = f"{direction}:"
        if not port.startswith(prefix):
            raise OmniGraphError(f"{attribute}: expected an {direction} attribute")
        ports = OGN_NODES[graph.nodes[node]][direction]
        if port[len(prefix):] not in ports:
            raise OmniGraphError(f"{attribute}: {graph.nodes[node]} has no {direction} port {port[len(prefix):]!r}")
        return ports[port[len(prefix):]]

    def enable_extension(self, name: str) -> bool:
        # isaacsim.ros2.bridge's on_startup disables the extension itself when ROS 2 cannot be loaded;
        # set_extension_enabled_immediate still reports True (isaacsim.core.utils.extensions).
        if name != ROS2_BRIDGE or self.bridge_starts:
            self.enabled_extensions.append(name)
        return True

    def modules(self) -> dict[str, types.ModuleType]:
        """The module tree to put into sys.modules."""
        fake = self
        mods = {name: types.ModuleType(name) for name in (
            "isaacsim", "isaacsim.core", "isaacsim.core.utils", "isaacsim.core.utils.extensions", "omni",
            "omni.kit", "omni.kit.app", "omni.kit.commands", "omni.kit.loop", "omni.kit.loop._loop", "omni.graph",
            "omni.graph.core", "omni.timeline", "omni.usd", "pxr", "carb", "carb.settings")}

        class SimulationApp:
            def __init__(self, config: dict[str, Any]) -> None:
                fake.app_configs.append(config)
                self._frames_left = fake.frames

            def update(self) -> None:
                fake.main_loop.update()

            def is_running(self) -> bool:
                running = self._frames_left > 0  # so many frames, then the user closes the window
                self._frames_left -= 1
                return running

            def close(self) -> None:
                fake.app_closed = True

        def started() -> None:
            if not fake.app_configs:
                raise RuntimeError("Kit is not running: create the SimulationApp first")

        def get_settings() -> _Settings:
            started()
            return _Settings(fake.settings)

        def acquire_loop_interface() -> MainLoop:
            started()
            return fake.main_loop

        mods["carb.settings"].get_settings = get_settings  # type: ignore[attr-defined]
        mods["omni.kit.loop._loop"].acquire_loop_interface = acquire_loop_interface  # type: ignore[attr-defined]
        mods["isaacsim"].SimulationApp = SimulationApp  # type: ignore[attr-defined]
        mods["isaacsim.core.utils.extensions"].enable_extension = self.enable_extension  # type: ignore[attr-defined]
        manager = types.SimpleNamespace(is_extension_enabled=lambda name: name in fake.enabled_extensions)
        app = types.SimpleNamespace(get_extension_manager=lambda: manager)
        mods["omni.kit.app"].get_app = lambda: app  # type: ignore[attr-defined]
        mods["omni.kit.commands"].execute = self.execute  # type: ignore[attr-defined]
        og = mods["omni.graph.core"]
        og.Controller = types.SimpleNamespace(edit=self.edit_graph, Keys=Keys)  # type: ignore[attr-defined]
        og.GraphPipelineStage = GraphPipelineStage  # type: ignore[attr-defined]
        timeline = types.SimpleNamespace(play=lambda: setattr(fake, "timeline_playing", True))
        mods["omni.timeline"].get_timeline_interface = lambda: timeline  # type: ignore[attr-defined]
        context = types.SimpleNamespace(get_stage=lambda: fake.stage)
        mods["omni.usd"].get_context = lambda: context  # type: ignore[attr-defined]

        pxr = mods["pxr"]
        pxr.Sdf = types.SimpleNamespace(Path=str)  # type: ignore[attr-defined]
        pxr.UsdLux = types.SimpleNamespace(DistantLight=type("DistantLight", (_Schema,), {"type_name": "DistantLight"}))  # type: ignore[attr-defined]
        pxr.UsdPhysics = types.SimpleNamespace(  # type: ignore[attr-defined]
            Scene=type("Scene", (_Schema,), {"type_name": "PhysicsScene"}),
            RevoluteJoint=type("RevoluteJoint", (_Schema,), {"type_name": "PhysicsRevoluteJoint"}),
            DriveAPI=_DriveAPI)
        pxr.PhysxSchema = types.SimpleNamespace(PhysxSceneAPI=_PhysxSceneAPI)  # type: ignore[attr-defined]

        for name, module in mods.items():  # parents expose their submodules, as real packages do
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(mods[parent], child, module)
        return mods

    def install(self, monkeypatch: Any) -> None:
        for name, module in self.modules().items():
            monkeypatch.setitem(sys.modules, name, module)
