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
    assert INSTALL_HINT == "pip install 'ranking-service[openvino]'"


def test_the_default_runtime_is_installed() -> None:
    assert optional.available("onnx") and optional.require("onnx").__name__ == "onnxruntime"
