"""A bank request's final score with the real model: fused as retriever.json says, fitted by the command."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from bank_helpers import require_retriever, wait_banks_ready, write_bank
from helpers import serve_in_process

from dialogue_ranker.data.ranking_data import Candidate, RankingList, write_lists
from dialogue_ranker.evaluation import bank_eval
from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.model_bundle import RETRIEVER_DIR, load_retriever
from dialogue_ranker.serving.settings import Settings
from dialogue_ranker.serving.tokenization import Turn

pytestmark = pytest.mark.integration
#: One request id for two answers compared byte for byte (an answer carries its request id).
SAME_ID = {"X-Request-ID": "compared-request"}

FUSION = {"method": "linear", "cosine_weight": 20.0, "cosine_centre": 0.4}
#: Replies to several conversations: generic good ones, and one specific to the request below.
CHAT_BANK = [
    {"id": "generic-great", "text": "That sounds great!"},
    {"id": "generic-thanks", "text": "Thank you so much, that is very kind of you."},
    {"id": "tickets", "text": "I booked two tickets for the concert on Friday night."},
    {"id": "concert-band", "text": "Which band is playing at the concert?"},
    {"id": "weather", "text": "It will rain all weekend, take an umbrella."},
    {"id": "dinner", "text": "Let's have pasta for dinner tonight."},
    {"id": "exam", "text": "I studied all night for the chemistry exam."},
]
CONCERT = {
    "context": [
        {"speaker": "user", "text": "Guess what, I got us tickets for Friday!"},
        {"speaker": "bot", "text": "Tickets for what?"},
        {"speaker": "user", "text": "For the concert downtown, the one you wanted to see."},
    ],
    "bank": "chat",
    "retrieve_k": 5,
    "candidates": [{"id": "own", "text": "No way, I have wanted to see that band for years!"}],
}


def bundle_with(directory: Path, model_dir: Path, fusion: dict | None) -> Path:
    """The real bundle's files (links), with a retriever/ whose retriever.json carries ``fusion``."""
    shipped = require_retriever()
    directory.mkdir()
    for item in model_dir.iterdir():
        if item.name != RETRIEVER_DIR:
            (directory / item.name).symlink_to(item.resolve(), target_is_directory=item.is_dir())
    retriever = directory / RETRIEVER_DIR
    retriever.mkdir()
    meta = json.loads((shipped / "retriever.json").read_text())
    meta.pop("fusion", None)
    for name in (meta["file"], meta["tokenizer"]):
        (retriever / name).symlink_to((shipped / name).resolve())
    if fusion is not None:
        meta["fusion"] = fusion
    (retriever / "retriever.json").write_text(json.dumps(meta))
    return directory


