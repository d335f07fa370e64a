"""The model pipeline on real components: ONNX export parity, the shipped model's batch
invariance, and a training smoke run on real SUGAR examples."""

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dialogue_ranker.data.ranking_data import DataError
from dialogue_ranker.serving.model_bundle import load_bundle
from dialogue_ranker.serving.tokenization import Turn

pytestmark = pytest.mark.integration

REQUESTS = [
    (
        [Turn("user", "Could you make some coffee for my sister?")],
        [
            "The coffee machine is broken.",
            "It is early morning.",
            "My sister just woke up.",
            "The room is hot.",
        ],
        [
            "Sure, brewing it now.",
            "The machine is broken; shall I make tea instead?",
            "No.",
            "I like trains.",
        ],
    ),
    (
        [
            Turn("user", "Can you play some music?"),
            Turn("bot", "Which kind?"),
            Turn("user", "Something calm."),
        ],
        ["The baby is asleep in the next room."],
        [
            "Playing heavy metal at full volume!",
            "Here is a quiet piano playlist at low volume, so the baby can sleep.",
        ],
    ),
    (
        [Turn("user", "I want a refund for my order.")],
        [],
        ["Let me pull up your account first.", "Refunds are processed in five days.", "ok"],
    ),
]


def _pairs(encoder):
    return [
        p for turns, statements, cands in REQUESTS for p in encoder.encode_request(turns, statements, cands)
    ]


def test_onnx_export_matches_pytorch_on_a_few_pairs(tmp_path):
    torch = pytest.importorskip("torch", reason="training extras (torch) are not installed")
    from dialogue_ranker.evaluation.scoring import score, session
    from dialogue_ranker.export.onnx_graph import export_fp32
    from dialogue_ranker.serving.tokenization import PairEncoder
    from dialogue_ranker.training.backbone import backbone_dir, load_cross_encoder, score_pairs

    torch.manual_seed(0)
    model = load_cross_encoder(backbone_dir())  # the classifier head is freshly (seeded) initialised
    model.save_pretrained(tmp_path / "ckpt")
    encoder = PairEncoder.from_file(backbone_dir(), max_length=128)
    pairs = _pairs(encoder)
    onnx_path = export_fp32(tmp_path / "ckpt", tmp_path / "model.onnx")
    torch_logits = score_pairs(load_cross_encoder(tmp_path / "ckpt"), encoder, pairs, batch_size=4)
    onnx_logits = score(session(onnx_path), encoder, pairs, batch_size=4)
    assert np.abs(torch_logits).max() > 1e-3  # not a degenerate all-zero head
    np.testing.assert_allclose(onnx_logits, torch_logits, atol=1e-4)


def _spec_encoder_calibrator_pairs(bundle):
    if bundle.shared_prefix:
        pytest.skip(
            "a shared-prefix ranker runs one request's sequence per call (no batch-mates): "
            "test_onnx_ranking checks a request alone against concurrent ones"
        )
    encoder = bundle.pair_encoder()
    pairs = _pairs(encoder)
    return bundle.ranker, encoder, bundle.calibration, pairs


def test_shipped_model_scores_do_not_depend_on_batch_mates(model_dir):
    """Each pair scored alone vs inside shuffled mixed-length batches, run as the service runs them."""
    from dialogue_ranker.evaluation.scoring import batch_invariance, session

    bundle = load_bundle(model_dir)
    spec, encoder, calibrator, pairs = _spec_encoder_calibrator_pairs(bundle)
    random.Random(1).shuffle(pairs)
    served_batch = bundle.serving_sub_batch_pairs or 5
    result = batch_invariance(session(spec.path), encoder, pairs, calibrator, batch_size=served_batch)
    assert result["max_abs_prob_change"] <= 1e-3, result


def test_dynamically_quantised_graphs_are_declared_one_pair_per_call(model_dir):
    """Dynamic int8 computes activation scales over the whole batch tensor: the bundle must say so."""
    onnx = pytest.importorskip("onnx", reason="onnx is not installed")
    bundle = load_bundle(model_dir)
    spec = bundle.ranker
    ops = {node.op_type for node in onnx.load(str(spec.path), load_external_data=False).graph.node}
    if "DynamicQuantizeLinear" in ops or "MatMulIntegerToFloat" in ops:
        assert bundle.serving_sub_batch_pairs == 1


@pytest.mark.parametrize("head", ["linear", "cosine"])
def test_shared_prefix_export_matches_pytorch_and_a_candidate_ignores_its_list_mates(tmp_path, head):
    """fp32 graph vs PyTorch on mixed-length sequences; a candidate alone vs inside its list."""
    torch = pytest.importorskip("torch", reason="training extras (torch) are not installed")
    from dialogue_ranker.evaluation.scoring import score_sequences, session
    from dialogue_ranker.export.graph_variants import export_fp32
    from dialogue_ranker.serving.list_encoding import ListEncoder
    from dialogue_ranker.training.backbone import backbone_dir
    from dialogue_ranker.training.shared_prefix import SharedPrefixRanker, score_requests

    torch.manual_seed(0)
    fresh = SharedPrefixRanker.load(backbone_dir(), head=head)
    if head == "cosine":
        fresh.cosine_scale.data.fill_(17.0)  # not the initial value: the checkpoint must keep it
        torch.nn.init.normal_(fresh.head.weight, std=0.05)
    fresh.save(tmp_path / "ckpt", backbone_dir() / "tokenizer.json")
    assert (tmp_path / "ckpt" / "cosine.pt").exists() is (head == "cosine")
    encoder = ListEncoder.from_file(backbone_dir(), max_prefix_tokens=96, max_candidate_tokens=32)
    requests = [encoder.encode_request(turns, statements, cands) for turns, statements, cands in REQUESTS]
    graph = session(export_fp32(SharedPrefixRanker.load(tmp_path / "ckpt"), tmp_path / "model.onnx", encoder))
    onnx_logits = score_sequences(graph, encoder, requests)
    model = SharedPrefixRanker.load(tmp_path / "ckpt").eval()
    assert model.head_kind == head
    if head == "cosine":
        assert float(model.cosine_scale.detach()) == 17.0
    torch_logits = score_requests(model, encoder, requests, torch.device("cpu"), batch_sequences=3)
    for got, expected in zip(onnx_logits, torch_logits, strict=True):
        assert np.abs(expected).max() > 1e-3  # not a degenerate all-zero head
        np.testing.assert_allclose(got, expected, atol=1e-4)
    turns, statements, cands = REQUESTS[0]
    alone = [
        score_sequences(graph, encoder, [encoder.encode_request(turns, statements, [c])])[0][0] for c in cands
    ]
    np.testing.assert_allclose(onnx_logits[0], alone, atol=1e-5)


