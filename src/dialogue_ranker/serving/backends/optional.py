"""The runtimes a backend may need and which install brings each: one table.

A backend imports its runtime through :func:`require`, so a missing package is a
:class:`BackendUnavailable` that says what to install, never a bare ``ImportError``; ``--backend
auto`` asks :func:`available` before it measures a runtime. A new runtime is a row here (and its
extra in ``pyproject.toml``, which a test checks).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from types import ModuleType

from dialogue_ranker.serving.errors import BackendUnavailable

#: The distribution the extras belong to (``pip install 'ranking-service[EXTRA]'``).
DISTRIBUTION = "ranking-service"


@dataclass(frozen=True)
class Runtime:
    """A package a backend imports, and the extra that installs it (None: a dependency)."""

    backend: str
    module: str
    extra: str | None
    #: Where a dependency is installed, when only on some platforms (those its wheels exist for).
    platforms: str | None = None

    @property
    def install_hint(self) -> str:
        """What to run to get the package."""
        if self.extra is None and self.platforms is not None:
            return (
                f"{DISTRIBUTION} installs {self.module} where it publishes a wheel ({self.platforms}); "
                f"elsewhere the service goes without: pip install {self.module} where it can"
            )
        if self.extra is None:
            return f"reinstall {DISTRIBUTION}: {self.module} is one of its dependencies"
        return f"pip install '{DISTRIBUTION}[{self.extra}]'"


#: Backend name -> the runtime package it needs. ONNX Runtime, the default, is a dependency, and so
#: is OpenVINO wherever it has a wheel (pyproject.toml's marker lists the same platforms).
RUNTIMES: dict[str, Runtime] = {
    "onnx": Runtime("onnx", "onnxruntime", None),
    "openvino": Runtime(
        "openvino", "openvino", None, platforms="Linux x86-64 and arm64, Windows x86-64, macOS arm64"
    ),
    "triton": Runtime("triton", "tritonclient.grpc", None),
}


def available(backend: str) -> bool:
    """True when the package ``backend`` needs is installed (it is not imported)."""
    module = RUNTIMES[backend].module
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a submodule's parent package is missing
        return False


def require(backend: str) -> ModuleType:
    """The runtime package of ``backend``, imported.

    Raises:
        BackendUnavailable: it is not installed (the message says which extra installs it).
    """
    runtime = RUNTIMES[backend]
    try:
        return importlib.import_module(runtime.module)
    except ImportError as e:
        raise BackendUnavailable(
            f"the {backend} backend needs the {runtime.module} package ({runtime.install_hint})"
        ) from e
