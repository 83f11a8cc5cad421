"""The live web view (no rclpy): the arm in 3D with its command and its sim twin as ghosts, joint and gap plots,
servo telemetry and faults, served by rerun's web viewer to any browser (no install, no network).

:class:`WebView` logs into one rerun recording served over gRPC (``serve``), and serves the web viewer from the
installed ``rerun-sdk`` wheel over HTTP; a browser opening :attr:`WebView.url` gets the page, the viewer
(WebAssembly) and the live data from this process alone. The node (:mod:`so101_apps.web_view_node`) feeds it.

What it shows (entity paths): ``arm/measured``, ``arm/command``, ``arm/twin`` (the URDF's meshes, simplified to
a 2 mm grid, one entity per link; the measured arm in the URDF's colours, the command a translucent blue
ghost, the twin a translucent magenta one), ``position/<joint>`` (three series: measured, and the command
and the twin as last received, at each measured state; rad), ``gap/position`` and ``gap/rmse`` (the twin's
gap, one series per joint, rad), ``arm/reach`` (a grey circle on the floor, a quarter beyond the arm's reach:
it also frames the 3D view), ``servo/{temperature,load,voltage,current}`` (one series per joint, from the
driver's ``/diagnostics``) and ``events`` (servo faults, any status turning WARN/ERROR or back to OK, the measured
joint states missing, then arriving, and the view's source stopping; these three also as ``status``, the line
under the 3D view).
Time is the ``stamp`` timeline: the messages' header stamps. Each source is logged at most ``rate_hz`` times
a second, and few entities change per update (a browser ingests a bounded number of chunks per frame: with
a software renderer, a few dozen a second).
"""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote

import numpy as np
import rerun as rr
import rerun.blueprint as rrb

from so101_common.joints import JOINT_NAMES, joint
from so101_common.parameters import parameter
from so101_common.servo_faults import FAULTS_KEY, JOINT_KEY, SERVO_TELEMETRY
from so101_description.kinematics import UrdfArm
from so101_description.stl import TriangleMesh, read_stl

__all__ = ["ARMS", "WebViewConfig", "Status", "WebView", "JOINT_COLOURS"]

ARMS: dict[str, tuple[float, float, float, float] | None] = {
    "measured": None,  # the URDF's own colours
    "command": (0.20, 0.45, 1.00, 0.35),  # translucent blue ghost
    "twin": (0.95, 0.20, 0.85, 0.35),  # translucent magenta ghost
}
ARM_LINE_COLOURS = {"measured": (230, 180, 20), "command": (50, 115, 255), "twin": (240, 50, 215)}
JOINT_COLOURS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (23, 190, 207)]
TIMELINE = "stamp"
# rerun 0.26 writes a plot's first automatic Y range into the blueprint and keeps it: a warming servo's line, or a
# joint moving past where it started, left the plot. The temperature and joint plots get fixed ranges instead: from a
# cool room to past the servos' 70 °C overheat cut-off (°C), and each joint's limits with a margin (rad).
TEMPERATURE_RANGE_C = (15.0, 75.0)
JOINT_RANGE_MARGIN = 0.05  # of the joint's span, each side: a measured position a little past a limit stays in view
LEVELS = {0: rr.TextLogLevel.INFO, 1: rr.TextLogLevel.WARN, 2: rr.TextLogLevel.ERROR, 3: rr.TextLogLevel.WARN}


