"""The Isaac Sim bridge script against a recording fake of Isaac Sim built from the upstream definitions."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest
from fake_isaacsim import ROBOT_ROOT, SO101_JOINTS, FakeIsaacSim, ImportConfig, OmniGraphError, UrdfJointTargetType

SCRIPT = Path(__file__).resolve().parents[1] / "so101_sim2real" / "isaac" / "so101_isaac_bridge.py"


@pytest.fixture
def bridge(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The standalone script, loaded from its file as Isaac Sim's python.sh would run it."""
    spec = importlib.util.spec_from_file_location("so101_isaac_bridge", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "so101_isaac_bridge", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def isaac_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """What python.sh and the documented exports give the script: Isaac Sim 5.1 and the bridge's environment."""
    (tmp_path / "VERSION").write_text("5.1.0-rc.19\n")
    monkeypatch.setenv("ISAAC_PATH", str(tmp_path))
    monkeypatch.setenv("ROS_DISTRO", "jazzy")
    monkeypatch.setenv("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    monkeypatch.setenv("LD_LIBRARY_PATH", f"/usr/lib:{tmp_path}/exts/isaacsim.ros2.bridge/jazzy/lib")
    (tmp_path / "so101.urdf").write_text("<robot name='so101'/>\n")  # read by the (fake) importer only
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_main(bridge: ModuleType, fake: FakeIsaacSim, monkeypatch: pytest.MonkeyPatch, *extra: str,
             urdf: str = "so101.urdf") -> None:
    fake.install(monkeypatch)
    bridge.main(["--urdf", urdf, "--headless", *extra])


def test_graph_is_evaluated_every_physics_step(bridge, isaac_env, monkeypatch) -> None:
    fake = FakeIsaacSim()
    run_main(bridge, fake, monkeypatch, "--play")

    graph = fake.graphs[bridge.GRAPH_PATH]
    assert graph.pipeline_stage.name == "GRAPH_PIPELINE_STAGE_ONDEMAND"
    tick = [name for name, node_type in graph.nodes.items() if node_type == "isaacsim.core.nodes.OnPhysicsStep"]
    assert len(tick) == 1
    # every executed node runs on the physics step, none on a per-frame tick
    exec_targets = {target for _, target in graph.connections if target.endswith(".inputs:execIn")}
    assert exec_targets == {f"{name}.inputs:execIn" for name, node_type in graph.nodes.items()
                            if "execIn" in _inputs(node_type)}
    assert all(source == f"{tick[0]}.outputs:step" for source, target in graph.connections if target in exec_targets)
    assert fake.stage.prims["/World/physicsScene"].attributes["physxScene:timeStepsPerSecond"] == 200
    assert fake.timeline_playing and fake.app_closed


@pytest.mark.parametrize("frame_work_s", [0.002, 0.05])
def test_simulation_time_never_runs_ahead_of_the_wall_clock(bridge, isaac_env, monkeypatch, frame_work_s) -> None:
    """Standalone Isaac Sim starts without a rate limit (isaacsim.exp.base.kit): the script paces the main loop."""
    fake = FakeIsaacSim(frames=500, frame_work_s=frame_work_s)
    run_main(bridge, fake, monkeypatch, "--play")

    loop = fake.main_loop
    assert loop.frames >= 500
    assert loop.sim_time <= loop.wall_time + 1e-9, f"{loop.sim_time:.2f} s simulated in {loop.wall_time:.2f} s"
    assert loop.sim_time == pytest.approx(loop.frames / bridge.FRAME_HZ)  # each frame: 1/50 s, 4 physics steps
    assert loop.manual_step_size * bridge.PHYSICS_HZ == pytest.approx(4)
    if frame_work_s < 1 / bridge.FRAME_HZ:  # a light frame waits for the wall clock: real time
        assert loop.sim_time == pytest.approx(loop.wall_time)


def test_frame_rate_must_divide_the_physics_rate(bridge, isaac_env, monkeypatch) -> None:
    fake = FakeIsaacSim()
    with pytest.raises(SystemExit) as exit_info:
        run_main(bridge, fake, monkeypatch, "--frame-hz", "60")
    assert "--frame-hz 60 does not divide the 200 Hz physics rate" in str(exit_info.value.code)
    assert fake.app_configs == []
    fake = FakeIsaacSim(frames=10)
    run_main(bridge, fake, monkeypatch, "--frame-hz", "200")
    assert fake.main_loop.manual_step_size == pytest.approx(1 / 200)  # one physics step per frame


def test_topics_and_robot_are_wired(bridge, isaac_env, monkeypatch) -> None:
    fake = FakeIsaacSim()
    run_main(bridge, fake, monkeypatch, "--command-topic", "cmd", "--state-topic", "states")

    graph = fake.graphs[bridge.GRAPH_PATH]
    by_type = {node_type.rsplit(".", 1)[1]: name for name, node_type in graph.nodes.items()}
    assert graph.values[f"{by_type['ROS2SubscribeJointState']}.inputs:topicName"] == "cmd"
    assert graph.values[f"{by_type['ROS2PublishJointState']}.inputs:topicName"] == "states"
    assert graph.values[f"{by_type['ROS2PublishJointState']}.inputs:targetPrim"] == ROBOT_ROOT
    assert graph.values[f"{by_type['IsaacArticulationController']}.inputs:robotPath"] == ROBOT_ROOT
    subscriber, controller = by_type["ROS2SubscribeJointState"], by_type["IsaacArticulationController"]
    assert (f"{subscriber}.outputs:positionCommand", f"{controller}.inputs:positionCommand") in graph.connections
    assert (f"{subscriber}.outputs:jointNames", f"{controller}.inputs:jointNames") in graph.connections
    sim_time = by_type["IsaacReadSimulationTime"]
    for stamped in ("ROS2PublishJointState", "ROS2PublishClock"):
        assert (f"{sim_time}.outputs:simulationTime", f"{by_type[stamped]}.inputs:timeStamp") in graph.connections
    assert fake.app_configs == [{"headless": True}]
    assert not fake.timeline_playing  # no --play: the user presses play


def test_urdf_import_keeps_the_position_drive_and_a_fixed_base(bridge, isaac_env, monkeypatch) -> None:
    fake = FakeIsaacSim()
    run_main(bridge, fake, monkeypatch)

    (config,) = fake.import_configs
    assert config.default_drive_type is UrdfJointTargetType.JOINT_DRIVE_POSITION
    assert config.fix_base is True and config.merge_fixed_joints is False


def test_the_fake_rejects_an_int_drive_type_as_the_importer_binding_does() -> None:
    config = ImportConfig()
    with pytest.raises(TypeError):
        config.default_drive_type = 1  # type: ignore[assignment]  # what the old script did
    with pytest.raises(AttributeError):
        config.drive_type = UrdfJointTargetType.JOINT_DRIVE_POSITION


def test_the_fake_rejects_a_renamed_port() -> None:
    fake = FakeIsaacSim()
    nodes = [("sub", "isaacsim.ros2.bridge.ROS2SubscribeJointState"),
             ("ctrl", "isaacsim.core.nodes.IsaacArticulationController")]
    with pytest.raises(OmniGraphError, match="positionCommands"):
        fake.edit_graph({"graph_path": "/g"}, {"create_nodes": nodes,
                                               "connect": [("sub.outputs:positionCommands", "ctrl.inputs:positionCommand")]})


def test_drive_gains_are_written_per_degree(bridge, isaac_env, monkeypatch) -> None:
    fake = FakeIsaacSim()
    run_main(bridge, fake, monkeypatch, "--kp", "1000", "--kd", "2", "--max-force", "3.35")

    joints = {prim.path.rsplit("/", 1)[1]: prim for prim in fake.stage.prims.values()
              if prim.type_name == "PhysicsRevoluteJoint"}
    assert sorted(joints) == sorted(SO101_JOINTS)
    for prim in joints.values():
        assert prim.attributes["drive:angular:physics:stiffness"] == pytest.approx(17.453292519943297)
        assert prim.attributes["drive:angular:physics:damping"] == pytest.approx(0.03490658503988659)
        assert prim.attributes["drive:angular:physics:maxForce"] == pytest.approx(3.35)  # a torque: no conversion
    assert "drive:angular:physics:stiffness" not in fake.stage.prims["/so101/joints/base_fixed"].attributes


def test_usd_angular_gains_per_degree(bridge) -> None:
    stiffness, damping = bridge.usd_angular_gains(bridge.DriveGains(kp=180.0 / math.pi, kd=360.0 / math.pi,
                                                                    max_force=1.0))
    assert (stiffness, damping) == (pytest.approx(1.0), pytest.approx(2.0))


def test_bridge_that_disables_itself_exits_with_the_fix(bridge, isaac_env, monkeypatch) -> None:
    fake = FakeIsaacSim(bridge_starts=False)
    with pytest.raises(SystemExit) as exit_info:
        run_main(bridge, fake, monkeypatch)
    message = str(exit_info.value.code)
    assert "isaacsim.ros2.bridge" in message and "LD_LIBRARY_PATH" in message
    assert f"{isaac_env}/exts/isaacsim.ros2.bridge/jazzy/lib" in message
    assert "\n" not in message
    assert fake.app_closed and not fake.graphs


def test_bridge_without_its_nodes_exits_naming_the_graph(bridge, isaac_env, monkeypatch) -> None:
    fake = FakeIsaacSim(bridge_registers_nodes=False)
    with pytest.raises(SystemExit) as exit_info:
        run_main(bridge, fake, monkeypatch)
    message = str(exit_info.value.code)
    assert bridge.GRAPH_PATH in message and "isaacsim.ros2.bridge.ROS2PublishJointState" in message
    assert "\n" not in message and fake.app_closed


@pytest.mark.parametrize("version", ["5.0.0", "5.1.0-rc.19"])
def test_supported_versions(bridge, tmp_path, version) -> None:
    (tmp_path / "VERSION").write_text(version + "\n")
    assert bridge.isaac_version({"ISAAC_PATH": str(tmp_path)}) == tuple(int(p) for p in version.split("-")[0].split(".")[:2])


@pytest.mark.parametrize("version", ["4.2.0", "4.5.0", "6.0.0", "2023.1.1"])
def test_unsupported_versions_are_named_with_the_reason(bridge, tmp_path, version) -> None:
    (tmp_path / "VERSION").write_text(version + "\n")
    with pytest.raises(bridge.BridgeSetupError, match=rf"Isaac Sim {version} is not supported.*: 5\.0, 5\.1; ") as error:
        bridge.isaac_version({"ISAAC_PATH": str(tmp_path)})
    assert "Jazzy bridge libraries" in str(error.value) and "URDFParseAndImportFile" in str(error.value)


def test_version_needs_python_sh(bridge) -> None:
    with pytest.raises(bridge.BridgeSetupError, match="ISAAC_PATH.*python.sh"):
        bridge.isaac_version({})


@pytest.mark.parametrize(("variable", "value"), [
    ("ROS_DISTRO", None), ("ROS_DISTRO", "humble"), ("RMW_IMPLEMENTATION", None),
    ("RMW_IMPLEMENTATION", "rmw_cyclonedds_cpp"), ("LD_LIBRARY_PATH", "/usr/lib"),
])
def test_missing_ros_environment_stops_before_isaac_starts(bridge, isaac_env, monkeypatch, variable, value) -> None:
    if value is None:
        monkeypatch.delenv(variable)
    else:
        monkeypatch.setenv(variable, value)
    fake = FakeIsaacSim()
    with pytest.raises(SystemExit) as exit_info:
        run_main(bridge, fake, monkeypatch)
    assert variable in str(exit_info.value.code)
    assert fake.app_configs == []


def test_missing_urdf_stops_before_isaac_starts(bridge, isaac_env, monkeypatch) -> None:
    fake = FakeIsaacSim()
    with pytest.raises(SystemExit) as exit_info:
        run_main(bridge, fake, monkeypatch, urdf="missing.urdf")
    assert str(exit_info.value.code) == "so101_isaac_bridge: missing.urdf: no such URDF file"
    assert fake.app_configs == []


def test_system_ros_library_folder_is_accepted(bridge) -> None:
    bridge.check_ros_environment({"ROS_DISTRO": "jazzy", "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp",
                                  "LD_LIBRARY_PATH": "/opt/ros/jazzy/lib"}, "/isaac")


def _inputs(node_type: str) -> dict[str, str]:
    from fake_isaacsim import OGN_NODES

    return OGN_NODES[node_type]["inputs"]
