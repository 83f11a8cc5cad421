"""docker/ cannot be built here (no engine), so check the properties a first build depends on by reading
the Dockerfile, the compose file and the build-context filter, and run the image's shebang check."""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "docker" / "Dockerfile"
COMPOSE = ROOT / "docker" / "compose.yaml"
CHECK_SHEBANGS = ROOT / "docker" / "check_shebangs.sh"


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
        assert environment["ROS_DOMAIN_ID"] == "${ROS_DOMAIN_ID:-0}", name
        assert service["network_mode"] == "host", name


def test_services_that_build_have_their_own_tags(compose) -> None:
    tags = [service["image"] for service in compose["services"].values() if "build" in service]
    assert len(tags) == len(set(tags)), f"services building one tag: {tags}"


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
