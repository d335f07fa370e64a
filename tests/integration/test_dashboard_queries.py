"""The Grafana dashboard's and the alerts' PromQL against the metrics the service really exports.

Metric names and label names come from the registry ``service/metrics.py`` builds (as
``create_app`` builds it), never from a copied list; the expressions from the dashboard JSON and
the rendered PrometheusRule.
"""

from __future__ import annotations

import json
import re

import pytest
from manifests import DASHBOARD, Manifest, one, render_overlays
from prometheus_client.metrics import MetricWrapperBase

from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.settings import Settings

pytestmark = pytest.mark.integration

#: Labels Prometheus adds when it scrapes a target, on top of the service's own.
SCRAPE_LABELS = {"job", "namespace", "pod", "instance", "service", "container", "endpoint"}


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[Manifest]]:
    return render_overlays()


_PROMQL_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GRAFANA_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+")
_LABEL_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_OFFSET = re.compile(r"\boffset\s+-?\w+")
_TOKEN = re.compile(
    r"(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)|(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?P<call>\s*\()?"
)
_KEYWORDS = {"and", "or", "unless", "bool", "group_left", "group_right", "atan2", "inf", "nan"}


def promql_metric_names(expr: str) -> set[str]:
    """The metric names an expression selects: what is left once functions, aggregations, label
    matchers, grouping clauses, ranges, offsets, numbers, strings and keywords are taken out."""
    text = _PROMQL_STRING.sub('""', expr)
    text = _GRAFANA_VARIABLE.sub("0", text)
    for pattern in (_LABEL_MATCHERS, _RANGE, _GROUPING, _OFFSET):
        text = pattern.sub(" ", text)
    names = set()
    for token in _TOKEN.finditer(text):
        name = token["name"]
        if name and not token["call"] and name.lower() not in _KEYWORDS:
            names.add(name)
    return names


def _exported_sample_names() -> set[str]:
    """Every sample name the app's registry exposes, suffixes included.

    A labelled metric exposes no sample until a label value is used, so each one gets a
    placeholder value for every label first (its samples then show the suffixes prometheus_client
    writes: ``_bucket``/``_sum``/``_count``/``_created``, ``_total``, ``_info``).
    """
    metrics = Metrics(generators=Settings().ranking.generators)  # as create_app builds it
    for metric in vars(metrics).values():
        if isinstance(metric, MetricWrapperBase) and metric._labelnames:
            metric.labels(*("x" for _ in metric._labelnames))
    return {sample.name for family in metrics.registry.collect() for sample in family.samples}


def _label_names() -> dict[str, set[str]]:
    """Label names by sample name, for every metric object the app's ``Metrics`` holds."""
    labels: dict[str, set[str]] = {}
    for metric in vars(Metrics(generators=Settings().ranking.generators)).values():
        if isinstance(metric, MetricWrapperBase):
            # prometheus_client keeps a metric's declared label names only on this attribute.
            own = set(metric._labelnames)
            for suffix in ("", "_total", "_bucket", "_sum", "_count", "_created", "_info"):
                labels[metric._name + suffix] = own | ({"le"} if suffix == "_bucket" else set())
    return labels


_SELECTOR = re.compile(r"(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)\{(?P<matchers>[^{}]*)\}")
_MATCHER_LABEL = re.compile(r"(?P<label>[A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")


def _dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        query = query.get("query") if isinstance(query, dict) else None
        if query and (inner := re.fullmatch(r"label_values\((.*),\s*\w+\)", query.strip(), flags=re.S)):
            exprs.append(inner[1])
    return exprs


def test_the_promql_name_extractor_keeps_metrics_and_drops_everything_else() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (namespace, le) (rate(a_bucket{job="x", status=~"5.."}[5m])))'
        " / on (namespace) group_left sum without (pod) (b_total offset 1h) > 1e-3"
        ' and absent(c_info{le="0.5"}) or d_sum[$__rate_interval:1m] unless bool e'
    )
    assert promql_metric_names(expr) == {"a_bucket", "b_total", "c_info", "d_sum", "e"}


