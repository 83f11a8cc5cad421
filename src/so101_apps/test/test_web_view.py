"""The live web view: what it logs (read back from the recording), and ``so101 monitor --web`` in a real browser
(Debian's Chromium, headless, software rendering, no network) showing the arm, its command and its twin move."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import rclpy
import rerun as rr
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from sensor_msgs.msg import JointState

from so101_apps.web_view import Status, WebView, WebViewConfig
from so101_common.joints import JOINT_NAMES
from so101_description.kinematics import UrdfArm
from so101_testing import private_ros_env, wait_for

CHROMIUM = Path("/usr/bin/chromium")  # Debian's package (scripts/bootstrap_env.sh installs it where apt can)


def _column(table, entity: str, component: str) -> list:
    return [v for v in table.column(f"/{entity}:{component}").to_pylist() if v is not None]


def test_web_view_logs_the_arms_plots_servo_telemetry_and_events(tmp_path: Path) -> None:
    view = WebView(WebViewConfig(rate_hz=20.0))
    view.rec.save(tmp_path / "view.rrd")
    view.log_static()
    q = [0.3, -0.4, 0.5, 0.2, -0.1, 0.6]
    view.on_joint_states("measured", 100.0, JOINT_NAMES, q)
    view.on_joint_states("measured", 100.01, JOINT_NAMES, [0.0] * 6)  # 10 ms later: over 20 Hz, not logged
    view.on_gap("rmse", 100.0, JOINT_NAMES, [0.01, 0.02, 0.03, 0.04, 0.05, 0.06])
    servo = {"joint": "elbow_flex", "temperature_c": "41", "load_permille": "-120", "voltage_v": "11.9", "current_a": "0.250"}
    view.on_diagnostics(100.0, [Status("so101_driver: elbow_flex", 0, "ok", servo)])
    view.on_diagnostics(101.0, [Status("so101_driver: elbow_flex", 2, "servo reports OVERLOAD",
                                       {**servo, "faults": "overload"}),
                                Status("twin: gap twin", 1, "elbow_flex: position gap RMSE 0.08 rad above its band")])
    view.on_diagnostics(102.0, [Status("so101_driver: elbow_flex", 0, "ok", servo),
                                Status("twin: gap twin", 1, "elbow_flex: position gap RMSE 0.08 rad above its band")])
    view.close()
    # one row per log call (several events share a stamp)
    table = rr.dataframe.load_recording(tmp_path / "view.rrd").view(index="log_tick", contents="/**").select().read_all()
    arm = UrdfArm.load()
    rest, pose = (arm.link_poses(dict(zip(JOINT_NAMES, p, strict=True)))["gripper_link"] for p in ([0.0] * 6, q))
    # the arm at rest at the timeline's start (before any data), then where the joint state puts it
    assert np.allclose(_column(table, "arm/measured/gripper_link", "Transform3D:translation"),
                       [[rest[:3, 3]], [pose[:3, 3]]], atol=1e-6)
    nan = float("nan")
    # measured, command, twin (none received yet); once: the second state came within the rate's period
    np.testing.assert_equal(_column(table, "position/elbow_flex", "Scalars:scalars"), [[0.5, nan, nan]])
    assert _column(table, "gap/rmse", "Scalars:scalars") == [[0.01, 0.02, 0.03, 0.04, 0.05, 0.06]]
    np.testing.assert_equal(_column(table, "servo/temperature", "Scalars:scalars"), [[nan, nan, 41.0, nan, nan, nan]] * 3)
    np.testing.assert_equal(_column(table, "servo/load", "Scalars:scalars")[0], [nan, nan, -120.0, nan, nan, nan])
    events = _column(table, "events", "TextLog:text")
    levels = _column(table, "events", "TextLog:level")
    assert events[2:-1] == [["elbow_flex: overload (servo reports OVERLOAD)"],
                            ["so101_driver: elbow_flex: servo reports OVERLOAD"],
                            ["twin: gap twin: elbow_flex: position gap RMSE 0.08 rad above its band"],
                            ["elbow_flex: fault cleared"], ["so101_driver: elbow_flex: ok"]]
    assert levels[2:-1] == [["ERROR"], ["ERROR"], ["WARN"], ["INFO"], ["INFO"]]  # each change once, not every report
    # the view's own events around them: none yet, then arriving (the next test), and the source stopped
    assert [e[0].split(":")[0] for e in events[:2] + events[-1:]] == [
        "no joint_states yet", "joint_states arriving", "the web view's source stopped"]


def test_the_page_says_when_joint_states_are_missing_when_they_arrive_and_when_the_view_stops(tmp_path: Path) -> None:
    """An arm at rest looks the same as no arm: the events say none arrive (at start, and after ``quiet_s``
    without one, the command and diagnostics not counting), when they arrive, and that the source stopped."""
    now = [0.0]  # the view's clock (s)
    view = WebView(WebViewConfig(rate_hz=20.0, quiet_s=3.0), clock=lambda: now[0])
    view.rec.save(tmp_path / "view.rrd")
    view.log_static()
    view.check_sources()  # still none: said once
    now[0] = 1.0
    view.on_joint_states("measured", 100.0, JOINT_NAMES, [0.1] * 6)
    view.on_joint_states("measured", 100.01, JOINT_NAMES, [0.1] * 6)
    now[0] = 3.9
    view.check_sources()  # 2.9 s quiet: not yet
    view.on_joint_states("command", 102.0, JOINT_NAMES, [0.2] * 6)  # the command is not the arm
    view.on_diagnostics(102.5, [Status("so101_driver: elbow_flex", 0, "ok", {})])
    now[0] = 4.1
    view.check_sources()  # 3.1 s: said
    now[0] = 9.0
    view.check_sources()  # once a silence
    view.on_joint_states("measured", 108.0, JOINT_NAMES, [0.1] * 6)
    view.close()
    table = rr.dataframe.load_recording(tmp_path / "view.rrd").view(index="log_tick", contents="/events").select().read_all()
    rows = [(stamp, text[0], level[0]) for stamp, text, level in zip(
        table.column("stamp").to_pylist(), table.column("/events:TextLog:text").to_pylist(),
        table.column("/events:TextLog:level").to_pylist(), strict=True) if text is not None]
    seconds = [(s.timestamp() if s is not None else None, text.split(":")[0], level) for s, text, level in rows]
    assert seconds == [(0.0, "no joint_states yet", "WARN"), (100.0, "joint_states arriving", "INFO"),
                       (102.5, "no joint_states for 3 s", "WARN"), (108.0, "joint_states arriving", "INFO"),
                       (108.0, "the web view's source stopped", "WARN")]
    # each also the status line, the whole text
    status = rr.dataframe.load_recording(tmp_path / "view.rrd").view(index="log_tick", contents="/status").select().read_all()
    assert [t[0] for t in status.column("/status:TextDocument:text").to_pylist() if t is not None] == [t for _, t, _ in rows]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Arm(threading.Thread):
    """Publishes the arm's joint states, the driver's command and the policy's command at 10 Hz, stamped now, and
    a servo's telemetry on ``/diagnostics``, during each :meth:`burst`; ``pose`` sets each one's (shoulder_pan,
    shoulder_lift)."""

    def __init__(self, namespace: str) -> None:
        super().__init__(daemon=True)
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("web_view_test_arm", namespace=namespace, context=self.context)
        self.publishers = {topic: self.node.create_publisher(JointState, topic, 10)
                           for topic in ("joint_states", "joint_command", "policy/joint_command")}
        self.diagnostics = self.node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.pose = {"joint_states": (-0.8, -0.8), "joint_command": (0.8, 0.8), "policy/joint_command": (0.0, 0.0)}
        self.publishing = threading.Event()  # set: publish; clear: quiet (the viewer drains what it got)
        self.stop = threading.Event()

    def burst(self, seconds: float) -> None:
        """Publish for ``seconds``, then go quiet."""
        self.publishing.set()
        self.stop.wait(seconds)
        self.publishing.clear()

    def run(self) -> None:
        while not self.stop.wait(0.1):
            if not self.publishing.is_set():
                continue
            stamp = self.node.get_clock().now().to_msg()
            for topic, publisher in self.publishers.items():
                pan, lift = self.pose[topic]
                msg = JointState(name=list(JOINT_NAMES), position=[pan, lift, 0.5, 0.3, 0.0, 0.2])
                msg.header.stamp = stamp
                publisher.publish(msg)
            status = DiagnosticStatus(name="so101_driver: elbow_flex", message="ok", values=[
                KeyValue(key=k, value=v) for k, v in (("joint", "elbow_flex"), ("temperature_c", "38"),
                                                      ("load_permille", "150"), ("voltage_v", "12.1"))])
            array = DiagnosticArray(status=[status])
            array.header.stamp = stamp
            self.diagnostics.publish(array)

    def close(self) -> None:
        self.stop.set()
        self.join(timeout=5.0)
        self.node.destroy_node()
        self.context.try_shutdown()


def _pixels(png: bytes) -> tuple[np.ndarray, np.ndarray]:
    """The screenshot's 3D view (the left half under the top bar) and plots (the right half), RGB as int."""
    from io import BytesIO

    from PIL import Image

    image = np.asarray(Image.open(BytesIO(png)).convert("RGB")).astype(int)
    height, width, _ = image.shape
    body = image[50:height - 40]
    return body[:, : width // 2 - 10], body[:, width // 2 + 10:]


def _arms(view: np.ndarray) -> dict[str, np.ndarray]:
    """Pixels (row, column) of each arm's colour: the measured arm's printed parts (the URDF's yellow), the
    command ghost (translucent blue), the twin ghost (translucent magenta)."""
    r, g, b = view[..., 0], view[..., 1], view[..., 2]
    masks = {"measured": (r > 170) & (g > 120) & (b < 90) & (r - b > 100),
             "command": (b - r > 50) & (b - g > 20),
             "twin": (r - g > 50) & (b - g > 40)}
    return {kind: np.argwhere(mask) for kind, mask in masks.items()}


def _layout(arms: dict[str, np.ndarray], minimum: int = 1500, apart_px: float = 40.0) -> np.ndarray | None:
    """The image vector from the measured arm to the command ghost, when all three arms are drawn, those two
    apart and the twin ghost between them (it follows the policy's command, half way); else None."""
    if min(len(p) for p in arms.values()) < minimum:
        return None
    centre = {kind: pixels.mean(axis=0) for kind, pixels in arms.items()}
    apart = centre["command"] - centre["measured"]
    along = float(np.dot(centre["twin"] - centre["measured"], apart) / np.dot(apart, apart))
    return apart if np.linalg.norm(apart) > apart_px and 0.0 < along < 1.0 else None


def test_monitor_web_view_shows_the_arm_its_command_and_twin_live_in_chromium(tmp_path: Path) -> None:
    """``so101 monitor --web`` (twin on) beside an arm on the test's private domain, in a namespace; Chromium loads
    the page with every request off this machine refused. The measured arm, the command ghost and the twin ghost
    (which follows the policy's command, the twin's input) are drawn where the joint states put them, and move
    when they change, each whole in the 3D view; the joint plots draw the twin's and the command's lines."""
    from playwright.sync_api import Route, sync_playwright

    assert CHROMIUM.exists(), "Debian's chromium is missing: make env installs it (apt-get install chromium)"
    web, grpc = _free_port(), _free_port()
    monitor = subprocess.Popen(
        [sys.executable, "-m", "so101_apps.cli", "monitor", "--web", "--namespace", "/arm1", "--host", "127.0.0.1",
         "--web-port", str(web), "--web-grpc-port", str(grpc), "--web-rate", "2"],
        env=private_ros_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(monitor.stdout.readline, "")), daemon=True)
    reader.start()
    arm = _Arm("/arm1")
    arm.start()
    refused: list[str] = []

    def refuse(route: Route) -> None:
        refused.append(route.request.url)
        route.abort()

    try:
        assert wait_for(lambda: any("web view: http://" in line for line in lines), timeout=60.0), "".join(lines)
        url = re.search(r"web view: (http\S+)", "".join(lines)).group(1)
        assert url == f"http://127.0.0.1:{web}/?url=rerun%2Bhttp://127.0.0.1:{grpc}/proxy"
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM),
                                                 args=["--use-angle=swiftshader", "--enable-unsafe-swiftshader"])
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            # everything off this machine is refused (the page asks for web fonts); this machine's requests are
            # not intercepted at all (an intercepted response arrives whole: the live data stream would stall)
            page.route(lambda url: not url.startswith("http://127.0.0.1:"), refuse)
            page.goto(url)
            # the arm in bursts: a software-rendered viewer ingests slower than a live stream, and drains a burst
            arm.burst(3.0)
            layouts: list[np.ndarray | None] = []

            seen: list[str] = []  # what each screenshot showed (for a failure's message; the last one is saved)

            def drawn() -> bool:
                png = page.screenshot()
                (tmp_path / "last_screenshot.png").write_bytes(png)
                view, plots = _pixels(png)
                arms, lines_drawn = _arms(view), _arms(plots)
                layouts.append(_layout(arms))
                seen.append(f"arm pixels { {k: len(v) for k, v in arms.items()} }, plot pixels "
                            f"{ {k: len(v) for k, v in lines_drawn.items()} }, measured→command {layouts[-1]}")
                return layouts[-1] is not None and len(lines_drawn["twin"]) > 100 and len(lines_drawn["command"]) > 100

            assert wait_for(drawn, timeout=150.0, interval=0.0), \
                f"the arms never showed ({tmp_path / 'last_screenshot.png'}): {seen[-3:]}\n" + "".join(lines[-20:])
            before = layouts[-1]
            assert before is not None
            view, _ = _pixels((tmp_path / "last_screenshot.png").read_bytes())
            inside = np.array(view.shape[:2]) - 3
            for kind, pixels in _arms(view).items():  # the default eye frames each arm whole: none cut at an edge
                assert (pixels.min(axis=0) > 2).all() and (pixels.max(axis=0) < inside).all(), \
                    f"the {kind} arm is cut off by the 3D view's edge ({tmp_path / 'last_screenshot.png'})"
            arm.pose.update({"joint_states": arm.pose["joint_command"], "joint_command": arm.pose["joint_states"]})
            arm.burst(3.0)  # published while the page is open: live

            def moved() -> bool:  # the measured arm and the command ghost swapped places
                drawn()
                return layouts[-1] is not None and float(np.dot(layouts[-1], before)) < 0

            assert wait_for(moved, timeout=150.0, interval=0.0), \
                f"the arms did not move with the joint states ({tmp_path / 'last_screenshot.png'}): {seen[-3:]}"
            browser.close()
        assert refused and all(not u.startswith("http://127.0.0.1") for u in refused)  # the network was asked, refused
    finally:
        arm.close()
        monitor.send_signal(2)
        try:
            monitor.wait(timeout=20.0)
        except subprocess.TimeoutExpired:
            monitor.kill()
            monitor.wait()


