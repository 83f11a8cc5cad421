"""docker/ cannot be built here (no engine), so check the properties a first build depends on by reading
the Dockerfile, the compose files and the build-context filter, run the image's shebang check, and
cross-check every compose file (and the ``docker compose`` commands the docs show) against the images,
scripts, files and commands it names."""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import io
import re
import runpy
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fake_launch
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "docker" / "Dockerfile"
COMPOSE = ROOT / "docker" / "compose.yaml"
COMPOSE_FILES = sorted((ROOT / "docker").glob("compose*.yaml"))
CHECK_SHEBANGS = ROOT / "docker" / "check_shebangs.sh"
IMAGE_TAG = "so101-sim2real-{service}:jazzy"  # the one tag scheme of every compose file


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)  # (INSTRUCTION, arguments)

    def runs(self) -> list[str]:
        return [args for instruction, args in self.instructions if instruction == "RUN"]


def parse_dockerfile(path: Path) -> list[Stage]:
    """Stages with their instructions; continuation lines joined, comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    stages: list[Stage] = []
    for line in logical:
        instruction, _, args = line.partition(" ")
        instruction = instruction.upper()
        if instruction == "FROM":
            words = args.split()
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else str(len(stages))
            stages.append(Stage(name, words[0]))
        else:
            stages[-1].instructions.append((instruction, args.strip()))
    return stages


def env_value(stages: list[Stage], key: str) -> str:
    """The last ENV value of key (KEY=VALUE pairs) in the build's stages."""
    value = ""
    for stage in stages:
        for instruction, args in stage.instructions:
            if instruction == "ENV":
                for pair in shlex.split(args):
                    name, _, assigned = pair.partition("=")
                    if name == key:
                        value = assigned
    assert value, f"no ENV {key} in {DOCKERFILE}"
    return value