def test_blockwise_int8_stays_nearer_fp32_than_dynamic_and_ignores_list_mates(tmp_path):
    """The blockwise graph (MatMulNBits) against dynamic int8, both from one fp32 export."""
    torch = pytest.importorskip("torch", reason="training extras (torch) are not installed")
    onnx = pytest.importorskip("onnx", reason="onnx is not installed")
    from dialogue_ranker.evaluation.scoring import score_sequences, session
    from dialogue_ranker.export import quantize
    from dialogue_ranker.export.graph_variants import export_fp32
    from dialogue_ranker.serving.list_encoding import ListEncoder
    from dialogue_ranker.training.backbone import backbone_dir
    from dialogue_ranker.training.shared_prefix import SharedPrefixRanker

    torch.manual_seed(0)
    model = SharedPrefixRanker.load(backbone_dir(), head="cosine")
    torch.nn.init.normal_(model.head.weight, std=0.05)
    encoder = ListEncoder.from_file(backbone_dir(), max_prefix_tokens=96, max_candidate_tokens=32)
    fp32 = export_fp32(model.eval(), tmp_path / "fp32.onnx", encoder)
    blockwise = quantize.blockwise_int8(fp32, tmp_path / "blockwise.onnx")
    dynamic = quantize.dynamic_int8(fp32, tmp_path / "dynamic.onnx")
    ops = {n.op_type for n in onnx.load(str(blockwise), load_external_data=False).graph.node}
    assert "MatMulNBits" in ops and "DynamicQuantizeLinear" not in ops
    assert not (tmp_path / "blockwise.matmul-only.onnx").exists()  # the intermediate is removed

    requests = [encoder.encode_request(turns, statements, cands) for turns, statements, cands in REQUESTS]

    def logits(path):
        return np.concatenate(score_sequences(session(path), encoder, requests))

    def list_mate_change(path):
        graph = session(path)
        change = 0.0
        for turns, statements, cands in REQUESTS:
            request = encoder.encode_request(turns, statements, cands)
            together = score_sequences(graph, encoder, [request])[0]
            for i, c in enumerate(cands):
                alone = score_sequences(graph, encoder, [encoder.encode_request(turns, statements, [c])])
                change = max(change, abs(float(together[i]) - float(alone[0][0])))
        return change

    reference = logits(fp32)
    blockwise_error = np.abs(logits(blockwise) - reference).max()
    dynamic_error = np.abs(logits(dynamic) - reference).max()
    assert blockwise_error < dynamic_error, (blockwise_error, dynamic_error)
    blockwise_change, dynamic_change = list_mate_change(blockwise), list_mate_change(dynamic)
    assert blockwise_change < dynamic_change, (blockwise_change, dynamic_change)