def test_a_taken_port_is_one_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=rf"web view: port {port} \(grpc_port\) is taken"):
            WebView(WebViewConfig(grpc_port=port, web_port=_free_port())).serve()


def _port_in_time_wait() -> int:
    """A port whose last connection this side closed first: the kernel keeps it in TIME-WAIT for a minute, as
    a web view's ports are after a browser was connected to them."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("0.0.0.0", 0))
        listener.listen()
        port = int(listener.getsockname()[1])
        client = socket.create_connection(("127.0.0.1", port))
        served, _ = listener.accept()
        served.close()  # the server side closes first: its end waits in TIME-WAIT
        client.close()
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind(("0.0.0.0", port))  # what the web view's port check did: "taken"
    return port


def test_a_port_a_browser_just_left_is_free_to_serve_again() -> None:
    """make demo's second session (the compensated one) ended on "port 9876 (grpc_port) is taken" when a browser
    had the first session's view open: the port was only in TIME-WAIT, which the servers themselves bind over."""
    grpc_port, web_port = _port_in_time_wait(), _port_in_time_wait()
    view = WebView(WebViewConfig(grpc_port=grpc_port, web_port=web_port))
    try:
        assert f":{web_port}/" in view.serve()
        for port in (grpc_port, web_port):  # both servers listen where the check let them
            socket.create_connection(("127.0.0.1", port), timeout=5.0).close()
    finally:
        view.close()