def expand(word: str, variables: dict[str, str]) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: variables.get(m.group(1), m.group(0)), word.strip("'\""))


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_dockerfile(DOCKERFILE)


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def shell_commands(run: str) -> list[list[str]]:
    """The simple commands of a RUN line, split at ``&&``, ``||``, ``;`` and ``|`` outside quotes."""
    lexer = shlex.shlex(run, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    for token in lexer:
        if token in ("&&", "||", ";", "|", "&"):
            commands.append([])
        else:
            commands[-1].append(token)
    return [command for command in commands if command]


def _colcon_commands(stages: list[Stage]) -> list[list[str]]:
    return [words for stage in stages for run in stage.runs() for words in shell_commands(run)
            if "colcon" in words or any(w.endswith("/colcon") for w in words)]


def test_colcon_builds_with_the_venv_interpreter(stages) -> None:
    venv = env_value(stages, "VIRTUAL_ENV")
    commands = _colcon_commands(stages)
    assert commands, "the Dockerfile never runs colcon"
    for words in commands:
        # `<venv>/bin/python -m colcon ...`: colcon-core runs setup.py with sys.executable, which
        # setuptools writes into every console script's shebang.
        assert words[1:3] == ["-m", "colcon"], f"colcon not run as a module of the venv's python: {shlex.join(words)}"
        assert expand(words[0], {"VIRTUAL_ENV": venv}) == f"{venv}/bin/python"


def test_installed_shebangs_are_checked_after_the_build(stages) -> None:
    venv = env_value(stages, "VIRTUAL_ENV")
    (build,) = [w for w in _colcon_commands(stages) if "build" in w]
    install_base = build[build.index("--install-base") + 1]
    runs = [run for stage in stages for run in stage.runs()]
    build_run = next(i for i, run in enumerate(runs) if "-m colcon build" in run)
    checks = [words for run in runs[build_run:] for words in shell_commands(run)
              if any(w.endswith("check_shebangs.sh") for w in words)]
    assert checks, "no docker/check_shebangs.sh step after colcon build"
    words = checks[0]
    script = words.index(next(w for w in words if w.endswith("check_shebangs.sh")))
    assert words[script] == "docker/check_shebangs.sh"
    assert [expand(w, {"VIRTUAL_ENV": venv}) for w in words[script + 1:script + 3]] == [install_base, venv]


def test_pip_keeps_setuptools_below_colcons_bound(stages) -> None:
    # colcon-core declares setuptools<80 (setup.cfg); the venv colcon runs in gets setuptools from pip.
    commands = [words for stage in stages for run in stage.runs() for words in shell_commands(run)]
    bounded = {words[words.index(">") + 1] for words in commands
               if words[0] == "echo" and ">" in words and "setuptools<80" in words}
    installs = [words for words in commands if words[:2] == ["pip", "install"]]
    assert installs and bounded
    for words in installs:
        constraints = {words[i + 1] for i, word in enumerate(words) if word == "-c"}
        assert constraints & bounded, f"pip install without the setuptools<80 constraint: {shlex.join(words)}"


def test_symlink_install_keeps_its_build_folder(stages) -> None:
    (build,) = [w for w in _colcon_commands(stages) if "build" in w]
    assert "--symlink-install" in build  # packages run from /ws/src, as CI's editable installs do
    build_base = build[build.index("--build-base") + 1]
    commands = [words for stage in stages for run in stage.runs() for words in shell_commands(run)]
    removed = {word for words in commands if words[0] == "rm" for word in words[1:] if not word.startswith("-")}
    assert build_base not in removed, "the symlinked packages live in the build folder"


def _script(path: Path, first_line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(first_line + "\nimport sys\n")


def _check(install: Path, venv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(CHECK_SHEBANGS), str(install), venv], capture_output=True, text=True,
                          check=False)


def test_shebang_check_accepts_venv_scripts_and_names_the_others(tmp_path) -> None:
    install = tmp_path / "install"
    _script(install / "so101_driver" / "lib" / "so101_driver" / "driver", "#!/opt/venv/bin/python")
    _script(install / "so101_bringup" / "bin" / "so101", "#!/opt/venv/bin/python3.12")
    _script(install / "so101_driver" / "lib" / "python3.12" / "site-packages" / "x.py", "#!/usr/bin/env python3")
    (install / "so101_driver" / "share" / "so101_driver").mkdir(parents=True)
    (install / "so101_driver" / "share" / "so101_driver" / "package.sh").write_text("#!/bin/sh\n")
    ok = _check(install, "/opt/venv")
    assert ok.returncode == 0, ok.stderr
    assert "2 console scripts" in ok.stdout

    _script(install / "so101_driver" / "lib" / "so101_driver" / "leader", "#!/usr/bin/python3")
    bad = _check(install, "/opt/venv")
    assert bad.returncode == 1
    assert "so101_driver/lib/so101_driver/leader starts with '#!/usr/bin/python3'" in bad.stderr


def test_shebang_check_fails_when_nothing_was_installed(tmp_path) -> None:
    (tmp_path / "install").mkdir()
    result = _check(tmp_path / "install", "/opt/venv")
    assert result.returncode == 1 and "no Python console scripts" in result.stderr


def test_compose_builds_the_stage_that_passed_the_test_suite(stages, compose) -> None:
    by_name = {stage.name: stage for stage in stages}
    test_runs = " ".join(by_name["test"].runs())
    assert "-m pytest" in test_runs and re.search(r"\bsrc test\b", test_runs)
    for name, service in compose["services"].items():
        target = service["build"]["target"]
        assert target == stages[-1].name, f"{name} builds {target!r}, not the last stage"
        copies = [args for instruction, args in by_name[target].instructions if instruction == "COPY"]
        assert any(args.startswith("--from=test ") for args in copies), f"{target} does not wait for the test stage"


def test_dds_uses_udp_in_every_service(compose) -> None:
    for name, service in compose["services"].items():
        environment = service["environment"]
        assert environment["FASTDDS_BUILTIN_TRANSPORTS"] == "UDPv4", name
        # under LOCALHOST rmw_fastrtps (jazzy) turns the built-in transports off and adds shared memory
        # itself, and Fast DDS ignores FASTDDS_BUILTIN_TRANSPORTS: UDP only holds on SUBNET
        assert environment["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SUBNET", name
        assert environment["ROS_DOMAIN_ID"] == "${ROS_DOMAIN_ID:-0}", name
        assert service["network_mode"] == "host", name
        assert "ipc" not in service, f"{name}: a shared /dev/shm would bring shared memory back"




def _patterns(path: Path) -> set[str]:
    return {line.strip().rstrip("/") for line in path.read_text().splitlines()
            if line.strip() and not line.startswith("#")}


def test_build_context_leaves_out_local_outputs() -> None:
    # The legacy builder reads only <context>/.dockerignore; a docker/Dockerfile.dockerignore would
    # override it under BuildKit and let the two lists drift apart.
    assert not (ROOT / "docker" / "Dockerfile.dockerignore").exists()
    ignored = _patterns(ROOT / ".dockerignore")
    assert {"runs", ".venv", "install", "build", "log", ".git"} <= ignored
    # every folder git ignores stays out of the image too (git's bare names match at any depth)
    folders = [line.strip().rstrip("/") for line in (ROOT / ".gitignore").read_text().splitlines()
               if line.strip().endswith("/") and not line.startswith(("#", "!"))]
    assert folders
    for folder in folders:
        assert folder in ignored or f"**/{folder}" in ignored, f".gitignore's {folder}/ is not in .dockerignore"


# ------------------------------------------------------------------------------ compose files, cross-checked
def so101_subcommands() -> dict[str, str]:
    """The ``so101`` CLI table (command → module), read in this one place."""
    from so101_apps.cli import SUBCOMMANDS

    return {command.name: command.module for command in SUBCOMMANDS}


def interpolate(text: str) -> str:
    """Compose's interpolation with every variable unset: ``${VAR:-default}`` → default, ``$$`` → ``$``."""
    text = re.sub(r"\$\{(\w+):?-([^}$]*)\}", lambda m: m.group(2), text)
    assert not re.search(r"(?<!\$)\$\{", text.replace("$$", "")), f"{text!r}: a variable without a default"
    return text.replace("$$", "$")


@dataclass(frozen=True)
class Image:
    """What the runtime image holds, read from the Dockerfile."""

    workdir: str
    copies: dict[str, Path]  # file in the image → its source in the repository
    tree: bool  # the repository is copied into workdir (COPY . .)
    ignored: frozenset[str]  # .dockerignore: what the tree copy leaves out
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    apt_packages: frozenset[str]

    def source(self, path: str) -> Path | None:
        """The repository file an absolute image path comes from (None: not in the image)."""
        if path in self.copies:
            return self.copies[path]
        prefix = self.workdir.rstrip("/") + "/"
        if self.tree and path.startswith(prefix):
            relative = path[len(prefix):]
            if relative.split("/")[0] not in self.ignored and (ROOT / relative).exists():
                return ROOT / relative
        return None


def _json_words(args: str) -> tuple[str, ...]:
    words = yaml.safe_load(args)
    assert isinstance(words, list), f"exec form expected, got {args!r}"
    return tuple(str(w) for w in words)


@pytest.fixture(scope="module")
def image(stages) -> Image:
    runtime = {stage.name: stage for stage in stages}
    chain: list[Stage] = []
    stage: Stage | None = stages[-1]
    while stage is not None:  # the final stage and the stages it is built FROM
        chain.insert(0, stage)
        stage = runtime.get(stage.base)
    workdir, tree = "/", False
    copies: dict[str, Path] = {}
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    apt: set[str] = set()
    for stage in chain:
        for instruction, args in stage.instructions:
            if instruction == "WORKDIR":
                workdir = args
            elif instruction == "COPY" and not args.startswith("--from"):
                source, destination = args.split()
                if source == "." and destination in (".", "./"):
                    tree = True
                elif destination.startswith("/"):
                    copies[destination] = ROOT / source
            elif instruction == "ENTRYPOINT":
                entrypoint = _json_words(args)
            elif instruction == "CMD":
                cmd = _json_words(args)
            elif instruction == "RUN":
                for words in shell_commands(args):
                    if words[:2] == ["apt-get", "install"]:
                        apt |= {w for w in words[2:] if not w.startswith("-")}
    return Image(workdir, copies, tree, frozenset(_patterns(ROOT / ".dockerignore")), entrypoint, cmd, frozenset(apt))


@functools.cache
def ray_start_help() -> str:
    ray = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"
    return subprocess.run([ray, "start", "--help"], capture_output=True, text=True, check=True).stdout


class CommandChecker:
    """Checks a container's command line against what the image and the workspace provide."""

    def __init__(self, image: Image, monkeypatch: pytest.MonkeyPatch) -> None:
        self.image = image
        self.monkeypatch = monkeypatch

    def check(self, words: list[str], where: str) -> None:
        assert words, f"{where}: empty command"
        head, args = words[0], words[1:]
        if head.startswith("/"):
            self.check_wrapper(head, args, where)
        elif head == "bash" and args[:1] == ["-c"]:
            self.check_shell(args[1], where)
        elif head == "bash":
            if args:  # bash <script> <command...>
                self.check_wrapper(args[0], args[1:], where)
        elif head == "so101":
            self.check_so101(args, where)
        elif head == "ros2":
            self.check_ros2(args, where)
        elif head == "ray":
            self.check_ray(args, where)
        else:
            raise AssertionError(f"{where}: nothing checks the command {shlex.join(words)!r}")

    def check_wrapper(self, path: str, args: list[str], where: str) -> None:
        """An entry script in the image that runs its own commands, then ``exec "$@"``."""
        script = self.image.source(path)
        assert script is not None and script.is_file(), f"{where}: {path} is not a file of the image"
        text = script.read_text()
        assert 'exec "$@"' in text, f"{where}: {path} does not run the command it is given"
        for line in text.splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] in ("so101", "ros2", "ray"):
                self.check(words, f"{where}: {path}")
        if args:
            self.check(args, where)

    def check_shell(self, script: str, where: str) -> None:
        for package, relative in re.findall(r"/share/(\w+)/([\w./-]+)", script):
            installed = [ROOT / "src" / package / relative, ROOT / "src" / package / package / relative]
            assert any(p.is_file() for p in installed), f"{where}: no file share/{package}/{relative} in the workspace"
        for package in re.findall(r"ros2 pkg prefix (\w+)", script):
            assert (ROOT / "src" / package / "package.xml").is_file(), f"{where}: {package} is not a workspace package"
        program = re.match(r"\s*(?:exec\s+)?([\w.-]+)", script)
        assert program, f"{where}: no program in {script!r}"
        name = program.group(1)
        if name in ("so101", "ros2", "ray"):
            return
        package = f"ros-jazzy-{name.replace('_', '-')}"
        assert package in self.image.apt_packages, f"{where}: {name} is not installed in the image ({package})"

    def check_so101(self, args: list[str], where: str) -> None:
        table = so101_subcommands()
        assert args and args[0] in table, f"{where}: so101 has no command {args[:1]} (its table: {sorted(table)})"
        prog, module_name, options = f"so101 {args[0]}", table[args[0]], args[1:]
        while True:  # a command with steps (so101 fleet STEP ...) hands the step's options to the step's parser
            module = importlib.import_module(module_name)
            parsed = self._parse(module, prog, options, where)
            steps = getattr(module, "STEPS", None)
            if parsed is None or steps is None:
                return
            prog, module_name, options = f"{prog} {parsed.step}", steps[parsed.step][0], parsed.options

    @staticmethod
    def _parse(module: Any, prog: str, options: list[str], where: str) -> argparse.Namespace | None:
        """The options parsed by the module's own parser (None after --help); a bad option fails the test."""
        parser = argparse.ArgumentParser(prog=prog)
        module.add_arguments(parser)
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
                return parser.parse_args(options)
        except SystemExit as exit_info:  # --help exits 0; a bad option exits 2 with its message
            assert exit_info.code == 0, f"{where}: {prog} {shlex.join(options)}: {errors.getvalue().strip()}"
            return None

    def check_ros2(self, args: list[str], where: str) -> None:
        assert args[:1] == ["launch"] and len(args) >= 2, f"{where}: only `ros2 launch FILE ARG:=VALUE` is checked"
        path = args[1] if args[1].startswith("/") else f"{self.image.workdir.rstrip('/')}/{args[1]}"
        launch_file = self.image.source(path)
        assert launch_file is not None and launch_file.is_file(), f"{where}: {args[1]} is not a file of the image"
        fake_launch.install(self.monkeypatch)
        description = runpy.run_path(str(launch_file))["generate_launch_description"]()
        declared = {e.name: e for e in description.entities if isinstance(e, fake_launch.DeclareLaunchArgument)}
        given = dict(arg.split(":=", 1) for arg in args[2:] if ":=" in arg)
        assert len(given) == len(args) - 2, f"{where}: launch arguments must be NAME:=VALUE: {args[2:]}"
        for name, value in given.items():
            assert name in declared, f"{where}: {args[1]} declares no argument {name!r} ({sorted(declared)})"
            choices = declared[name].choices
            assert not choices or value in choices, f"{where}: {name}:={value} is not one of {choices}"
        required = [name for name, e in declared.items() if e.default_value is None and name not in given]
        assert not required, f"{where}: {args[1]} needs {required}"

    def check_ray(self, args: list[str], where: str) -> None:
        assert args[:1] == ["start"], f"{where}: only `ray start` is checked"
        for argument in args[1:]:
            option = argument.split("=")[0]
            assert option.startswith("--") and re.search(rf"{re.escape(option)}\b", ray_start_help()), \
                f"{where}: ray start has no option {option!r}"


def service_command(service: dict[str, Any], image: Image, command: list[str] | None = None) -> list[str]:
    """The container's command line: the entrypoint (the service's or the image's), then the command."""
    def words(value: Any) -> list[str]:
        return shlex.split(value) if isinstance(value, str) else [str(w) for w in value]

    entrypoint = words(service["entrypoint"]) if "entrypoint" in service else list(image.entrypoint)
    if command is None:
        command = words(service["command"]) if "command" in service else list(image.cmd)
    return [interpolate(w) for w in entrypoint + command]


def test_compose_files_share_one_image_scheme(stages) -> None:
    build = yaml.safe_load(COMPOSE.read_text())["x-so101-build"]
    assert (COMPOSE.parent / build["context"]).resolve() == ROOT
    assert (ROOT / build["dockerfile"]).resolve() == DOCKERFILE and build["target"] == stages[-1].name
    tags: list[str] = []
    for path in COMPOSE_FILES:
        for name, service in yaml.safe_load(path.read_text())["services"].items():
            # each service builds its own tag of the one image (compose builds per service: docker/compose#7343)
            assert service["image"] == IMAGE_TAG.format(service=name), f"{path.name}: {name}: {service['image']}"
            assert service["build"] == build, f"{path.name}: {name} builds {service['build']}"
            tags.append(service["image"])
    assert len(tags) == len(set(tags)), f"one tag for two services: {tags}"


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda p: p.name)
def test_compose_services_run_what_the_image_holds(path: Path, image: Image, monkeypatch) -> None:
    checker = CommandChecker(image, monkeypatch)
    for name, service in yaml.safe_load(path.read_text())["services"].items():
        checker.check(service_command(service, image), f"{path.name}: {name}")


