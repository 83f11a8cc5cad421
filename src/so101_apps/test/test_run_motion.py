"""``so101 run-motion`` on the virtual SO-101, and faults that stop it (and the demo) instead of becoming gaps."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np

from so101_apps.session import answering_again
from so101_common import sage
from so101_common.paired_dataset import FaultSpan
from so101_recorder.metadata import load_episode
from so101_testing import best_lagged_correlation, private_ros_env, wait_for

OVERLOADED = Path(__file__).parent / "fixtures" / "overloaded.yaml"
ARM_JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll")


class JointStateListener:
    """A node of this process counting ``/joint_states`` messages."""

    def __enter__(self) -> JointStateListener:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from sensor_msgs.msg import JointState

        self.count = 0
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("listener", context=self.context)
        self.node.create_subscription(JointState, "/joint_states", self._on_state, 10)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()
        return self

    def _on_state(self, _msg: object) -> None:
        self.count += 1

    def __exit__(self, *exc: object) -> None:
        self.executor.shutdown()
        self.thread.join(timeout=5)
        self.node.destroy_node()
        self.context.try_shutdown()


def test_isolated_runs_on_a_private_loopback_domain() -> None:
    env = {k: v for k, v in private_ros_env().items() if k != "SO101_TEST_DOMAIN_ID"}
    env.update({"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET", "ROS_DOMAIN_ID": "0"})
    # the quickest benchmark (the safety filter's step, in process): the command's environment line is what is judged
    result = subprocess.run([sys.executable, "-m", "so101_apps.cli", "bench", "--isolated", "--only",
                             "so101_safety.bench"], env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    line = result.stdout.splitlines()[0]
    assert "(discovery LOCALHOST" in line and "private (--isolated)" in line and "domain 0 " not in line


def _so101(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "so101_apps.cli", *args], env=private_ros_env(),
                          capture_output=True, text=True, timeout=timeout)


def test_run_motion_records_a_bag_and_a_sage_real_run_visible_on_the_users_domain(tmp_path: Path) -> None:
    out = tmp_path / "out"
    # the "user's" environment: this test's domain, exported as a user would (no test-only variables)
    env = {k: v for k, v in private_ros_env().items() if k != "SO101_TEST_DOMAIN_ID"}
    child = subprocess.Popen([sys.executable, "-m", "so101_apps.cli", "run-motion", "--motion", "wave", "--duration",
                              "3", "--format", "sage", "--print-period", "1", "--out", str(out)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # another "shell" on the same domain (this test process) sees the arm's joint states while it moves
    with JointStateListener() as listener:
        assert wait_for(lambda: listener.count > 20 or child.poll() is not None, timeout=120)
        seen = listener.count
    stdout, stderr = child.communicate(timeout=240)
    result = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert seen > 20, f"{seen} joint states reached another process on the domain"
    assert f"ROS 2 domain {env['ROS_DOMAIN_ID']} (discovery LOCALHOST" in result.stdout
    assert "the environment this command was started in" in result.stdout
    (bag,) = [p for p in (out / "bags").iterdir() if p.is_dir()]
    episode = load_episode(bag)
    assert episode is not None and episode.task == "wave" and episode.faults == [] and episode.status == "complete"
    run = sage.read_run(out / "real" / "so101" / "custom" / "wave", kind="real")
    assert [name for name, _ in run.events] == ["CONTROL_MODE_ENABLE", "MOTION_START", "DISABLE"]
    disabled = run.event_time("DISABLE")
    assert disabled is not None and disabled > 3.0  # the whole motion
    command, state = sage.run_to_trajectories(run)
    assert len(command) == len(state) > 100 and np.array_equal(command.time, state.time)  # SAGE: a state per command
    # the arm followed the wave on every joint the wave moves (lag, sag and a loaded machine's jitter aside)
    moving = np.ptp(command.position, axis=0) > 0.1
    assert moving.sum() >= 3
    for j in np.flatnonzero(moving):
        best = best_lagged_correlation(command.position[:, j], state.position[:, j])
        assert best > 0.8, f"{command.names[j]}: state does not follow the command (best correlation {best:.2f})"


def test_a_servo_fault_stops_run_motion_keeps_the_recording_and_exits_non_zero(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = _so101("run-motion", "--profile", str(OVERLOADED), "--motion", "wave", "--duration", "20",
                    "--print-period", "1", "--out", str(out))
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "servo fault during wave" in result.stderr and ": overload from " in result.stderr
    assert "What to do: overload: the joint is blocked or carries too much" in result.stderr
    assert "FAULT " in result.stdout and "stopping the motion" in result.stdout
    (bag,) = [p for p in (out / "bags").iterdir() if p.is_dir()]
    episode = load_episode(bag)
    assert episode is not None and episode.status == "complete" and episode.stop_time_ns is not None
    assert episode.faults and {s.fault for s in episode.faults} == {"overload"}
    assert {s.joint for s in episode.faults} <= set(ARM_JOINTS)
    assert any(f"{s.joint}: overload" in result.stderr for s in episode.faults)  # the joint, where the user looks
    assert (episode.stop_time_ns - episode.start_time_ns) * 1e-9 < 15.0  # stopped, not played to the end


def test_a_servo_fault_stops_the_demo_before_anything_is_trained_on_it(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = _so101("demo", "--profile", str(OVERLOADED), "--excitation", "2", "--excitation-seconds", "20",
                    "--eval-motion", "wave", "--duration", "4", "--print-period", "1", "--out", str(out))
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "servo fault during wave" in result.stderr  # the first motion: the baseline's
    assert "refinement:" not in result.stdout and not (out / "excitation").exists()
    assert not (out / "gaponet_trained.onnx").exists()
    (bag,) = [p for p in (out / "uncompensated" / "bags").iterdir() if p.is_dir()]
    assert load_episode(bag).faults  # kept, with the fault


def _child_with(parent: int, module: str) -> int:
    """The pid of ``parent``'s child process running ``python -m module``."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        if ppid == parent and module.encode() in argv:
            return int(proc.name)
    raise AssertionError(f"no child of {parent} runs {module}")


