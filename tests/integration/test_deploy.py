"""The Kubernetes manifests in ``deploy/``: rendered by kustomize, checked against the service itself.

Each overlay is rendered once with the real ``kubectl kustomize``. Built-in kinds are validated
offline against the Kubernetes JSON schemas that ``kubernetes_validate`` ships (strict: an unknown
field fails); the Prometheus Operator's ServiceMonitor and PrometheusRule are CRDs without a schema
there, so their required structure is checked here. Settings names come from the ``Settings``
class, never from a copied list. The dashboard's and alerts' queries: ``test_dashboard_queries.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import kubernetes_validate
import pytest
from manifests import DEPLOY, LOADERS, OVERLAYS, Manifest, one, render, render_overlays, settings_from
from pydantic import BaseModel

from dialogue_ranker.serving.cpu import available_cpus, batch_workers, intra_op_threads
from dialogue_ranker.serving.guidelines import Guidelines
from dialogue_ranker.serving.settings import DEFAULT_GUIDELINES, REPO_ROOT, Settings

pytestmark = pytest.mark.integration

# The oldest Kubernetes the manifests target: the preStop sleep action is on by default from 1.30.
# They are also validated against the newest schemas the package ships, to catch removed APIs.
OLDEST_KUBERNETES = "1.30.0"
CRD_KINDS = {"ServiceMonitor", "PrometheusRule"}
DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[Manifest]]:
    return render_overlays()


def _gateway(manifests: list[Manifest]) -> Manifest:
    return one(manifests, "Deployment", "ranking-service")


def _container(deployment: Manifest) -> Manifest:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def _port_number(container: Manifest, port: int | str) -> int:
    if isinstance(port, int):
        return port
    numbers = [p["containerPort"] for p in container["ports"] if p["name"] == port]
    assert len(numbers) == 1, f"container {container['name']} has no port named {port!r}"
    return numbers[0]


def _settings_env(manifests: list[Manifest]) -> dict[str, str]:
    return one(manifests, "ConfigMap", "ranking-service-settings")["data"]


def _env_names(model: type[BaseModel], prefix: str, delimiter: str) -> set[str]:
    """Every leaf field's environment variable, nested groups joined by the delimiter."""
    names: set[str] = set()
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            names |= _env_names(annotation, f"{prefix}{name}{delimiter}", delimiter)
        else:
            names.add(f"{prefix}{name}".upper())
    return names


def _cpu_cores(quantity: str | int) -> float:
    text = str(quantity)
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


# --- rendering and schemas ---------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_renders_with_kubectl_kustomize(
    rendered: dict[str, list[Manifest]], overlay: str
) -> None:
    kinds = {m["kind"] for m in rendered[overlay]}
    assert {"Deployment", "Service", "ConfigMap", "HorizontalPodAutoscaler", "PodDisruptionBudget"} <= kinds
    assert {"ServiceMonitor", "PrometheusRule", "NetworkPolicy"} <= kinds


def test_the_repository_loader_renders() -> None:
    (pod,) = render(DEPLOY / "overlays" / "gpu" / "loader")
    assert pod["kind"] == "Pod" and pod["metadata"]["namespace"] == "ranking"