async def rank(client: httpx.AsyncClient, body: dict) -> dict:
    response = await client.post("/rank", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def as_explicit(answer: dict) -> dict:
    """The bank request's candidates sent explicitly, in its order: its own, then the nearest first."""
    texts = {c["id"]: c["text"] for c in CHAT_BANK}
    drawn = sorted((r for r in answer["ranking"] if r["bank"]), key=lambda r: -r["retrieval_score"])
    candidates = [*CONCERT["candidates"], *({"id": r["id"], "text": texts[r["id"]]} for r in drawn)]
    return {"context": CONCERT["context"], "candidates": candidates}


async def test_a_bank_request_follows_the_fused_score_and_explicit_requests_are_unchanged(
    model_dir: Path, tmp_path: Path
) -> None:
    fused = bundle_with(tmp_path / "fused", model_dir, FUSION)
    plain = bundle_with(tmp_path / "plain", model_dir, None)
    bank = write_bank(tmp_path / "chat.jsonl", CHAT_BANK)
    settings = Settings(backend="onnx", model=fused, bank=[f"chat={bank}"])
    async with serve_in_process(create_app(settings)) as client:
        await wait_banks_ready(client)
        answer = await rank(client, CONCERT)
        explicit = as_explicit(answer)
        raw = {r["id"]: r["logit"] for r in (await rank(client, explicit))["ranking"]}
        explicit_fused = (await client.post("/rank", json=explicit, headers=SAME_ID)).content
    async with serve_in_process(create_app(Settings(backend="onnx", model=plain))) as client:
        explicit_plain = (await client.post("/rank", json=explicit, headers=SAME_ID)).content
    ranking = answer["ranking"]
    assert len(ranking) == 6 and next(r for r in ranking if r["id"] == "own")["retrieval_score"] > 0
    for r in ranking:  # the ranker's logit, plus 20 x the cosine above 0.4
        assert r["logit"] == pytest.approx(raw[r["id"]] + 20.0 * (r["retrieval_score"] - 0.4), abs=2e-3)
    fused_scores = [r["logit"] for r in ranking]
    assert fused_scores == sorted(fused_scores, reverse=True)
    # A request without a bank: the same bytes whether the service fuses bank requests or not.
    assert explicit_fused == explicit_plain


TOPICS = [
    ("I just adopted a puppy!", "Congratulations! What breed is it?", "How old is he?"),
    ("My flight got cancelled.", "Let me look for the next flight.", "Where were you going?"),
    ("Can you recommend a book?", "Have you read Dune?", "Do you like science fiction?"),
    ("It is so hot in here.", "Shall I open the window for you?", "I can bring the fan."),
    ("I forgot my password.", "I can send you a reset link.", "Click 'Forgot password'."),
    ("What's the weather tomorrow?", "Tomorrow will be sunny.", "It will rain in the afternoon."),
]


def test_evaluate_bank_scores_with_the_runtime_named_and_records_it(model_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("openvino")
    lists = [
        RankingList((Turn("user", context),), (Candidate(good, 2), Candidate(other, 1)), f"dialogue-{i}")
        for i, (context, good, other) in enumerate(TOPICS)
    ]
    data = tmp_path / "lists.jsonl"
    write_lists(data, lists)
    retriever = bundle_with(tmp_path / "bundle", model_dir, None) / RETRIEVER_DIR
    common = ["--model", str(model_dir), "--retriever", str(retriever), "--lists", f"tiny={data}",
              "--split", "all", "--sample", "4", "--k", "10",
              "--cache-dir", str(tmp_path / "cache")]  # fmt: skip
    onnx = bank_eval.main(common)
    openvino = bank_eval.main([*common, "--backend", "openvino", "--precision", "f32", "--write"])
    assert (onnx["runtime"], openvino["runtime"]) == ("onnx", "openvino-f32")
    assert load_retriever(retriever).fusion.fitted["runtime"] == "openvino-f32"
    # Each runtime's logits are kept under their own key: the second run did not read the first's.
    assert len(list((tmp_path / "cache").glob("logits-tiny-*.npz"))) == 2


def test_evaluate_bank_fits_the_fusion_and_writes_it(model_dir: Path, tmp_path: Path) -> None:
    topics = TOPICS
    lists = [
        RankingList(
            (Turn("user", context),),
            (Candidate(good, 2), Candidate(other, 1), Candidate(topics[(i + 1) % len(topics)][1], 0)),
            f"dialogue-{i}",
        )
        for i, (context, good, other) in enumerate(topics)
    ]
    data = tmp_path / "lists.jsonl"
    write_lists(data, lists)
    retriever = bundle_with(tmp_path / "bundle", model_dir, None) / RETRIEVER_DIR
    argv = ["--model", str(model_dir), "--retriever", str(retriever), "--lists", f"tiny={data}",
            "--split", "all", "--sample", "4", "--check-sample", "2", "--k", "10",
            "--cache-dir", str(tmp_path / "cache"),
            "--calibration", "bank", "--last-turn-weight", "0.25", "--folds", "2",
            "--write", "--out", str(tmp_path / "out.json")]  # fmt: skip
    results = bank_eval.main(argv)
    fusion = load_retriever(retriever).fusion
    assert fusion.ranker is not None and fusion.ranker == results["model"]
    assert fusion.cosine_weight in bank_eval.bank_fusion.WEIGHTS and fusion.calibration is not None
    assert fusion.fitted["on"] == {"tiny": {"split": "all", "queries": 4}} and fusion.fitted["k"] == 10
    # The query it was fitted with is the query the service now makes.
    written = load_retriever(retriever)
    assert written.last_turn_weight == 0.25
    assert fusion.fitted["query"] == {"turns": written.query_turns, "last_turn_weight": 0.25}
    # The two queries left out of the fit are measured with the fitted weights, and stored.
    (checked,) = results["retrievers"][str(retriever.resolve())]["checked"].items()
    assert checked[0] == "tiny (2 other queries)"
    assert fusion.fitted["checked"] == {checked[0]: checked[1][bank_eval.served_name(fusion)]}
    assert 0.0 <= checked[1]["ranker alone"]["r_at_1"] <= 1.0
    # Cross-validated: the 4 sampled queries, each ranked by a fit on the other fold, pooled.
    folds = results["retrievers"][str(retriever.resolve())]["cross_validated"]
    assert len(folds["fits"]) == 2 and set(folds["metrics"]) == {"tiny"}
    assert fusion.fitted["cross_validated"] == {"folds": 2, "metrics": folds["metrics"]}
    summary = json.loads((tmp_path / "out.json").read_text())["summary"]["tiny"]
    assert {"TF-IDF, last turn", f"{load_retriever(retriever).name}: retrieval alone"} <= set(summary)
    # A rerun reads the bank's vectors and the ranker's logits from the cache.
    assert any((tmp_path / "cache").glob("logits-tiny-*.npz"))


def test_the_shipped_retriever_fuses_with_a_weight_fitted_for_the_shipped_ranker(model_dir: Path) -> None:
    # Without its fusion a bank request ranks by the logit alone, below retrieval alone (the
    # research note's table): the shipped retriever must carry one, fitted with this ranker.
    retriever = load_retriever(require_retriever())
    metadata = json.loads((model_dir / "metadata.json").read_text())
    assert retriever.fusion.active and retriever.fusion.cosine_weight > 0
    assert retriever.fusion.ranker == f"{metadata['name']}@{metadata['version']}"
    assert set(retriever.fusion.fitted["on"]) == {"ddpp", "topical-chat"}
    # ... and with the query the service makes (its turns and the last turn's weight).
    query = {"turns": retriever.query_turns, "last_turn_weight": retriever.last_turn_weight}
    assert retriever.fusion.fitted["query"] == query