def test_training_on_ranking_lists_writes_a_usable_run_directory(tmp_path, shared_data):
    """A smoke run of training.train on the generic format: two files, weights, a calibrated run."""
    pytest.importorskip("torch", reason="training extras (torch) are not installed")
    from dialogue_ranker.serving.calibration import Calibrator
    from dialogue_ranker.training import convert, train

    sugar = tmp_path / "sugar.jsonl"
    convert.main(["sugar", str(shared_data / "sugar" / "sugar.jsonl"), str(sugar)])
    other = tmp_path / "other.jsonl"
    other.write_text(sugar.read_text())
    out = tmp_path / "run"
    result = train.main(
        ["--data", f"{sugar}:0.5", "--data", str(other), "--out", str(out), "--limit", "12",
         "--dev-lists", "8", "--max-steps", "2", "--batch-lists", "4", "--max-prefix-tokens", "96",
         "--max-candidate-tokens", "32"]
    )  # fmt: skip
    for name in ("config.json", "metrics.json", "calibration.json", "reliability_dev.png"):
        assert (out / name).is_file(), name
    for name in ("model.safetensors", "head.pt", "cosine.pt", "tokenizer.json"):
        assert (out / "ranker" / name).is_file(), name
    calibration = json.loads((out / "calibration.json").read_text())
    assert 0.0 <= calibration["threshold"] <= 1.0
    probs = Calibrator.from_dict(calibration["maps"]["platt"])(np.linspace(-5, 5, 11))
    assert np.all(np.diff(probs) >= 0)
    assert result["steps"] == 2
    assert result["lists"]["sugar"]["dev"] == 8
    config = json.loads((out / "config.json").read_text())
    assert config["encoding"] == {
        "kind": "shared-prefix",
        "max_prefix_tokens": 96,
        "max_candidate_tokens": 32,
    }
    assert not Path(config["backbone"]).is_absolute()
    assert config["head"] == "cosine"

    # Interpolated toward the backbone: alpha 1 is the run, alpha 0 the fresh cosine-head model.
    import torch

    from dialogue_ranker.training import interpolate
    from dialogue_ranker.training.backbone import backbone_dir
    from dialogue_ranker.training.shared_prefix import SharedPrefixRanker

    tuned = SharedPrefixRanker.load(out / "ranker")
    fresh = SharedPrefixRanker.load(backbone_dir(), head="cosine")
    fresh.head.bias.data.copy_(tuned.head.bias.data)
    for alpha, expected in ((1.0, tuned), (0.0, fresh)):
        got = interpolate.interpolated(fresh, tuned, alpha).state_dict()
        for name, value in expected.state_dict().items():
            torch.testing.assert_close(got[name], value, msg=name)
    mixed, held = tmp_path / "mixed", tmp_path / "held.jsonl"
    held.write_text("".join(sugar.read_text().splitlines(keepends=True)[:20]))
    found = interpolate.main(
        ["--run", str(out), "--alphas", "0,1", "--alpha", "0.5", "--out", str(mixed),
         "--lists", f"held={held}"]
    )  # fmt: skip
    assert set(found["alphas"]) == {"0.0", "1.0"} and found["alphas"]["1.0"]["held"]["lists"] == 20
    # The evaluation CLI scores a run in PyTorch as interpolate scored it at alpha 1 (the same
    # order), with the run's own calibration: probabilities in [0, 1], the run's threshold.
    from dialogue_ranker.training import evaluate_run

    by_run = evaluate_run.main(["--run", str(out), "--lists", f"held={held}", "--split", "all"])["held"]
    for metric in ("lists", "precision_at_1", "ndcg_at_3", "mrr"):
        assert by_run[metric] == found["alphas"]["1.0"]["held"][metric], metric
    assert 0.0 <= by_run["ece"] <= 1.0 and by_run["abstention_accuracy"] is not None
    assert json.loads((mixed / "config.json").read_text())["interpolation"]["alpha"] == 0.5
    assert (mixed / "ranker" / "cosine.pt").is_file() and (mixed / "calibration.json").is_file()

    # --with blends other runs into the fine-tuned side: a run blended with itself is the run.
    quarter = interpolate.weighted_average([(tuned, 0.25), (fresh, 0.75)]).state_dict()
    start = fresh.state_dict()
    for name, value in tuned.state_dict().items():
        if value.is_floating_point():
            torch.testing.assert_close(quarter[name], 0.25 * value + 0.75 * start[name], msg=name)
    # TIES-merging the run with the fresh model (whose change is zero): where the run's change is
    # among the largest quarter of its matrix it is kept whole (the plain average would halve it),
    # elsewhere the weight stays fresh; vectors are averaged.
    merged = interpolate.ties_merged(fresh, [(tuned, 0.5), (fresh, 0.5)], 0.25).state_dict()
    matrices = 0
    for name, value in tuned.state_dict().items():
        if not value.is_floating_point():
            continue
        if value.dim() < 2:
            torch.testing.assert_close(merged[name], 0.5 * value + 0.5 * start[name], msg=name)
            continue
        change, kept = value - start[name], merged[name] - start[name]
        cut = change.abs().flatten().kthvalue(change.numel() - int(0.25 * change.numel())).values
        top = change.abs() > cut
        torch.testing.assert_close(kept[top], change[top], msg=name)
        assert torch.count_nonzero(kept) <= int(0.25 * change.numel()), name
        matrices += 1
    assert matrices > 30
    blend = tmp_path / "blend"
    souped = interpolate.main(
        ["--run", str(out), "--with", f"{out}:0.4", "--alphas", "1", "--alpha", "1", "--out", str(blend),
         "--lists", f"held={held}"]
    )  # fmt: skip
    assert souped["alphas"]["1.0"] == found["alphas"]["1.0"]
    blended = json.loads((blend / "config.json").read_text())
    # Each member's configuration travels with the soup, so the model card lists every run's stages.
    assert blended["interpolation"]["with"] == [
        {"run": str(out), "weight": 0.4, "config": json.loads((out / "config.json").read_text())}
    ]
    from dialogue_ranker.export.card_lines import interpolation_line, schedule_lines

    own = schedule_lines(json.loads((out / "config.json").read_text())).removeprefix("- stage 1: ")
    assert schedule_lines(blended).splitlines() == [f"- stage A1: {own}", f"- stage B1: {own}"]
    assert "0.6 x run A + 0.4 x run B" in interpolation_line(blended)
    # An output ensemble lists the same stages, says it averages logits, not weights, and names a
    # member recovered from a shipped graph (dialogue_ranker.training.recover).
    from dialogue_ranker.export.card_lines import ensemble_line
    from dialogue_ranker.export.export_model import ensemble_member

    own_config = json.loads((out / "config.json").read_text())
    for bad in ("nothing", f"{out}:1.5", f"{out}:x", f"{tmp_path / 'nowhere'}:0.5"):
        with pytest.raises(SystemExit, match="--ensemble-with"):
            ensemble_member(bad, out, own_config)
    other, share, other_config = ensemble_member(f"{out}:0.25", out, own_config)
    recovered = {"bundle_version": "9.9.9", "other_share": 0.5}
    ensembled = {
        **own_config,
        "recovered": recovered,
        "ensemble": {"with": [{"run": str(other), "weight": share, "config": other_config}]},
    }
    assert schedule_lines(ensembled).splitlines() == [f"- stage A1: {own}", f"- stage B1: {own}"]
    assert "0.75 x run A's + 0.25 x run B's" in ensemble_line(ensembled)
    assert "model 9.9.9's graph" in ensemble_line(ensembled) and "model soup" not in interpolation_line(
        ensembled
    )
    for bad in ("nothing", f"{out}:1.5", f"{out}:x"):
        with pytest.raises(SystemExit):
            interpolate.main(["--run", str(out), "--with", bad, "--alphas", "1"])
    linear = tmp_path / "linear"
    train.main(
        ["--data", str(sugar), "--out", str(linear), "--limit", "4", "--dev-lists", "4",
         "--max-steps", "1", "--batch-lists", "4", "--max-prefix-tokens", "64",
         "--max-candidate-tokens", "16", "--head", "linear"]
    )  # fmt: skip
    assert not (linear / "ranker" / "cosine.pt").exists()
    with pytest.raises(SystemExit, match="linear head"):
        interpolate.main(["--run", str(linear), "--alphas", "0.5"])
    with pytest.raises(SystemExit, match="encoding differs"):
        interpolate.main(["--run", str(out), "--with", f"{linear}:0.5", "--alphas", "1"])

    # A second stage (--init) starts from the first stage's weights, not the backbone's, and records it.
    first = tmp_path / "first"
    shutil.copytree(out, first)
    marked = SharedPrefixRanker.load(first / "ranker")
    marked.cosine_scale.data.fill_(17.0)
    with torch.no_grad():
        marked.encoder.embeddings.word_embeddings.weight.add_(0.01)
    marked.save(first / "ranker", backbone_dir() / "tokenizer.json")
    second = tmp_path / "second"
    train.main(
        ["--init", str(first), "--data", str(sugar), "--out", str(second), "--limit", "4",
         "--dev-lists", "4", "--max-steps", "1", "--batch-lists", "4", "--max-prefix-tokens", "96",
         "--max-candidate-tokens", "32", "--lr", "1e-12"]
    )  # fmt: skip
    continued = SharedPrefixRanker.load(second / "ranker")
    assert float(continued.cosine_scale.detach()) == pytest.approx(17.0, abs=1e-6)
    torch.testing.assert_close(
        continued.encoder.embeddings.word_embeddings.weight, marked.encoder.embeddings.word_embeddings.weight
    )
    stage = json.loads((second / "config.json").read_text())
    assert stage["init"]["run"] == str(first) and stage["init"]["config"]["data"] == config["data"]
    assert stage["backbone"] == config["backbone"]  # interpolation still averages toward the backbone
    from dialogue_ranker.export.card_lines import schedule_lines
    from dialogue_ranker.export.run_stages import training_stages

    assert [s["data"] for s in training_stages(stage)] == [config["data"], stage["data"]]
    assert schedule_lines(stage).splitlines() == [
        "- stage 1: 2 steps, 4 lists a step, learning rate 5e-05, seed 13, forward pass in fp32",
        "- stage 2: 1 step, 4 lists a step, learning rate 1e-12, seed 13, forward pass in fp32",
    ]
    for bad, message in (
        (["--init", str(linear)], "--head linear"),
        (["--init", str(tmp_path / "nowhere")], "not a finished run"),
        (["--init", str(first), "--backbone", str(backbone_dir())], "exclude each other"),
    ):
        with pytest.raises(DataError, match=message):
            train.main([*bad, "--data", str(sugar), "--out", str(tmp_path / "refused"), "--max-steps", "1"])


