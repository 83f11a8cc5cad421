"""``so101 fleet simulate``: a fleet of virtual SO-101s recording episode bags in simulated time.

Each arm (:mod:`so101_fleet.wear`) is a :class:`~so101_virtual.robot.VirtualSO101` built from its
profile of the day, with its own encoder mounting, driven in simulated time (``step``, never the wall
clock) the way the driver drives a real arm: every control period the host reads Present_Position,
Present_Velocity and Present_Load, converts them with the arm's LeRobot calibration, and writes the
next Goal_Position (LeRobot's servo settings: P 16, D 32, Acceleration 254). The servos' host-side
register interface (``ServoMemory.write``) is used in place of the serial bus: the bytes and rules
are the servo's, without the pty and its wall-clock pacing.

Every episode is a normal episode bag (the recorder's writer, MCAP) under ``ROOT/<robot_id>/``
with ``/joint_states``, ``/joint_command`` and ``/diagnostics`` (one status per servo per second,
ERROR when the servo's Status register has a bit set), stamped on the simulated clock from the
episode's start time. The episode metadata carries the fleet fields: robot id, the arm's profile of
the day (a YAML file under ``ROOT/<robot_id>/profiles/``, referenced with its SHA-256 and named by the
arm's serial), operator, task and time. ``ROOT/fleet.yaml`` records the fleet as drawn (the ground
truth of the wear rates, for tests and for judging the report; the pipeline never reads it).
Same arguments and seed → the same fleet, motions and measurements.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from rosbags.typesys import Stores, get_typestore

from so101_common import topics
from so101_common.joints import JOINT_NAMES
from so101_feetech.calibration import JointMapping
from so101_feetech.control_table import Register, encode_register
from so101_fleet.recorder_adapter import EpisodeMetadata, EpisodeWriter, file_ref
from so101_fleet.sim2real_adapter import joint_state_cdr
from so101_fleet.wear import ArmSpec, WearModel, arm_profile_dict, draw_fleet
from so101_virtual.motion import Motion, builtin_motion
from so101_virtual.profiles import load_profile, profile_from_dict
from so101_virtual.robot import VirtualSO101

__all__ = ["FleetConfig", "TASKS", "FLEET_FILE", "STATE_TOPIC", "COMMAND_TOPIC", "DIAGNOSTICS_TOPIC",
           "simulate_fleet", "simulate_arm", "record_episode", "diagnostics_cdr", "episode_plan", "load_fleet"]

FLEET_FILE = "fleet.yaml"
STATE_TOPIC = topics.absolute(topics.JOINT_STATES)
COMMAND_TOPIC = topics.absolute(topics.JOINT_COMMAND)
DIAGNOSTICS_TOPIC = topics.DIAGNOSTICS
JOINT_STATE_TYPE = "sensor_msgs/msg/JointState"
DIAGNOSTIC_ARRAY_TYPE = "diagnostic_msgs/msg/DiagnosticArray"
FLEET_EPOCH = _dt.datetime(2026, 1, 5, 8, 0, tzinfo=_dt.UTC)  # first day of every simulated fleet

TASKS: dict[str, tuple[float, float]] = {"sweep": (0.6, 8.0), "reach": (0.45, 6.0), "wave": (0.35, 4.0)}
"""Task name → (amplitude, period) of :func:`~so101_virtual.motion.builtin_motion`."""

_LEROBOT_SETTINGS = ((Register.P_Coefficient, 16), (Register.I_Coefficient, 0), (Register.D_Coefficient, 32),
                     (Register.Acceleration, 254))
_TYPESTORE = get_typestore(Stores.ROS2_JAZZY)


@dataclass(frozen=True)
class FleetConfig:
    arms: int = 4
    episodes: int = 4  # per arm
    days: int | None = None  # days the episodes spread over (default: one episode a day)
    duration_s: float = 6.0  # per episode, simulated seconds
    rate_hz: float = 50.0  # control (command and state) rate
    seed: int = 0
    operator: str = "fleet-sim"
    wear: WearModel = field(default_factory=WearModel)

    def __post_init__(self) -> None:
        if self.arms < 1 or self.episodes < 1:
            raise ValueError("--arms and --episodes must be ≥ 1")
        if self.days is not None and self.days < 1:
            raise ValueError("--days must be ≥ 1")
        if not (self.duration_s > 0 and self.rate_hz > 0):
            raise ValueError("duration and rate must be > 0")

    @property
    def span_days(self) -> int:
        return self.days if self.days is not None else self.episodes


def episode_plan(config: FleetConfig, arm_index: int, arm: ArmSpec) -> list[tuple[int, str, int]]:
    """``(day, task, start_time_ns)`` of each of the arm's episodes (reproducible from the arm's seed)."""
    rng = np.random.default_rng(arm.seed)
    plan = []
    spacing = max(30.0, config.duration_s + 10.0)  # s between the starts of an arm's episodes on one day
    first_of_day: dict[int, int] = {}
    for k in range(config.episodes):
        day = (k * config.span_days) // config.episodes
        task = list(TASKS)[int(rng.integers(len(TASKS)))]
        slot = k - first_of_day.setdefault(day, k)
        start = FLEET_EPOCH + _dt.timedelta(days=day, minutes=2 * arm_index, seconds=spacing * slot)
        plan.append((day, task, int(start.timestamp()) * 1_000_000_000))
    return plan


def simulate_fleet(root: Path | str, config: FleetConfig, progress: Callable[[int, int], None] | None = None, *,
                   workers: int | None = None, ray_address: str | None = None) -> list[Path]:
    """Record the whole fleet under ``root`` (which must not hold a fleet yet); returns the bag folders.
    In this process by default; with ``workers`` > 1 or ``ray_address``, one Ray task per arm (the same
    bags: every arm is drawn and driven from its own seed)."""
    root = Path(root).resolve()
    if (root / FLEET_FILE).exists():
        raise FileExistsError(f"{root / FLEET_FILE} exists: {root} already holds a simulated fleet; choose a new --out")
    root.mkdir(parents=True, exist_ok=True)
    arms = draw_fleet(config.arms, config.seed, config.wear)
    fleet = {"config": {k: v for k, v in asdict(config).items() if k != "wear"} | {"wear": asdict(config.wear)},
             "arms": [a.to_dict() for a in arms]}
    bags: list[Path] = []
    total = config.arms * config.episodes
    if ray_address is None and (workers is None or workers == 1):
        for index, arm in enumerate(arms):
            bags.extend(simulate_arm(root, index, arm, config))
            if progress is not None:
                progress(len(bags), total)
    else:
        from so101_fleet.ray_runtime import ray_session

        with ray_session(ray_address, cpus=workers) as ray:
            remote = ray.remote(num_cpus=1, max_retries=0)(simulate_arm)
            pending = [remote.remote(root, index, arm, config) for index, arm in enumerate(arms)]
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                bags.extend(ray.get(ready[0]))
                if progress is not None:
                    progress(len(bags), total)
        bags.sort(key=lambda bag: (bag.parent.name, bag.name))
    (root / FLEET_FILE).write_text(yaml.safe_dump(fleet, sort_keys=False))
    return bags


def simulate_arm(root: Path, index: int, arm: ArmSpec, config: FleetConfig) -> list[Path]:
    """Every episode of one arm (its profiles of the days, then its bags) under ``root/<robot_id>``."""
    base = load_profile("default")
    bags = []
    for number, (day, task, start_ns) in enumerate(episode_plan(config, index, arm), start=1):
        profile_path = root / arm.robot_id / "profiles" / f"day_{day:03d}.yaml"
        if not profile_path.exists():
            profile_path.parent.mkdir(parents=True, exist_ok=True)
            profile_path.write_text(yaml.safe_dump(arm_profile_dict(arm, day, base), sort_keys=False))
        bags.append(record_episode(root / arm.robot_id, arm, profile_path, task, number, start_ns, config))
    return bags


def record_episode(arm_root: Path, arm: ArmSpec, profile_path: Path, task: str, number: int, start_ns: int,
                   config: FleetConfig) -> Path:
    """One episode of ``arm`` executing ``task``, written as ``arm_root/<time>_<task>_<NNN>``."""
    data = yaml.safe_load(profile_path.read_text())
    profile = profile_from_dict({k: v for k, v in data.items() if k != "base"}, source=str(profile_path),
                                base=load_profile(data.get("base", "default")))
    amplitude, period = TASKS[task]
    motion = builtin_motion(amplitude=amplitude, period=period)
    robot = VirtualSO101(profile, "follower", mechanics_seed=arm.seed % 2**31, initial_positions=motion(0.0))
    mapping = JointMapping.from_calibration(robot.calibration())
    _torque_on(robot)
    stamp = _dt.datetime.fromtimestamp(start_ns / 1e9, tz=_dt.UTC)
    path = arm_root / f"{stamp:%Y%m%dT%H%M%SZ}_{task}_{number:03d}"
    metadata = EpisodeMetadata(name=path.name, robot_id=arm.robot_id, task=task, operator=config.operator,
                               gap_profile=file_ref(profile_path, must_exist=True), start_time_ns=start_ns,
                               notes=f"so101 fleet simulate (seed {config.seed}); arm serial {arm.serial}")
    sim_clock = [0.0]
    writer = EpisodeWriter(path, metadata, clock=lambda: sim_clock[0])
    with robot, writer:
        _drive(robot, mapping, motion, config, start_ns, writer, sim_clock)
        end_ns = start_ns + round(sim_clock[0] * 1e9)
        writer.close(stop_time_ns=end_ns)
    return path


def _torque_on(robot: VirtualSO101) -> None:
    for memory in robot.memories:
        for register, value in _LEROBOT_SETTINGS:
            memory.write(register.address, encode_register(register, value))
        memory.write(Register.Goal_Position.address,
                     encode_register(Register.Goal_Position, memory.get(Register.Present_Position)))
        memory.write(Register.Torque_Enable.address, encode_register(Register.Torque_Enable, 1))


def _drive(robot: VirtualSO101, mapping: JointMapping, motion: Motion, config: FleetConfig, start_ns: int,
           writer: EpisodeWriter, sim_clock: list[float]) -> None:
    period = 1.0 / config.rate_hz
    steps = int(round(config.duration_s * config.rate_hz))
    diagnostics_every = max(1, int(round(config.rate_hz)))
    names = tuple(JOINT_NAMES)
    for k in range(steps):
        t = k * period
        sim_clock[0] = t
        stamp_ns = start_ns + round(t * 1e9)
        raw = {r: np.array([m.get(r) for m in robot.memories], dtype=float)
               for r in (Register.Present_Position, Register.Present_Velocity, Register.Present_Load)}
        state = joint_state_cdr(stamp_ns / 1e9, names, mapping.to_rad(raw[Register.Present_Position]),
                                mapping.velocity_to_rad(raw[Register.Present_Velocity]),
                                mapping.load_to_effort(raw[Register.Present_Load]))
        writer.write(STATE_TOPIC, JOINT_STATE_TYPE, state, stamp_ns)
        if k % diagnostics_every == 0:
            writer.write(DIAGNOSTICS_TOPIC, DIAGNOSTIC_ARRAY_TYPE, diagnostics_cdr(stamp_ns, robot), stamp_ns)
        target = motion(t)
        goals = mapping.clamp_raw(mapping.to_raw(target))
        for memory, goal in zip(robot.memories, goals, strict=True):
            memory.write(Register.Goal_Position.address, encode_register(Register.Goal_Position, int(goal)))
        writer.write(COMMAND_TOPIC, JOINT_STATE_TYPE, joint_state_cdr(stamp_ns / 1e9, names, target), stamp_ns)
        robot.step(period)
    sim_clock[0] = steps * period


def diagnostics_cdr(stamp_ns: int, robot: VirtualSO101 | None = None, levels: dict[str, int] | None = None) -> bytes:
    """A ``diagnostic_msgs/DiagnosticArray`` with one status per servo, as the driver publishes it:
    ERROR when the servo's Status register has a bit set (or the level given in ``levels``)."""
    types = _TYPESTORE.types
    sec, nanosec = divmod(stamp_ns, 1_000_000_000)
    statuses = []
    for index, name in enumerate(JOINT_NAMES):
        bits = robot.memories[index].get(Register.Status) if robot is not None else 0
        level = (levels or {}).get(name, 2 if bits else 0)
        values = [types["diagnostic_msgs/msg/KeyValue"](key="status_bits", value=str(bits))]
        statuses.append(types["diagnostic_msgs/msg/DiagnosticStatus"](
            level=level, name=f"so101_driver: {name}", message="OK" if level == 0 else f"status bits {bits:#04x}",
            hardware_id=f"servo {index + 1}", values=values))
    header = types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec),
                                          frame_id="")
    message = types[DIAGNOSTIC_ARRAY_TYPE](header=header, status=statuses)
    return bytes(_TYPESTORE.serialize_cdr(message, DIAGNOSTIC_ARRAY_TYPE))


def load_fleet(root: Path | str) -> dict[str, Any]:
    """``ROOT/fleet.yaml`` as written by :func:`simulate_fleet` (the drawn fleet, ground truth)."""
    return yaml.safe_load((Path(root) / FLEET_FILE).read_text())

