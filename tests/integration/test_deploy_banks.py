"""Banks in the Kubernetes manifests: small ones from a ConfigMap, large ones on a volume a Job fills.

Rendered by ``kubectl kustomize`` as in ``test_deploy.py`` (which also validates every object,
the Job, the volume claim and the bank loader included, against the Kubernetes schemas). Paths are
read from the settings the pods get, never from a copied list, and checked against the pod's mounts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath

import pytest
from manifests import DEPLOY, OVERLAYS, Manifest, one, render, render_overlays, settings_from

from dialogue_ranker.cli import COMMANDS
from dialogue_ranker.serving.api.health import readyz
from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.banks import read_bank
from dialogue_ranker.serving.settings import REPO_ROOT, Settings

pytestmark = pytest.mark.integration

BANK_CLAIM = "ranking-service-banks"
JOB = "ranking-service-bank-cache"


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[Manifest]]:
    return render_overlays()


def _pod(workload: Manifest) -> Manifest:
    return workload["spec"]["template"]["spec"]


def _container(workload: Manifest) -> Manifest:
    (container,) = _pod(workload)["containers"]
    return container


def _settings(manifests: list[Manifest], monkeypatch: pytest.MonkeyPatch) -> Settings:
    return settings_from(one(manifests, "ConfigMap", "ranking-service-settings")["data"], monkeypatch)


def _mounts(workload: Manifest) -> dict[PurePosixPath, tuple[Manifest, bool]]:
    """Each mount path of the container: its volume and whether the container may write there."""
    volumes = {volume["name"]: volume for volume in _pod(workload)["volumes"]}
    mounts = {}
    for mount in _container(workload)["volumeMounts"]:
        volume = volumes[mount["name"]]
        claim = volume.get("persistentVolumeClaim", {})
        # A ConfigMap volume is read-only whatever the mount says.
        read_only = mount.get("readOnly", False) or claim.get("readOnly", False) or "configMap" in volume
        mounts[PurePosixPath(mount["mountPath"])] = (volume, not read_only)
    return mounts


def _mount_of(path: Path, mounts: dict[PurePosixPath, tuple[Manifest, bool]]) -> tuple[Manifest, bool]:
    """The volume a path of the container lies on (the deepest mount above it)."""
    above = [where for where in mounts if PurePosixPath(path).is_relative_to(where)]
    assert above, f"{path} is on no mounted volume (the read-only root filesystem)"
    return mounts[max(above, key=lambda where: len(where.parts))]


def _claim(volume: Manifest) -> str | None:
    return volume.get("persistentVolumeClaim", {}).get("claimName")


def _source(volume: Manifest) -> tuple[str, str]:
    """What a volume is: a claim or a ConfigMap by name, else its kind."""
    if "persistentVolumeClaim" in volume:
        return "claim", volume["persistentVolumeClaim"]["claimName"]
    if "configMap" in volume:
        return "configMap", volume["configMap"]["name"]
    return next(key for key in volume if key != "name"), ""


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_renders_the_bank_volume_the_small_banks_and_the_cache_job(
    rendered: dict[str, list[Manifest]], overlay: str
) -> None:
    manifests = rendered[overlay]
    claim = one(manifests, "PersistentVolumeClaim", BANK_CLAIM)
    # The Job writes and every replica, on any node, reads.
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert one(manifests, "ConfigMap", "ranking-service-banks")["data"]
    job = one(manifests, "Job", JOB)
    assert _pod(job)["restartPolicy"] == "Never" and job["metadata"]["namespace"] == "ranking"
    policy = one(manifests, "NetworkPolicy", JOB)["spec"]
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    assert (policy["policyTypes"], policy["ingress"], policy["egress"]) == (["Ingress", "Egress"], [], [])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_gateway_reads_its_banks_and_their_cache_from_read_only_mounts(
    rendered: dict[str, list[Manifest]], overlay: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifests = rendered[overlay]
    settings = _settings(manifests, monkeypatch)
    mounts = _mounts(one(manifests, "Deployment", "ranking-service"))
    assert settings.served_banks() and settings.banks.cache_dir is not None
    cache_volume, writable = _mount_of(settings.banks.cache_dir, mounts)
    assert _claim(cache_volume) == BANK_CLAIM and not writable
    config_map = one(manifests, "ConfigMap", "ranking-service-banks")
    for name, path in settings.served_banks():
        volume, writable = _mount_of(path, mounts)
        assert not writable, f"bank {name}: {path} is on a writable mount"
        if "configMap" in volume:
            assert volume["configMap"]["name"] == config_map["metadata"]["name"]
            assert path.name in config_map["data"], f"bank {name}: {path.name} is not in the ConfigMap"
        else:
            assert _claim(volume) == BANK_CLAIM


def test_the_shipped_example_bank_is_a_bank_the_service_reads(
    rendered: dict[str, list[Manifest]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    manifests = rendered["cpu"]
    settings = _settings(manifests, monkeypatch)
    data = one(manifests, "ConfigMap", "ranking-service-banks")["data"]
    for name, path in settings.served_banks():
        (tmp_path / path.name).write_text(data[path.name])
        bank = read_bank(name, tmp_path / path.name, max_text_chars=settings.limits.max_text_chars)
        assert bank.size >= 3


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_readiness_probe_is_the_route_that_waits_for_every_bank(
    rendered: dict[str, list[Manifest]], overlay: str
) -> None:
    """The probe's path is served by ``readyz``, 503 while a bank embeds (``test_bank_api.py``)."""
    container = _container(one(rendered[overlay], "Deployment", "ranking-service"))
    path = container["readinessProbe"]["httpGet"]["path"]
    assert create_app(Settings()).url_path_for(readyz.__name__) == path
    # Banks embed after the server listens: a cold bank keeps the pod unready, never restarts it.
    assert container["startupProbe"]["httpGet"]["path"] == container["livenessProbe"]["httpGet"]["path"]
    assert container["startupProbe"]["httpGet"]["path"] != path


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_job_runs_bank_cache_with_the_gateways_image_settings_and_mounts(
    rendered: dict[str, list[Manifest]], overlay: str
) -> None:
    manifests = rendered[overlay]
    gateway, job = one(manifests, "Deployment", "ranking-service"), one(manifests, "Job", JOB)
    serve, embed = _container(gateway), _container(job)
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    (entrypoint,) = re.findall(r"^ENTRYPOINT\s+(\[.*\])$", dockerfile, flags=re.MULTILINE)
    # The image's own `ranker` entry point, the bank-cache subcommand, from the package the image holds.
    assert embed["command"] == [json.loads(entrypoint)[0], "bank-cache"] and "args" not in embed
    assert COMMANDS["bank-cache"].module.startswith("dialogue_ranker.serving.")
    assert embed["image"] == serve["image"]
    # The same settings ConfigMap and nothing on top of it: the same model, banks and cache directory.
    assert embed["envFrom"] == serve["envFrom"] and "env" not in embed and "env" not in serve
    assert _pod(job)["securityContext"]["runAsUser"] == _pod(gateway)["securityContext"]["runAsUser"]
    config_map = one(manifests, "ConfigMap", "ranking-service-banks")["metadata"]["name"]
    sources = {("claim", BANK_CLAIM), ("configMap", config_map)}
    embed_mounts = _mounts(job)
    bank_mounts = [
        (where, volume, writable)
        for where, (volume, writable) in _mounts(gateway).items()
        if _source(volume) in sources
    ]
    assert {_source(volume) for _, volume, _ in bank_mounts} == sources
    for where, volume, writable in bank_mounts:
        job_volume, job_writable = embed_mounts[where]
        assert _source(job_volume) == _source(volume)
        # The replicas read the bank volume; only the Job writes it.
        assert not writable and job_writable == (_source(volume) == ("claim", BANK_CLAIM))


def test_the_bank_loader_runs_the_gateways_image_with_the_bank_volume_writable(
    rendered: dict[str, list[Manifest]],
) -> None:
    (pod,) = render(DEPLOY / "components" / "bank-volume" / "loader")
    assert pod["kind"] == "Pod" and pod["metadata"]["namespace"] == "ranking"
    gateway = one(rendered["cpu"], "Deployment", "ranking-service")
    assert pod["spec"]["containers"][0]["image"] == _container(gateway)["image"]
    assert pod["spec"]["securityContext"]["runAsUser"] == _pod(gateway)["securityContext"]["runAsUser"]
    (volume,) = [v for v in pod["spec"]["volumes"] if _claim(v) == BANK_CLAIM]
    assert not volume["persistentVolumeClaim"].get("readOnly", False)
    (mount,) = [m for m in pod["spec"]["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
    assert not mount.get("readOnly", False)
