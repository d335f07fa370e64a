"""The optional runtimes table: each row's extra exists in pyproject.toml and installs its package."""

from __future__ import annotations

import tomllib

import pytest
from helpers import REPO_ROOT

from dialogue_ranker.serving.backends import optional
from dialogue_ranker.serving.backends.openvino import INSTALL_HINT
from dialogue_ranker.serving.errors import BackendUnavailable


def test_every_runtimes_extra_is_declared_and_names_its_package() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    core = " ".join(project["dependencies"])
    for runtime in optional.RUNTIMES.values():
        package = runtime.module.split(".")[0]
        if runtime.extra is None:
            assert package in core, f"{package} is neither a dependency nor behind an extra"
        else:
            assert any(req.startswith(package) for req in extras[runtime.extra]), (runtime, extras)


def test_a_missing_runtime_is_backend_unavailable_naming_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = optional.Runtime("openvino", "surely_not_an_installed_package", "openvino")
    monkeypatch.setitem(optional.RUNTIMES, "openvino", missing)
    assert not optional.available("openvino")
    with pytest.raises(BackendUnavailable, match=r"pip install 'ranking-service\[openvino\]'"):
        optional.require("openvino")


def test_openvino_is_a_dependency_where_it_has_a_wheel_and_the_hint_says_where() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    (requirement,) = [r for r in project["dependencies"] if r.startswith("openvino")]
    marker = requirement.split(";", 1)[1]
    wheels = (("linux", "x86_64"), ("linux", "aarch64"), ("win32", "AMD64"), ("darwin", "arm64"))
    for system, machine in wheels:
        assert f"sys_platform == '{system}'" in marker and f"platform_machine == '{machine}'" in marker
    assert "wheel (Linux x86-64 and arm64, Windows x86-64, macOS arm64)" in INSTALL_HINT


def test_the_default_runtime_is_installed() -> None:
    assert optional.available("onnx") and optional.require("onnx").__name__ == "onnxruntime"