def test_training_commands_name_a_bad_file_without_a_traceback(tmp_path):
    """A file that is not ranking data ends the command with its file, line and field, status 2."""
    pytest.importorskip("torch", reason="training extras (torch) are not installed")
    bad = tmp_path / "bad.jsonl"
    line = {"group": "g", "context": [{"text": "hello"}], "candidates": [{"text": "hi", "label": 7}]}
    bad.write_text(json.dumps(line) + "\n")
    for command in (
        ["dialogue_ranker.training.train", "--data", str(bad), "--out", str(tmp_path / "run")],
        [
            "dialogue_ranker.evaluation.domains",
            "--model",
            str(tmp_path / "no-model"),
            "--lists",
            f"bad={bad}",
        ],
    ):
        done = subprocess.run([sys.executable, "-m", *command], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr
        assert f"{bad}:1" in done.stderr and "label" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_the_pair_layout_reads_the_context_with_each_candidate_and_is_not_exported(tmp_path, shared_data):
    """--layout pair: a per-pair cross-encoder on the same lists, for design comparisons only."""
    pytest.importorskip("torch", reason="training extras (torch) are not installed")
    import torch

    from dialogue_ranker.export.__main__ import main as export_main
    from dialogue_ranker.serving.list_encoding import ListEncoder
    from dialogue_ranker.training import convert, train
    from dialogue_ranker.training.backbone import backbone_dir
    from dialogue_ranker.training.shared_prefix import SharedPrefixRanker, to_tensors

    sugar = tmp_path / "sugar.jsonl"
    convert.main(["sugar", str(shared_data / "sugar" / "sugar.jsonl"), str(sugar)])
    out = tmp_path / "run"
    result = train.main(
        ["--data", str(sugar), "--out", str(out), "--limit", "8", "--dev-lists", "6", "--max-steps", "1",
         "--batch-lists", "4", "--max-prefix-tokens", "64", "--max-candidate-tokens", "16",
         "--layout", "pair"]
    )  # fmt: skip
    assert result["steps"] == 1 and result["lists"]["sugar"]["dev"] == 6
    assert json.loads((out / "config.json").read_text())["encoding"]["kind"] == "pair-design-run"
    with pytest.raises(SystemExit, match="not exported"):
        export_main(["--run", str(out), "--out", str(tmp_path / "model")])
    # Full attention: the context's tokens read the candidate, so a candidate changes them; with the
    # shared-prefix mask they never do.
    encoder = ListEncoder.from_file(backbone_dir(), max_prefix_tokens=64, max_candidate_tokens=16)
    turns, statements = [Turn("user", "Could you open the window?")], ["The window is closed."]
    for full, changes in ((True, True), (False, False)):
        model = SharedPrefixRanker.load(backbone_dir(), full_attention=full).eval()
        prefix = []
        for candidate in ("Sure, opening it now.", "Pizza is great."):
            (sequence,) = encoder.encode_request(turns, statements, [candidate])
            with torch.no_grad():
                logits = model(**to_tensors(encoder, [sequence], torch.device("cpu")))[0]
            prefix.append(logits[: sequence.segment_ids.count(0)])
        assert (not torch.allclose(prefix[0], prefix[1], atol=1e-6)) is changes


def test_train_candidates_keeps_the_appropriate_ones_and_samples_the_rest():
    """--train-candidates: every appropriate candidate stays, the negatives are a fresh sample."""
    pytest.importorskip("torch", reason="training extras (torch) are not installed")
    from dialogue_ranker.data.ranking_data import Candidate, RankingList
    from dialogue_ranker.training.train_lists import sample_candidates

    lists = RankingList(
        context=(Turn("user", "hi"),),
        candidates=tuple(Candidate(f"c{i}", 2 if i in (3, 7) else 0) for i in range(10)),
        group="g",
    )
    rng = random.Random(0)
    seen_negatives = set()
    for _ in range(20):
        kept = sample_candidates(lists, 4, rng)
        texts = [c.text for c in kept.candidates]
        assert len(texts) == 4 and len(set(texts)) == 4 and {"c3", "c7"} <= set(texts)
        seen_negatives |= set(texts) - {"c3", "c7"}
    assert len(seen_negatives) == 8  # over 20 draws every negative turns up
    assert sample_candidates(lists, 10, rng) is lists


def test_train_candidates_on_cuts_the_named_files_lists_and_keeps_the_others_whole(tmp_path):
    """A fine-tune cuts its new lists for speed; the replay stays whole, as the regression suite scores it."""
    pytest.importorskip("torch", reason="training extras (torch) are not installed")
    from dialogue_ranker.data.ranking_data import Candidate, RankingList
    from dialogue_ranker.training.list_loss import cut_batch
    from dialogue_ranker.training.train import parse_args

    def ranking_list(path: Path) -> RankingList:
        candidates = tuple(Candidate(f"c{i}", 2 if i == 0 else 0) for i in range(10))
        return RankingList(
            context=(Turn("user", "hi"),), candidates=candidates, group="g", origin=f"{path}:1"
        )

    team, replay = tmp_path / "team.jsonl", tmp_path / "replay.jsonl"
    batch = [ranking_list(team), ranking_list(replay)]
    common = ["--data", str(team), "--data", str(replay), "--out", "o", "--train-candidates", "3"]
    sizes = [
        len(x.candidates)
        for x in cut_batch(batch, parse_args([*common, "--train-candidates-on", "team"]), random.Random(0))
    ]
    assert sizes == [3, 10]
    assert [len(x.candidates) for x in cut_batch(batch, parse_args(common), random.Random(0))] == [3, 3]


def test_train_candidates_on_a_file_not_given_is_refused_by_name(tmp_path):
    pytest.importorskip("torch", reason="training extras (torch) are not installed")
    from dialogue_ranker.training.train import main

    data = tmp_path / "team.jsonl"
    data.write_text("")
    with pytest.raises(DataError, match="--train-candidates-on replay: no --data file has that name"):
        main(
            [
                "--data",
                str(data),
                "--out",
                str(tmp_path / "o"),
                "--train-candidates",
                "3",
                "--train-candidates-on",
                "replay",
            ]
        )
    with pytest.raises(DataError, match="--select-on replay: no --data file has that name"):
        main(["--data", str(data), "--out", str(tmp_path / "o"), "--select-on", "replay"])
    with pytest.raises(DataError, match="give --train-candidates"):
        main(["--data", str(data), "--out", str(tmp_path / "o"), "--train-candidates-on", "team"])


def test_select_on_chooses_epochs_by_the_named_files_dev_score(monkeypatch):
    pytest.importorskip("torch", reason="training extras (torch) are not installed")
    from dialogue_ranker.training import train_loop

    reports = {"team": {"ndcg_at_3": 0.5}, "replay": {"ndcg_at_3": 0.9}}
    monkeypatch.setattr(train_loop, "dev_logits", lambda model, encoder, dev: {})
    monkeypatch.setattr(train_loop, "dev_report", lambda dev, logits: reports)
    every = train_loop.dev_entry(None, None, {}, epoch=1, step=10)
    team = train_loop.dev_entry(None, None, {}, epoch=1, step=10, select_on=["team"])
    assert every["mean_ndcg_at_3"] == pytest.approx(0.7) and team["mean_ndcg_at_3"] == pytest.approx(0.5)
    assert team["dev"] == reports  # every file is still reported


@pytest.mark.parametrize("value", ["-3", "0", "1", "two"])
def test_train_candidates_below_two_is_refused_by_name(value, capsys):
    pytest.importorskip("torch", reason="training extras (torch) are not installed")
    from dialogue_ranker.training.train import parse_args

    with pytest.raises(SystemExit) as exit_:
        parse_args(["--data", "x.jsonl", "--out", "o", "--train-candidates", value])
    assert exit_.value.code == 2 and "--train-candidates" in capsys.readouterr().err


def test_bf16_training_scores_like_fp32_and_records_what_it_ran_in(tmp_path, shared_data, monkeypatch):
    """--precision bf16: the training forward pass in autocast, close to fp32; the run says which ran."""
    torch = pytest.importorskip("torch", reason="training extras (torch) are not installed")
    from dialogue_ranker.serving.list_encoding import ListEncoder
    from dialogue_ranker.training import backbone, convert, train
    from dialogue_ranker.training.list_loss import list_logits
    from dialogue_ranker.training.shared_prefix import SharedPrefixRanker
    from dialogue_ranker.training.train_lists import encode, load_splits

    sugar = tmp_path / "sugar.jsonl"
    convert.main(["sugar", str(shared_data / "sugar" / "sugar.jsonl"), str(sugar)])
    args = train.parse_args(["--data", str(sugar), "--out", str(tmp_path / "x"), "--limit", "4"])
    lists, _ = load_splits(args)
    encoder = ListEncoder.from_file(
        backbone.backbone_dir(), max_prefix_tokens=128, max_candidate_tokens=32, max_chunk_tokens=1 << 16,
        max_chunk_candidates=1 << 10,
    )  # fmt: skip
    model = SharedPrefixRanker.load(backbone.backbone_dir(), head="cosine").eval()
    sequences = [encode(encoder, x) for x in lists["sugar"]]
    with torch.no_grad():
        exact = list_logits(model, encoder, sequences)
        with backbone.autocast("bf16"):
            mixed = list_logits(model, encoder, sequences)
    assert mixed.dtype == torch.float32 and exact.abs().max() > 1.0
    # bf16 keeps 8 bits of mantissa: logits of about 10 move by a few hundredths, never the ranking's scale.
    assert 0 < (mixed - exact).abs().max() < 0.25

    out = tmp_path / "run"
    train.main(
        ["--data", str(sugar), "--out", str(out), "--limit", "4", "--dev-lists", "4", "--max-steps", "1",
         "--batch-lists", "4", "--max-prefix-tokens", "64", "--max-candidate-tokens", "16",
         "--precision", "bf16"]
    )  # fmt: skip
    config = json.loads((out / "config.json").read_text())
    assert config["precision"] == "bf16" and config["training_precision"] == "bf16"
    trained = SharedPrefixRanker.load(out / "ranker")
    assert all(torch.isfinite(p).all() and p.dtype == torch.float32 for p in trained.parameters())
    # auto: bf16 only where the hardware multiplies it natively.
    for native, expected in ((True, "bf16"), (False, "fp32")):
        monkeypatch.setattr(backbone, "has_fast_bf16", lambda native=native: native)
        assert backbone.training_precision("auto") == expected
    assert backbone.training_precision("fp32") == "fp32"


def test_the_similarity_term_adds_its_weight_times_the_sentence_encoders_cosine(tmp_path):
    """Exported graph = ranker + weight x cos(candidate, latest turn) as sentence-transformers computes it."""
    torch = pytest.importorskip("torch", reason="training extras (torch) are not installed")
    from sentence_transformers import SentenceTransformer

    from dialogue_ranker.evaluation.scoring import score_sequences, session
    from dialogue_ranker.export.graph_variants import export_fp32
    from dialogue_ranker.serving.list_encoding import ListEncoder
    from dialogue_ranker.training.backbone import backbone_dir
    from dialogue_ranker.training.shared_prefix import score_requests
    from dialogue_ranker.training.similarity import SimilarityRanker, candidate_cosines

    torch.manual_seed(0)
    model = SimilarityRanker.load(backbone_dir(), backbone_dir(), weight=2.5).eval()
    torch.nn.init.normal_(model.ranker.head.weight, std=0.05)
    # Two candidates a sequence: the turn's block goes with every chunk.
    encoder = ListEncoder.from_file(
        backbone_dir(), max_prefix_tokens=96, max_candidate_tokens=32, max_chunk_candidates=2, similarity=1
    )
    requests = [encoder.encode_request(turns, statements, cands) for turns, statements, cands in REQUESTS]
    assert max(len(r) for r in requests) > 1
    graph = session(export_fp32(model, tmp_path / "model.onnx", encoder))
    assert [i.name for i in graph.get_inputs()] == list(SimilarityRanker.input_names)
    fused = score_sequences(graph, encoder, requests)
    ranker = score_requests(model.ranker, encoder, requests, torch.device("cpu"))
    sentence = SentenceTransformer(str(backbone_dir()), device="cpu")
    for (turns, _, cands), got, alone, cosine in zip(
        REQUESTS, fused, ranker, candidate_cosines(model, encoder, requests), strict=True
    ):
        turn = sentence.encode([turns[-1].text], normalize_embeddings=True)[0]
        expected = sentence.encode(cands, normalize_embeddings=True) @ turn
        np.testing.assert_allclose(cosine, expected, atol=1e-5)
        assert np.ptp(expected) > 0.02  # the candidates differ in similarity: the term is not a constant
        np.testing.assert_allclose(got, np.asarray(alone) + 2.5 * expected, atol=1e-4)


def test_the_similarity_weight_is_what_the_cosine_is_worth_when_ordering_one_list():
    """The pairwise fit recovers the weight that chose each list's pick, whatever each list's cosine level."""
    pytest.importorskip("torch", reason="training extras (torch) are not installed")
    from dialogue_ranker.training.similarity import fit_weight

    rng = np.random.default_rng(0)
    logits, cosines = rng.normal(size=(2, 2000, 8))
    # Each list's cosines sit at their own level (as whole files do), which does not change
    # which candidate is picked: a fit over lists pooled together would read it as signal.
    cosines = 0.3 * cosines + rng.normal(scale=2.0, size=(2000, 1))
    utility = 0.8 * logits + 2.4 * cosines
    chosen = np.exp(utility - utility.max(1, keepdims=True))
    picks = [rng.choice(8, p=row / row.sum()) for row in chosen]
    gains = [[float(k == pick) for k in range(8)] for pick in picks]
    fitted = fit_weight(list(logits), list(cosines), gains)
    assert fitted["weight"] == pytest.approx(3.0, abs=0.4)
    assert fitted["pairs"] == 2000 * 7
    with pytest.raises(ValueError, match="non-positive"):
        fit_weight(list(-logits), list(cosines), gains)
    with pytest.raises(ValueError, match="nothing to fit"):
        fit_weight(list(logits), list(cosines), [[0.0] * 8] * 2000)


def test_a_fresh_cosine_head_scores_each_token_by_its_cosine_with_the_mean_prefix_state():
    """The cosine head's token logit, recomputed by hand: scale x cos(token, mean prefix) + bias."""
    torch = pytest.importorskip("torch", reason="training extras (torch) are not installed")
    from dialogue_ranker.serving.list_encoding import ListEncoder
    from dialogue_ranker.training.backbone import backbone_dir
    from dialogue_ranker.training.shared_prefix import (
        COSINE_SCALE,
        SharedPrefixRanker,
        attention_bias,
        to_tensors,
    )

    encoder = ListEncoder.from_file(backbone_dir(), max_prefix_tokens=64, max_candidate_tokens=16)
    model = SharedPrefixRanker.load(backbone_dir(), head="cosine").eval()
    assert float(model.cosine_scale.detach()) == COSINE_SCALE and float(model.head.weight.abs().max()) == 0.0
    (sequence,) = encoder.encode_request(
        [Turn("user", "Could you open the window?")], [], ["Sure, opening it now.", "Pizza is great."]
    )
    feeds = to_tensors(encoder, [sequence], torch.device("cpu"))
    with torch.no_grad():
        logits = model(**feeds)[0].numpy()
        hidden = (
            model.encoder(
                input_ids=feeds["input_ids"],
                token_type_ids=feeds["token_type_ids"],
                position_ids=feeds["position_ids"],
                attention_mask=attention_bias(feeds["segment_ids"], torch.float32),
            )
            .last_hidden_state[0]
            .numpy()
        )
    segments = np.asarray(sequence.segment_ids)
    prefix = hidden[segments == 0].mean(0)
    cosine = hidden @ prefix / (np.linalg.norm(hidden, axis=1) * np.linalg.norm(prefix))
    np.testing.assert_allclose(logits, COSINE_SCALE * cosine + float(model.head.bias), atol=1e-4)


def test_shipped_metadata_names_its_data_and_limits(model_dir):
    meta = json.loads((Path(model_dir) / "metadata.json").read_text())
    if "training_data" not in meta:
        pytest.skip("not a trained bundle (a test bundle without training metadata)")
    assert "CC BY-SA 4.0" in meta["training_data"]["attribution"]
    assert all(d["license"] != "?" for d in meta["training_data"]["datasets"]), meta["training_data"]
    assert meta["max_length"] >= 128
    total_mb = sum(f.stat().st_size for f in Path(model_dir).iterdir()) / 2**20
    assert total_mb < 60
    assert not Path(meta["training_config"]["backbone"]).is_absolute()


def test_a_training_file_is_credited_to_its_dataset_by_name():
    """Another negative mix of a dataset keeps its licence; an unknown file is marked, not guessed."""
    pytest.importorskip("torch", reason="training extras (torch) are not installed")
    from dialogue_ranker.export.run_stages import DATASETS, dataset_of

    assert dataset_of("topical-chat") == dataset_of("topical-chat-entity-fact") == DATASETS["topical-chat"]
    assert dataset_of("sugar") == DATASETS["sugar"]
    for name, dataset in (
        ("sgd-train", "sgd"),
        ("persona-chat", "persona-chat"),
        ("taskmaster-reward", "taskmaster"),
    ):
        assert dataset_of(name) == DATASETS[dataset] and DATASETS[dataset][1].startswith("CC BY"), name
    assert dataset_of("sugarcane")[1:] == ("?", "?") and dataset_of("my-logs") == ("my-logs", "?", "?")


def test_the_written_situations_are_credited_by_their_lists_groups(tmp_path):
    """A file named after no dataset (``written.jsonl``) is credited by its groups: the project's licence."""
    pytest.importorskip("torch", reason="training extras (torch) are not installed")
    from dialogue_ranker.data.ranking_data import write_lists
    from dialogue_ranker.export.run_stages import dataset_of
    from dialogue_ranker.training.converters.written_situations import convert_written_situations

    source = Path(__file__).resolve().parents[2] / "data" / "written_situations" / "situations.toml"
    written = tmp_path / "written.jsonl"
    write_lists(written, convert_written_situations(source))
    dataset, licence, _ = dataset_of("written", written)
    assert "written for this project" in dataset and licence == "Apache-2.0"


def test_a_training_file_whose_name_says_nothing_is_credited_by_its_lists_group(tmp_path):
    """2.9.0's ``tc-short-positive.jsonl`` is Topical-Chat: its lists' groups say so; others stay unknown."""
    pytest.importorskip("torch", reason="training extras (torch) are not installed")
    from dialogue_ranker.export.run_stages import DATASETS, dataset_of

    def lists(name: str, group: str):
        path = tmp_path / f"{name}.jsonl"
        path.write_text(json.dumps({"context": [], "candidates": [], "group": group}) + "\n")
        return path

    assert dataset_of("tc-short", lists("tc-short", "topical-chat-t_a2b7")) == DATASETS["topical-chat"]
    assert dataset_of("flips", lists("flips", "sugar-request: Make coffee?")) == DATASETS["sugar"]
    assert dataset_of("mine", lists("mine", "support-ticket-12"))[1:] == ("?", "?")
    assert dataset_of("gone", tmp_path / "absent.jsonl")[1:] == ("?", "?")


def test_export_of_an_unfinished_run_says_so_without_a_traceback(tmp_path):
    """A run directory without config.json (training still running, or killed) is refused by name."""
    pytest.importorskip("torch", reason="training extras (torch) are not installed")
    run = tmp_path / "run-in-progress"
    run.mkdir()
    command = ["dialogue_ranker.export", "--run", str(run), "--out", str(tmp_path / "model")]
    command += ["--threshold-on", "sugar"]
    done = subprocess.run([sys.executable, "-m", *command], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert f"{run}: not a finished training run (no config.json)" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "model").exists()


def test_the_export_names_the_machine_its_int8_figures_were_measured_on():
    """int8 scores depend on the CPU's instruction sets: the report and the card say which CPU."""
    pytest.importorskip("torch", reason="training extras (torch) are not installed")
    import onnxruntime

    from dialogue_ranker.data.machine import describe_for_report, read_cpu
    from dialogue_ranker.export.card_lines import machine_line

    cpu = read_cpu()
    machine = describe_for_report(cpu)
    assert machine["cpu"] == cpu.model and machine["onnxruntime"] == onnxruntime.__version__
    assert set(machine["kernel_flags"]) <= cpu.flags
    line = machine_line(machine)
    assert line.startswith(f"Measured with ONNX Runtime {onnxruntime.__version__} on {cpu.model}")
    assert machine_line(None) == ""  # a report from before the machine was recorded


def test_dev_seed_fixes_the_dev_sample_across_training_seeds(tmp_path):
    """Runs of different --seed compare on the same dev lists when they share --dev-seed."""
    pytest.importorskip("torch", reason="training extras (torch) are not installed")
    from dialogue_ranker.data.ranking_data import Candidate, RankingList, write_lists
    from dialogue_ranker.evaluation.domains import group_split
    from dialogue_ranker.training.dev_scoring import run_dev_lists
    from dialogue_ranker.training.train import parse_args
    from dialogue_ranker.training.train_lists import load_splits

    lists = [
        RankingList(
            context=(Turn("user", f"turn {i}"),),
            situations=(),
            candidates=(Candidate(f"reply {i}", 1), Candidate("no", 0)),
            group=f"g{i}",
        )
        for i in range(400)
    ]
    data = tmp_path / "lists.jsonl"
    write_lists(data, lists)
    assert sum(group_split(x.group) == "dev" for x in lists) > 20  # enough to sample 10 from

    def dev_groups(*flags: str) -> list[str]:
        args = parse_args(["--data", str(data), "--out", str(tmp_path / "run"), "--dev-lists", "10", *flags])
        return [x.group for x in load_splits(args)[1]["lists"]]

    assert dev_groups("--seed", "13") != dev_groups("--seed", "14")  # the default: the run's seed
    assert dev_groups("--seed", "13", "--dev-seed", "0") == dev_groups("--seed", "14", "--dev-seed", "0")
    # A finished run's dev lists are re-derived from its config (export calibrates on them).
    config = {"data": [{"name": "lists", "file": str(data), "weight": 1.0}], "seed": 14, "dev_seed": 0,
              "dev_lists": 10}  # fmt: skip
    assert [x.group for x in run_dev_lists(config)["lists"]] == dev_groups("--seed", "14", "--dev-seed", "0")


def test_the_calibration_map_is_fitted_on_the_files_named():
    """export --calibrate-on: the Platt map of the named files' dev lists only; unknown names refused."""
    pytest.importorskip("torch", reason="training extras (torch) are not installed")
    from dialogue_ranker.data.ranking_data import Candidate, RankingList
    from dialogue_ranker.export.calibration_choice import calibrate_on
    from dialogue_ranker.serving.tokenization import Turn
    from dialogue_ranker.training.dev_scoring import fit_calibration

    rng = np.random.default_rng(0)

    def lists(n: int, shift: float):
        made, logits = [], []
        for i in range(n):
            labels = [1, 0, 0]
            made.append(
                RankingList(
                    (Turn("user", "hi"),), tuple(Candidate(f"c{j}", y) for j, y in enumerate(labels)), f"g{i}"
                )
            )
            logits.append(np.asarray(labels, float) * 2 + shift + rng.normal(0, 1.5, 3))
        return made, logits

    (hard, hard_z), (easy, easy_z) = lists(60, 0.0), lists(60, 3.0)
    dev, logits = {"hard": hard, "easy": easy}, {"hard": hard_z, "easy": easy_z}
    chosen = calibrate_on("hard", dev, logits)
    alone = fit_calibration({"hard": hard}, {"hard": hard_z})
    assert chosen["calibrated_on"] == ["hard"]
    assert chosen["maps"]["platt"].to_dict() == alone["maps"]["platt"].to_dict()
    assert chosen["threshold"] == alone["threshold"]
    pooled = calibrate_on(None, dev, logits)
    assert pooled["calibrated_on"] == ["hard", "easy"]
    assert pooled["maps"]["platt"].to_dict() != alone["maps"]["platt"].to_dict()  # the easy file moves it
    with pytest.raises(SystemExit, match="--calibrate-on nope: no such training file"):
        calibrate_on("hard,nope", dev, logits)


def test_the_threshold_reads_logits_the_export_already_has():
    """export --threshold-on: a file whose dev logits were scored is not scored again (no session
    is needed), and the threshold is the best one for those logits under the fitted map."""
    pytest.importorskip("torch", reason="training extras (torch) are not installed")
    from dialogue_ranker.data.ranking_data import Candidate, RankingList
    from dialogue_ranker.evaluation import metrics
    from dialogue_ranker.export.calibration_choice import calibrate_on, threshold_on
    from dialogue_ranker.serving.tokenization import Turn

    rng = np.random.default_rng(1)
    labels = [1, 0, 0]
    made = [
        RankingList(
            (Turn("user", "hi"),), tuple(Candidate(f"c{j}", y) for j, y in enumerate(labels)), f"g{i}"
        )
        for i in range(40)
    ]
    logits = [np.asarray(labels, float) * 2 + rng.normal(0, 1.5, 3) for _ in made]
    fitted = calibrate_on(None, {"a": made}, {"a": logits})
    chosen = threshold_on(fitted, ["a"], {"a": made}, None, None, scored={"a": logits})
    platt = fitted["maps"]["platt"]
    expected = metrics.best_abstention_threshold([platt(z) for z in logits], [labels] * len(made))
    assert (chosen["threshold"], chosen["abstention_accuracy"]) == expected
    assert chosen["threshold_on"] == ["a"]


def test_training_with_the_last_turn_view_averages_the_views_logits_as_the_service_does():
    """``training.train --last-turn-weight``: a multi-turn list's training logits are the weighted
    mean of its full-context and last-turn logits; a one-turn list's are its own."""
    pytest.importorskip("torch", reason="training extras (torch) are not installed")
    import argparse

    import torch

    from dialogue_ranker.data.ranking_data import Candidate, RankingList
    from dialogue_ranker.serving.list_encoding import ListEncoder
    from dialogue_ranker.training.backbone import backbone_dir
    from dialogue_ranker.training.list_loss import list_logits, served_logits
    from dialogue_ranker.training.shared_prefix import SharedPrefixRanker
    from dialogue_ranker.training.train_lists import encode

    model = SharedPrefixRanker.load(backbone_dir(), head="cosine").eval()
    encoder = ListEncoder.from_file(backbone_dir(), max_prefix_tokens=96, max_candidate_tokens=32)
    candidates = tuple(
        Candidate(text, label) for text, label in (("Try the park nearby.", 1), ("I like trains.", 0))
    )
    multi = RankingList(
        context=(
            Turn("user", "I want to go for a run."),
            Turn("bot", "Where to?"),
            Turn("user", "Somewhere near."),
        ),
        candidates=candidates,
        group="g-multi",
    )
    single = RankingList(context=multi.context[-1:], candidates=candidates, group="g-single")
    with torch.no_grad():
        served = served_logits(
            model, encoder, [multi, single], argparse.Namespace(thinned=0.0, last_turn_weight=0.5), None
        )
        plain = served_logits(
            model, encoder, [multi, single], argparse.Namespace(thinned=0.0, last_turn_weight=0.0), None
        )
        full = list_logits(model, encoder, [encode(encoder, x) for x in (multi, single)])
    torch.testing.assert_close(served[0], (full[0] + 0.5 * full[1]) / 1.5, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(served[1], full[1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(plain, full, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(served[0], full[0], atol=1e-3), "the last-turn view changed nothing"
