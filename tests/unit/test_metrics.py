from __future__ import annotations

from dialogue_ranker.serving.metrics import Metrics, route_label


def test_every_metric_has_the_ranker_prefix() -> None:
    metrics = Metrics()
    names = {m.name for m in metrics.registry.collect()}
    assert names and all(name.startswith("ranker_") for name in names)


def test_the_expected_metrics_are_exposed() -> None:
    text = Metrics().exposition().decode()
    for name in (
        "ranker_request_duration_seconds",
        "ranker_request_candidates",
        "ranker_batch_sequences",
        "ranker_batch_candidates",
        "ranker_computed_sequences_total",
        "ranker_computed_candidates_total",
        "ranker_queue_sequences",
        "ranker_batch_tokens",
        "ranker_batch_padding_ratio",
        "ranker_queue_wait_seconds",
        "ranker_tokenization_duration_seconds",
        "ranker_inference_duration_seconds",
        "ranker_requests_in_flight",
        "ranker_masked_candidates_total",
        "ranker_abstentions_total",
        "ranker_top1_selections_total",
        "ranker_candidate_score",
        "ranker_model_info",
    ):
        assert f"# HELP {name}" in text


def test_a_route_with_a_bank_name_in_its_path_is_timed_under_its_template() -> None:
    assert route_label("/v1/banks") == "/v1/banks"
    assert route_label("/v1/banks/support") == "/v1/banks/{name}"
    assert route_label("/v1/banks/support/reload") == "/v1/banks/{name}/reload"
    assert route_label("/v1/banks/support/other") == "other"
    assert route_label("/v1/nothing") == "other"


def test_two_apps_metrics_do_not_clash() -> None:
    first, second = Metrics(), Metrics()
    first.abstentions.labels("a").inc()
    second.abstentions.labels("a")
    assert first.registry.get_sample_value("ranker_abstentions_total", {"model": "a"}) == 1.0
    assert second.registry.get_sample_value("ranker_abstentions_total", {"model": "a"}) == 0.0


def test_generator_names_are_capped_to_the_configured_list() -> None:
    metrics = Metrics(generators=["retrieval"])
    assert metrics.generator_label("retrieval") == "retrieval"
    assert metrics.generator_label("my-secret-llm") == "other"
    assert metrics.generator_label(None) == "none"


def test_every_renamed_pairs_metric_keeps_a_deprecated_alias_with_its_old_labels() -> None:
    text = Metrics().exposition().decode()
    for old, new in (
        ("ranker_batch_pairs", "ranker_batch_sequences"),
        ("ranker_computed_pairs_total", "ranker_computed_candidates_total"),
        ("ranker_queue_pairs", "ranker_queue_sequences"),
        ("ranker_failed_pairs_total", "ranker_failed_sequences_total"),
        ("ranker_dropped_pairs_total", "ranker_dropped_sequences_total"),
    ):
        assert f"# HELP {old} Deprecated: use {new}" in text