def test_the_exported_names_carry_the_exposition_suffixes() -> None:
    names = _exported_sample_names()
    assert {
        "ranker_request_duration_seconds_bucket",
        "ranker_request_duration_seconds_count",
        "ranker_errors_total",
        "ranker_queue_sequences",
        "ranker_model_info",
    } <= names
    assert "ranker_errors" not in names and "ranker_request_duration_seconds" not in names


def test_dashboard_and_alert_queries_name_only_metrics_the_service_exports(
    rendered: dict[str, list[Manifest]],
) -> None:
    exported = _exported_sample_names()
    rule = one(rendered["cpu"], "PrometheusRule", "ranking-service")
    alerts = [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]
    exprs = _dashboard_expressions() + alerts
    assert len(exprs) > 20
    for expr in exprs:
        names = promql_metric_names(expr)
        assert names, f"no metric found in {expr!r}"
        assert names <= exported, f"not exported: {sorted(names - exported)} in {expr!r}"


# Topic -> (metric, pattern the expression must also match).
REQUIRED_PANEL_TOPICS = {
    "requests per second": ("ranker_request_duration_seconds_count", r"\brate\("),
    "ranked requests per second": ("ranker_request_candidates_count", r"\brate\("),
    "candidates per second": ("ranker_batch_candidates_sum", r"\brate\("),
    "sequences per second": ("ranker_batch_sequences_sum", r"\brate\("),
    "latency p50": ("ranker_request_duration_seconds_bucket", r"histogram_quantile\(0\.5,"),
    "latency p95": ("ranker_request_duration_seconds_bucket", r"histogram_quantile\(0\.95,"),
    "latency p99": ("ranker_request_duration_seconds_bucket", r"histogram_quantile\(0\.99,"),
    "batch size": ("ranker_batch_sequences_count", r"/"),
    "queue wait": ("ranker_queue_wait_seconds_bucket", r"histogram_quantile\("),
    "queue depth": ("ranker_queue_sequences", r""),
    "abstentions": ("ranker_abstentions_total", r"\brate\("),
    "selections per generator": ("ranker_top1_selections_total", r"by \((model, )?generator\)"),
    "errors by status": ("ranker_request_duration_seconds_count", r"by \(status\)[\s\S]*status!~\"2"),
    "errors by type": ("ranker_errors_total", r"by \(type\)"),
    "logit cache hits": ("ranker_logit_cache_lookups_total", r'result="hit"[\s\S]*/'),
}


@pytest.mark.parametrize("topic", REQUIRED_PANEL_TOPICS)
def test_the_dashboard_has_a_panel_for(topic: str) -> None:
    metric, pattern = REQUIRED_PANEL_TOPICS[topic]
    matching = [
        e for e in _dashboard_expressions() if metric in promql_metric_names(e) and re.search(pattern, e)
    ]
    assert matching, f"no dashboard query for {topic}"


def test_the_dashboard_is_delivered_as_a_grafana_sidecar_config_map(
    rendered: dict[str, list[Manifest]],
) -> None:
    for manifests in rendered.values():
        (config_map,) = [
            m for m in manifests
            if m["kind"] == "ConfigMap" and m["metadata"].get("labels", {}).get("grafana_dashboard") == "1"
        ]  # fmt: skip
        assert config_map["data"] == {DASHBOARD.name: DASHBOARD.read_text()}
        dashboard = json.loads(DASHBOARD.read_text())
        assert dashboard["uid"] and dashboard["panels"]


def test_dashboard_and_alert_label_matchers_name_labels_their_metric_has(
    rendered: dict[str, list[Manifest]],
) -> None:
    labels = _label_names()
    assert labels["ranker_request_duration_seconds_bucket"] >= {"route", "status", "le"}
    rule = one(rendered["cpu"], "PrometheusRule", "ranking-service")
    exprs = _dashboard_expressions() + [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]
    for expr in exprs:
        for selector in _SELECTOR.finditer(expr):
            used = {m["label"] for m in _MATCHER_LABEL.finditer(selector["matchers"])}
            unknown = used - labels[selector["name"]] - SCRAPE_LABELS
            assert not unknown, f"{selector['name']} has no label {sorted(unknown)} in {expr!r}"