@dataclass(frozen=True)
class WebViewConfig:
    """The web view's settings (the node's parameters)."""

    web_port: int = parameter(9090, "HTTP port of the page and the viewer", low=1, high=65535)
    grpc_port: int = parameter(9876, "port the viewer reads the data from (rerun's gRPC server)", low=1, high=65535)
    host: str = parameter("", "the address a browser reaches this machine at, for the printed URL ('' = the host name)")
    rate_hz: float = parameter(30.0, "poses and plot points logged per source per second, at most", low=0.1, high=1000.0)
    mesh_cell_m: float = parameter(0.002, "grid (m) the URDF meshes are simplified to (vertex clustering)",
                                   low=0.0001, high=0.05)
    memory_limit: str = parameter("200MB", "data the server keeps for viewers that connect later (oldest dropped "
                                           "first; rerun's size format)")
    plot_window_s: float = parameter(30.0, "the plots show the last this many seconds", low=1.0, high=3600.0)
    quiet_s: float = parameter(3.0, "the page says no joint_states arrive once none came for this many seconds",
                               low=0.1, high=3600.0)


@dataclass(frozen=True)
class Status:
    """One ``diagnostic_msgs/DiagnosticStatus``, ROS-free."""

    name: str
    level: int  # 0 OK, 1 WARN, 2 ERROR, 3 STALE
    message: str
    values: Mapping[str, str] = field(default_factory=dict)