def documented_compose_commands() -> list[tuple[str, list[str]]]:
    """``docker compose`` commands shown in the compose files' comments and in docker/README.md."""
    texts = [(p.name, "\n".join(line.lstrip("#") for line in p.read_text().splitlines() if line.startswith("#")))
             for p in COMPOSE_FILES]
    texts.append(("docker/README.md", (ROOT / "docker" / "README.md").read_text()))
    commands = []
    for where, text in texts:
        for line in re.sub(r"\\\n\s*", " ", text).splitlines():
            if line.strip().startswith("docker compose"):
                commands.append((where, shlex.split(line, comments=True)))
    return commands


def test_documented_compose_commands_name_what_exists(image: Image, monkeypatch) -> None:
    checker = CommandChecker(image, monkeypatch)
    commands = documented_compose_commands()
    assert {where for where, _ in commands} == {*(p.name for p in COMPOSE_FILES), "docker/README.md"}
    for where, words in commands:
        where = f"{where}: {shlex.join(words)}"
        rest = words[2:]
        files: list[str] = []
        profiles: list[str] = []
        while rest and rest[0] in ("-f", "--profile"):
            (files if rest.pop(0) == "-f" else profiles).append(rest.pop(0))
        assert len(files) == 1 and (ROOT / files[0]).is_file(), f"{where}: which compose file?"
        services = yaml.safe_load((ROOT / files[0]).read_text())["services"]
        for profile in profiles:
            assert any(profile in s.get("profiles", ()) for s in services.values()), f"{where}: no profile {profile}"
        subcommand = rest.pop(0)
        if subcommand == "run":
            while rest[0].startswith("-"):
                assert rest.pop(0) == "--rm", where
            name = rest.pop(0)
            assert name in services, f"{where}: no service {name}"
            if rest:
                checker.check(service_command(services[name], image, rest), where)
        else:
            assert subcommand in ("build", "up", "down"), f"{where}: {subcommand} is not checked"
            while rest and rest[0].startswith("-"):
                option = rest.pop(0)
                if option == "--scale":
                    assert rest.pop(0).split("=")[0] in services, where
                else:
                    assert option == "-d", f"{where}: {option} is not checked"
            assert set(rest) <= set(services), f"{where}: no service(s) {sorted(set(rest) - set(services))}"



@pytest.mark.parametrize(("words", "message"), [
    (["so101", "fleet", "proces", "x"], "invalid choice"),
    (["so101", "fleet", "process", "/data/c.parquet", "--sim", "mujoco", "--out", "/d", "--ray-adress", "auto"],
     "unrecognized arguments"),
    (["so101", "flet"], "so101 has no command"),
    (["ros2", "launch", "launch/robot.launch.py", "hardware:=sim"], "is not one of"),
    (["ros2", "launch", "launch/robot.launch.py", "hardwre:=real"], "declares no argument"),
    (["ray", "start", "--adress=ray-head:6379"], "no option '--adress'"),
    (["/entrypoint.sh", "bash", "/ws/docker/no_such.sh", "so101", "bench"], "is not a file of the image"),
    (["/ws/build/x.sh"], "is not a file of the image"),  # build/ is left out of the image (.dockerignore)
    (["bash", "-c", "exec rviz3 -d x"], "rviz3 is not installed"),
    (["python", "-m", "x"], "nothing checks"),
])
def test_the_cross_check_rejects_what_does_not_exist(words, message, image, monkeypatch) -> None:
    with pytest.raises(AssertionError, match=re.escape(message)):
        CommandChecker(image, monkeypatch).check(words, "test")