@pytest.mark.parametrize("version", [OLDEST_KUBERNETES, kubernetes_validate.latest_version()])
def test_every_built_in_object_validates_strictly_against_the_kubernetes_schemas(
    rendered: dict[str, list[Manifest]], version: str
) -> None:
    loaders = [m for directory in LOADERS for m in render(directory)]
    objects = [m for ms in rendered.values() for m in ms] + loaders
    built_in = [m for m in objects if m["kind"] not in CRD_KINDS]
    assert len(built_in) >= 20
    for manifest in built_in:
        try:
            kubernetes_validate.validate(manifest, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            where = ".".join(str(p) for p in e.path)
            pytest.fail(f"{manifest['kind']}/{manifest['metadata']['name']}: {where}: {e.message}")


def test_service_monitors_select_a_rendered_service_and_scrape_a_named_port(
    rendered: dict[str, list[Manifest]],
) -> None:
    for manifests in rendered.values():
        services = [m for m in manifests if m["kind"] == "Service"]
        monitors = [m for m in manifests if m["kind"] == "ServiceMonitor"]
        assert monitors
        for monitor in monitors:
            assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
            spec = monitor["spec"]
            wanted = spec["selector"]["matchLabels"]
            assert wanted, "an empty selector would scrape every Service"
            (service,) = [s for s in services if wanted.items() <= s["metadata"]["labels"].items()]
            port_names = {p["name"] for p in service["spec"]["ports"]}
            assert spec["endpoints"]
            for endpoint in spec["endpoints"]:
                assert endpoint["port"] in port_names
                assert endpoint.get("path", "/metrics").startswith("/")
                assert DURATION.match(endpoint["interval"])


def test_prometheus_rules_have_the_structure_the_operator_requires(
    rendered: dict[str, list[Manifest]],
) -> None:
    rules = [m for ms in rendered.values() for m in ms if m["kind"] == "PrometheusRule"]
    assert rules
    for rule in rules:
        assert rule["apiVersion"] == "monitoring.coreos.com/v1"
        assert rule["spec"]["groups"] and all(g["name"] and g["rules"] for g in rule["spec"]["groups"])
    for entry in (r for rule in rules for g in rule["spec"]["groups"] for r in g["rules"]):
        assert ("alert" in entry) != ("record" in entry)
        assert isinstance(entry["expr"], str) and entry["expr"].count("(") == entry["expr"].count(")")
        assert DURATION.match(entry.get("for", "0s"))
        assert entry["labels"]["severity"] in {"critical", "warning", "info"}
        assert entry["annotations"]["summary"] and entry["annotations"]["description"]


# --- the gateway against the service -----------------------------------------------------------


def test_every_ranker_variable_in_the_config_maps_is_a_settings_field(
    rendered: dict[str, list[Manifest]],
) -> None:
    config = Settings.model_config
    valid = _env_names(Settings, str(config["env_prefix"]), str(config["env_nested_delimiter"]))
    assert {"RANKER_PORT", "RANKER_BATCHING__MAX_PAIRS", "RANKER_ONNX__INTRA_OP_THREADS"} <= valid
    for manifests in rendered.values():
        for config_map in (m for m in manifests if m["kind"] == "ConfigMap"):
            names = {n for n in config_map.get("data", {}) if n.upper().startswith("RANKER_")}
            # Settings ignores unknown variables (extra="ignore"), so a typo would pass silently.
            assert names <= valid, f"{config_map['metadata']['name']}: not settings: {names - valid}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_settings_config_map_is_accepted_by_settings(
    rendered: dict[str, list[Manifest]], overlay: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_from(_settings_env(rendered[overlay]), monkeypatch)
    assert settings.backend == {"cpu": "auto", "gpu": "triton"}[overlay]
    assert settings.host == "0.0.0.0"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_point_at_healthz_and_readyz_on_the_port_the_service_listens_on(
    rendered: dict[str, list[Manifest]], overlay: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifests = rendered[overlay]
    container = _container(_gateway(manifests))
    port = settings_from(_settings_env(manifests), monkeypatch).port
    probes = {
        kind: container[kind]["httpGet"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    assert {kind: probe["path"] for kind, probe in probes.items()} == {
        "startupProbe": "/healthz",
        "livenessProbe": "/healthz",
        "readinessProbe": "/readyz",
    }
    assert {_port_number(container, probe["port"]) for probe in probes.values()} == {port}
    service = one(manifests, "Service", "ranking-service")
    assert [_port_number(container, p["targetPort"]) for p in service["spec"]["ports"]] == [port]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_pod_drains_before_sigterm_and_finishes_requests_within_the_grace_period(
    rendered: dict[str, list[Manifest]], overlay: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifests = rendered[overlay]
    pod = _gateway(manifests)["spec"]["template"]["spec"]
    pre_stop_s = _container(_gateway(manifests))["lifecycle"]["preStop"]["sleep"]["seconds"]
    settings = settings_from(_settings_env(manifests), monkeypatch)
    assert pre_stop_s >= 5
    # A request in flight at SIGTERM may run its whole timeout; the shutdown must wait that long.
    assert settings.shutdown_timeout_s >= settings.limits.request_timeout_s
    assert pod["terminationGracePeriodSeconds"] > pre_stop_s + settings.shutdown_timeout_s


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_gateway_runs_as_the_image_user_on_a_read_only_root_filesystem(
    rendered: dict[str, list[Manifest]], overlay: str
) -> None:
    pod = _gateway(rendered[overlay])["spec"]["template"]["spec"]
    container = _container(_gateway(rendered[overlay]))
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert "/tmp" in {m["mountPath"] for m in container["volumeMounts"]}


def test_the_pod_user_model_and_port_are_those_the_dockerfile_declares(
    rendered: dict[str, list[Manifest]],
) -> None:
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    (user,) = re.findall(r"^USER\s+(\d+)", dockerfile, flags=re.MULTILINE)
    (model,) = re.findall(r"\bRANKER_MODEL=(\S+)", dockerfile)
    (exposed,) = re.findall(r"^EXPOSE\s+(\d+)", dockerfile, flags=re.MULTILINE)
    for manifests in rendered.values():
        assert _gateway(manifests)["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == int(user)
        env = _settings_env(manifests)
        assert env["RANKER_MODEL"] == model and env["RANKER_PORT"] == exposed


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_guidelines_config_map_is_mounted_where_ranker_guidelines_points(
    rendered: dict[str, list[Manifest]], overlay: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifests = rendered[overlay]
    settings = settings_from(_settings_env(manifests), monkeypatch)
    config_map = one(manifests, "ConfigMap", "ranking-service-guidelines")
    pod = _gateway(manifests)["spec"]["template"]["spec"]
    (volume,) = [
        v for v in pod["volumes"] if v.get("configMap", {}).get("name") == config_map["metadata"]["name"]
    ]
    (mount,) = [m for m in _container(_gateway(manifests))["volumeMounts"] if m["name"] == volume["name"]]
    (key,) = config_map["data"]
    assert settings.guidelines == Path(mount["mountPath"]) / key
    shipped = Guidelines.from_file(DEFAULT_GUIDELINES)
    assert Guidelines.from_mapping(json.loads(config_map["data"][key])).allowed == shipped.allowed


def test_onnx_runtime_threads_follow_the_cpu_overlays_whole_core_limit(
    rendered: dict[str, list[Manifest]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The overlay pins no thread count: the service sizes them from the pod's CPU limit (cgroup)."""
    manifests = rendered["cpu"]
    resources = _container(_gateway(manifests))["resources"]
    cores = _cpu_cores(resources["requests"]["cpu"])
    assert cores == int(cores) and _cpu_cores(resources["limits"]["cpu"]) == cores
    settings = settings_from(_settings_env(manifests), monkeypatch)
    onnx, workers = settings.onnx, settings.batching.workers
    assert (onnx.intra_op_threads, onnx.solo_threads, workers, onnx.inter_op_threads) == (0, 0, 0, 1)
    # The kubelet writes the limit to the pod's cgroup as cpu.max: quota and period in microseconds.
    (tmp_path / "cpu.max").write_text(f"{int(cores * 100_000)} 100000\n")
    cpus = available_cpus(tmp_path)
    assert cpus == min(int(cores), available_cpus(tmp_path / "absent"))
    assert batch_workers(workers, tmp_path) == 2 * cpus and intra_op_threads(workers, tmp_path) == 1


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_autoscaler_and_disruption_budget_target_the_gateway(
    rendered: dict[str, list[Manifest]], overlay: str
) -> None:
    manifests = rendered[overlay]
    gateway = _gateway(manifests)
    hpa = one(manifests, "HorizontalPodAutoscaler", "ranking-service")["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "ranking-service"}
    assert hpa["minReplicas"] >= 2
    assert [m["resource"]["name"] for m in hpa["metrics"]] == ["cpu"]
    # The autoscaler owns the replica count; a value in the Deployment would reset it on apply.
    assert "replicas" not in gateway["spec"]
    pdb = one(manifests, "PodDisruptionBudget", "ranking-service")["spec"]
    assert pdb["selector"] == gateway["spec"]["selector"]


# --- Triton ------------------------------------------------------------------------------------


def test_triton_runs_the_documented_image_on_one_gpu_with_a_startup_window_for_engine_builds(
    rendered: dict[str, list[Manifest]],
) -> None:
    triton = _container(one(rendered["gpu"], "Deployment", "ranking-triton"))
    guide = (REPO_ROOT / "docs" / "guides" / "triton.md").read_text()
    (documented_image,) = set(re.findall(r"nvcr\.io/nvidia/tritonserver:\d+\.\d+-py3", guide))
    assert triton["image"] == documented_image
    assert str(triton["resources"]["limits"]["nvidia.com/gpu"]) == "1"
    http = _port_number(triton, "http")
    for kind in ("startupProbe", "readinessProbe"):
        probe = triton[kind]
        assert probe["httpGet"]["path"] == "/v2/health/ready"
        assert _port_number(triton, probe["httpGet"]["port"]) == http == 8000
    startup = triton["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 30 * 60


def test_the_gateway_reaches_triton_grpc_through_its_service_and_network_policy(
    rendered: dict[str, list[Manifest]], monkeypatch: pytest.MonkeyPatch
) -> None:
    manifests = rendered["gpu"]
    host, port = settings_from(_settings_env(manifests), monkeypatch).triton.url.rsplit(":", 1)
    service = one(manifests, "Service", "ranking-triton")
    assert service["metadata"]["name"] == host
    (grpc,) = [p for p in service["spec"]["ports"] if p["port"] == int(port)]
    deployment = one(manifests, "Deployment", "ranking-triton")
    container_port = _port_number(_container(deployment), grpc["targetPort"])
    triton_labels = deployment["spec"]["template"]["metadata"]["labels"]
    gateway_labels = _gateway(manifests)["spec"]["template"]["metadata"]["labels"]

    allowed_out = set()
    allowed_in = set()
    for policy in (m["spec"] for m in manifests if m["kind"] == "NetworkPolicy"):
        selected = policy["podSelector"]["matchLabels"].items()
        for rule in policy.get("egress", []) if selected <= gateway_labels.items() else []:
            if any(peer.get("podSelector", {}).get("matchLabels", {}).items() <= triton_labels.items()
                   and "namespaceSelector" not in peer for peer in rule["to"]):  # fmt: skip
                allowed_out |= {p["port"] for p in rule["ports"]}
        for rule in policy.get("ingress", []) if selected <= triton_labels.items() else []:
            if any(peer.get("podSelector", {}).get("matchLabels", {}).items() <= gateway_labels.items()
                   and "namespaceSelector" not in peer for peer in rule["from"]):  # fmt: skip
                allowed_in |= {p["port"] for p in rule["ports"]}
    assert container_port in allowed_out and container_port in allowed_in