def _check_free(port: int, what: str) -> None:
    """Whether a server can listen on ``port``: bound as the servers bind (address reuse), a port still in TIME-WAIT
    after a browser's connection closed is free, one another process listens on is taken."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError as err:
            raise OSError(f"web view: port {port} ({what}) is taken ({err.strerror}): another monitor or web view "
                          f"is running, or choose another port") from None


def _joint_range(name: str) -> tuple[float, float]:
    spec = joint(name)
    margin = JOINT_RANGE_MARGIN * spec.span
    return spec.lower - margin, spec.upper + margin


def _rgba8(rgba: Sequence[float]) -> tuple[int, int, int, int]:
    r, g, b, a = (int(round(255 * c)) for c in rgba)
    return r, g, b, a


class WebView:
    """One live recording, served; feed it with the ``on_*`` methods (any thread)."""

    def __init__(self, config: WebViewConfig | None = None, arm: UrdfArm | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``clock`` (s) judges how long the measured joint states have been quiet (:meth:`check_sources`)."""
        self.config = config or WebViewConfig()
        self.arm = arm or UrdfArm.load()
        # chunks of a tenth of a second (or one update, if slower): a browser ingests a few large chunks faster
        # than many small ones
        flush = max(0.1, 1.0 / self.config.rate_hz)
        self.rec = rr.RecordingStream("so101_monitor", batcher_config=rr.ChunkBatcherConfig(flush_tick=flush))
        self.url = ""
        self._last: dict[str, float] = {}  # source → stamp last logged (throttle)
        self._levels: dict[str, int] = {}  # status name → last level seen (events on changes)
        self._faults: dict[str, str] = {}  # joint → fault kinds now reported
        self._latest: dict[str, dict[str, float]] = {kind: {} for kind in ARMS}  # last positions received, by arm
        self._clock = clock
        self._stamp = 0.0  # the latest stamp logged at: where the view's own events go on the timeline
        # the measured arm's joint states: when the last one arrived (clock), and whether the page says they do
        # not arrive (at start, and after quiet_s without one): an arm at rest looks the same as no arm at all
        self._measured_at: float | None = None
        self._quiet = False
        self._quiet_lock = threading.Lock()  # the node's callbacks and its timer may run on different threads

    # -- serving ----------------------------------------------------------------------------------
    def serve(self) -> str:
        """Start the gRPC and HTTP servers, log the arm and the layout; returns the viewer's URL."""
        config = self.config
        for port, what in ((config.grpc_port, "grpc_port"), (config.web_port, "web_port")):
            _check_free(port, what)  # rerun only logs a gRPC port it cannot bind; the page would wait for data forever
        # The layout goes after the server is up, not as serve_grpc's default_blueprint: rerun 0.26's serve_grpc
        # holds the GIL while its server thread encodes that blueprint, and freeing the blueprint's numpy-backed
        # arrays needs the GIL; about one start in 15 deadlocked. The server keeps blueprints for late viewers.
        grpc = self.rec.serve_grpc(grpc_port=config.grpc_port, server_memory_limit=config.memory_limit)
        self.rec.send_blueprint(self.blueprint(), make_active=True, make_default=True)
        rr.serve_web_viewer(web_port=config.web_port, open_browser=False, connect_to=grpc)
        host = config.host or socket.gethostname()
        data = grpc.replace("127.0.0.1", host).replace("0.0.0.0", host).replace("localhost", host)
        self.url = f"http://{host}:{config.web_port}/?url={quote(data, safe=':/')}"
        self.log_static()
        return self.url

    def close(self) -> None:
        """Say on the page that this source stopped (a page keeps showing the last frame, and does not follow a
        new source on the same ports by itself), then send what is left and disconnect."""
        self._at(self._stamp)
        self._say("the web view's source stopped: reload the page for a new session (this one keeps its last data)",
                  rr.TextLogLevel.WARN)
        self.rec.flush()
        self.rec.disconnect()

    def blueprint(self) -> rrb.Blueprint:
        window = rrb.VisibleTimeRange(TIMELINE, start=rrb.TimeRangeBoundary.cursor_relative(seconds=-self.config.plot_window_s),
                                      end=rrb.TimeRangeBoundary.cursor_relative())
        plots = [rrb.TimeSeriesView(origin=f"position/{name}", name=f"{name} [rad]", time_ranges=window,
                                    axis_y=rrb.ScalarAxis(range=_joint_range(name)))
                 for name in JOINT_NAMES]
        servo = [rrb.TimeSeriesView(origin=f"servo/{quantity}", name=f"{quantity} [{unit}]", time_ranges=window,
                                    axis_y=rrb.ScalarAxis(range=TEMPERATURE_RANGE_C) if quantity == "temperature" else None)
                 for quantity, (_, unit) in SERVO_TELEMETRY.items()]
        return rrb.Blueprint(
            rrb.Horizontal(
                rrb.Vertical(rrb.Spatial3DView(origin="arm", name="arm: measured, command (blue), twin (magenta)"),
                             rrb.TextDocumentView(origin="status", name="status"), row_shares=[10, 1]),
                rrb.Vertical(
                    rrb.Grid(*plots, grid_columns=3),
                    rrb.Horizontal(rrb.TimeSeriesView(origin="gap/position", name="twin gap sim − measured [rad]",
                                                      time_ranges=window),
                                   rrb.TimeSeriesView(origin="gap/rmse", name="rolling RMSE [rad]", time_ranges=window)),
                    rrb.Horizontal(rrb.Tabs(*servo), rrb.TextLogView(origin="events", name="faults and warnings")),
                    row_shares=[2, 1, 1]),
                column_shares=[1, 1]),
            collapse_panels=True)

    def log_static(self) -> None:
        """The arms' meshes, the series' colours and the arm at rest: once, to whatever the recording streams to
        (:meth:`serve` does it; a test that saves the recording to a file calls it itself)."""
        rec = self.rec
        rec.log("arm", rr.ViewCoordinates.RIGHT_HAND_Z_UP, static=True)
        meshes: dict[str, TriangleMesh] = {}
        for kind, tint in ARMS.items():
            for link, visuals in self.arm.visuals.items():
                if not visuals:
                    continue
                vertices, triangles, normals, colours = [], [], [], []
                offset = 0
                for visual in visuals:
                    if visual.mesh.name not in meshes:
                        meshes[visual.mesh.name] = read_stl(visual.mesh).simplified(self.config.mesh_cell_m)
                    mesh = meshes[visual.mesh.name]
                    rotation, translation = visual.origin[:3, :3], visual.origin[:3, 3]
                    vertices.append(mesh.vertices @ rotation.T + translation)
                    normals.append(mesh.normals() @ rotation.T)
                    triangles.append(mesh.triangles + offset)
                    colours.append(np.tile(_rgba8(visual.rgba), (len(mesh.vertices), 1)))
                    offset += len(mesh.vertices)
                rec.log(f"arm/{kind}/{link}", rr.Mesh3D(
                    vertex_positions=np.vstack(vertices), triangle_indices=np.vstack(triangles),
                    vertex_normals=np.vstack(normals),
                    vertex_colors=np.vstack(colours) if tint is None else None,
                    albedo_factor=_rgba8(tint) if tint is not None else None), static=True)
        series = [ARM_LINE_COLOURS[kind] for kind in ARMS]
        for name in JOINT_NAMES:
            rec.log(f"position/{name}", rr.SeriesLines(colors=series, names=list(ARMS)), static=True)
        joint_colours = [JOINT_COLOURS[i % len(JOINT_COLOURS)] for i in range(len(JOINT_NAMES))]
        for quantity in ("gap/position", "gap/rmse", *(f"servo/{q}" for q in SERVO_TELEMETRY)):
            rec.log(quantity, rr.SeriesLines(colors=joint_colours, names=list(JOINT_NAMES)), static=True)
        # every arm at rest at the timeline's start (temporal: a static pose would hide every later one); the root
        # link never moves: static
        self._at(0.0)
        for kind in ARMS:
            self._log_pose(kind, {})
            rec.log(f"arm/{kind}/{self.arm.root}", rr.Transform3D(), static=True)
        # the arm's reach on the floor, a circle around its base: also what frames the arm. rerun 0.26's blueprint
        # cannot place the 3D view's eye; its default eye sits 1.5 half-diagonals of the scene's box from the box's
        # centre, which crops the arm alone (the box is the arm's); the circle makes the box about twice the arm
        rec.log("arm/reach", rr.LineStrips3D([self._reach_circle()], colors=[(150, 150, 150)], radii=rr.Radius.ui_points(1.0)),
                static=True)
        with self._quiet_lock:
            if self._measured_at is None:
                self._quiet = True
                self._say("no joint_states yet: the arm is drawn at rest (is its driver running, in this namespace?)",
                          rr.TextLogLevel.WARN)

    def _reach_circle(self, segments: int = 96) -> np.ndarray:
        """A circle on the floor (z 0) around the base, a quarter beyond the arm's horizontal reach (its farthest
        mesh vertex from the vertical axis at rest, where it lies stretched out): with the quarter, the default eye
        showed the arms whole in 1280×800 and 1600×1000 pages (without the circle, they were cut)."""
        reach = 0.0
        for link, pose in self.arm.link_poses({}).items():
            for visual in self.arm.visuals.get(link) or []:
                placed = pose @ visual.origin
                points = read_stl(visual.mesh).vertices @ placed[:3, :3].T + placed[:3, 3]
                reach = max(reach, float(np.linalg.norm(points[:, :2], axis=1).max()))
        angle = np.linspace(0.0, 2 * math.pi, segments + 1)
        return 1.25 * reach * np.column_stack([np.cos(angle), np.sin(angle), np.zeros_like(angle)])

    # -- data -------------------------------------------------------------------------------------
    def _due(self, source: str, stamp: float) -> bool:
        last = self._last.get(source)
        if last is not None and 0.0 <= stamp - last < 1.0 / self.config.rate_hz:
            return False
        self._last[source] = stamp
        return True

    def _at(self, stamp: float) -> None:
        self._stamp = max(self._stamp, stamp)
        self.rec.set_time(TIMELINE, timestamp=stamp)

    def _event(self, text: str, level: rr.components.TextLogLevel) -> None:
        self.rec.log("events", rr.TextLog(text, level=level))

    def _say(self, text: str, level: rr.components.TextLogLevel) -> None:
        """An event that is also the page's status line (under the 3D view): the event log's text column is
        cut short, or off the page's right edge, in a window narrower than about 1600 px (its time columns take
        the width). A line of up to about 100 characters fits the status line in a 1280 px wide window."""
        self._event(text, level)
        self.rec.log("status", rr.TextDocument(text))

    def check_sources(self) -> None:
        """Say on the page when no measured joint state came for ``quiet_s``: call it every second or so (the
        node's timer); it logs once per silence, at the latest stamp logged."""
        with self._quiet_lock:
            if self._quiet or self._measured_at is None or self._clock() - self._measured_at < self.config.quiet_s:
                return
            self._quiet = True
            self._at(self._stamp)
            self._say(f"no joint_states for {self.config.quiet_s:g} s: the measured arm shows its last pose",
                        rr.TextLogLevel.WARN)

    def _log_pose(self, kind: str, positions: Mapping[str, float]) -> None:
        for link, pose in self.arm.link_poses(positions).items():
            if link != self.arm.root and self.arm.visuals.get(link):
                self.rec.log(f"arm/{kind}/{link}", rr.Transform3D(translation=pose[:3, 3], mat3x3=pose[:3, :3]))

    def on_joint_states(self, kind: str, stamp: float, names: Sequence[str], positions: Sequence[float]) -> None:
        """An arm's joint positions (rad) at ``stamp`` (s): ``kind`` is one of :data:`ARMS`. The measured arm's
        also log the joint plots, with the command and the twin as last received."""
        given = {n: float(p) for n, p in zip(names, positions, strict=False) if math.isfinite(p)}
        self._latest[kind] = given
        if kind == "measured":
            with self._quiet_lock:
                self._measured_at = self._clock()
                if self._quiet:
                    self._quiet = False
                    self._at(stamp)
                    self._say("joint_states arriving", rr.TextLogLevel.INFO)
        if not self._due(kind, stamp):
            return
        self._at(stamp)
        self._log_pose(kind, given)
        if kind == "measured":
            for name in JOINT_NAMES:
                self.rec.log(f"position/{name}", rr.Scalars([self._latest[k].get(name, math.nan) for k in ARMS]))

    def on_gap(self, quantity: str, stamp: float, names: Sequence[str], values: Sequence[float]) -> None:
        """The twin's position gap (``quantity`` "position") or its rolling RMSE ("rmse"), rad, by joint."""
        if not self._due(f"gap/{quantity}", stamp):
            return
        self._at(stamp)
        by_name = dict(zip(names, values, strict=False))
        self.rec.log(f"gap/{quantity}", rr.Scalars([float(by_name.get(name, math.nan)) for name in JOINT_NAMES]))

    def on_diagnostics(self, stamp: float, statuses: Sequence[Status]) -> None:
        """One ``/diagnostics`` message: servo telemetry as plots, faults and level changes as events."""
        self._at(stamp)
        telemetry = {quantity: [math.nan] * len(JOINT_NAMES) for quantity in SERVO_TELEMETRY}
        for status in statuses:
            joint = status.values.get(JOINT_KEY)
            if joint in JOINT_NAMES:
                for quantity, (key, _unit) in SERVO_TELEMETRY.items():
                    try:
                        telemetry[quantity][JOINT_NAMES.index(joint)] = float(status.values.get(key, "nan"))
                    except ValueError:
                        pass  # a newer driver's format: the plot misses a point, the view goes on
                faults = status.values.get(FAULTS_KEY, "")
                if faults != self._faults.get(joint, ""):
                    text = f"{joint}: {faults} ({status.message})" if faults else f"{joint}: fault cleared"
                    self._event(text, rr.TextLogLevel.ERROR if faults else rr.TextLogLevel.INFO)
                    self._faults[joint] = faults
            previous = self._levels.get(status.name)
            if previous is not None and previous != status.level or previous is None and status.level:
                self._event(f"{status.name}: {status.message}", LEVELS.get(status.level, rr.TextLogLevel.WARN))
            self._levels[status.name] = status.level
        for quantity, values in telemetry.items():
            if not all(math.isnan(v) for v in values):
                self.rec.log(f"servo/{quantity}", rr.Scalars(values))