def test_a_driver_that_dies_mid_motion_ends_run_motion_with_its_exit_and_keeps_the_episode(tmp_path: Path) -> None:
    """run-motion runs the driver in its own process: when it dies, the episode under way is closed and kept,
    and run-motion ends non-zero naming the driver's exit, instead of recording a silent arm to the end."""
    import os
    import signal

    from so101_testing import wait_for

    out = tmp_path / "out"
    process = subprocess.Popen([sys.executable, "-m", "so101_apps.cli", "run-motion", "--motion", "wave", "--duration",
                                "30", "--print-period", "1", "--out", str(out)],
                               env=private_ros_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        bags = out / "bags"
        assert wait_for(lambda: bags.is_dir() and any(p.is_dir() for p in bags.iterdir()), timeout=120), "no episode started"
        os.kill(_child_with(process.pid, "so101_driver.driver_node"), signal.SIGKILL)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 1, stderr[-3000:]
    assert "node so101_driver: exit status -9" in stderr  # the driver by its node name (NodeSpec.key)
    (bag,) = [p for p in bags.iterdir() if p.is_dir()]
    episode = load_episode(bag)
    assert episode is not None and episode.status == "complete" and episode.stop_time_ns is not None
    assert (episode.stop_time_ns - episode.start_time_ns) * 1e-9 < 25.0  # ended when the driver did, not at the motion's end


def test_servos_lost_for_a_moment_have_their_motion_recorded_again_and_the_run_goes_on(tmp_path: Path) -> None:
    """The virtual arm's process not getting the CPU for a moment (as on a loaded machine) loses every servo: the
    motion stops and is kept with its fault, and once the servos answer again it is recorded once more."""
    import os
    import signal

    from so101_testing import wait_for

    out, errors = tmp_path / "out", (tmp_path / "stderr.txt").open("w")
    process = subprocess.Popen([sys.executable, "-m", "so101_apps.cli", "run-motion", "--motion", "wave", "--duration",
                                "6", "--print-period", "1", "--out", str(out)],
                               env=private_ros_env(), stdout=subprocess.PIPE, stderr=errors, text=True)
    lines: list[str] = []  # its console, as it prints
    reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        assert wait_for(lambda: any(line.startswith("    1.0 |") for line in lines), timeout=120), "no motion played"
        arm = _child_with(process.pid, "virtual-bus")
        os.kill(arm, signal.SIGSTOP)  # the process that answers for the servos gets no CPU ...
        try:
            assert wait_for(lambda: any("FAULT " in line for line in lines), timeout=30), "no fault reported"
        finally:
            os.kill(arm, signal.SIGCONT)  # ... until the fault is reported
        process.wait(timeout=180)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        errors.close()
    reader.join(timeout=5)
    stdout, stderr = "".join(lines), (tmp_path / "stderr.txt").read_text()
    assert process.returncode == 0, stdout[-3000:] + stderr[-3000:]
    assert "a dropout of the bus, not a servo's protection. wave is recorded once more" in stdout
    stopped, again = sorted(p for p in (out / "bags").iterdir() if p.is_dir())
    first, second = load_episode(stopped), load_episode(again)
    assert first is not None and first.faults and {s.fault for s in first.faults} == {"lost"}
    assert second is not None and second.status == "complete" and not second.faults and second.stop_time_ns is not None
    assert (second.stop_time_ns - second.start_time_ns) * 1e-9 > 6.0  # played to its end


def test_a_dropout_is_only_lost_servos_that_answer_again() -> None:
    lost = [FaultSpan(joint="shoulder_pan", fault="lost", start=30.6), FaultSpan(joint="gripper", fault="lost", start=30.6)]
    reports = iter([True, True, False])
    assert answering_again(lost, lambda: next(reports), timeout=5.0)
    assert not answering_again(lost, lambda: True, timeout=0.05)  # still lost: a cable, an ID, a dead servo
    protection = [*lost, FaultSpan(joint="elbow_flex", fault="overload", start=30.6)]
    assert not answering_again(protection, lambda: False, timeout=5.0)  # a servo's own protection stops the run
    assert not answering_again([], lambda: False, timeout=5.0)


def test_every_motion_file_is_checked_before_anything_starts(tmp_path: Path) -> None:
    header = "Rotation,Pitch,Elbow,Wrist_Pitch,Wrist_Roll,Jaw\n"
    good = tmp_path / "good.txt"
    good.write_text(header + "0.0,0.0,0.5,0.0,0.0,0.5\n" * 50)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    nan_rows = tmp_path / "nan_rows.txt"
    nan_rows.write_text(header + "0.0,0.0,0.5,0.0,0.0,0.5\n" * 5 + "0.0,nan,0.5,0.0,0.0,0.5\n")
    for bad, why in ((empty, "is empty"), (nan_rows, ":7: expected finite numbers")):
        out = tmp_path / bad.stem
        result = _so101("run-motion", "--motion", str(good), str(bad), "--out", str(out), timeout=120)
        assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
        assert f"so101 run-motion: error: motion file {bad}" in result.stderr and why in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
        assert not (out / "virtual_arm").exists() and not (out / "bags").exists()  # nothing was started
