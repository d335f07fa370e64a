"""An output ensemble exported as one graph, and a soup member recovered from a blockwise graph."""

import numpy as np
import pytest

from dialogue_ranker.serving.tokenization import Turn

pytestmark = pytest.mark.integration
torch = pytest.importorskip("torch", reason="training extras (torch) are not installed")

REQUESTS = [
    (
        [Turn("user", "It is so hot in here, can you help?")],
        ["The window is closed.", "There is a fan in the closet.", "The user likes pizza."],
        ["Shall I open the window for you?", "Pizza is great.", "I do not know."],
    ),
    (
        [Turn("user", "Any plans tonight?"), Turn("bot", "Not yet."), Turn("user", "Want to see a film?")],
        [],
        ["Sure, which one?", "I had pasta for lunch.", "Films are movies."],
    ),
]


def _ranker(seed: int, noise: float = 0.0):
    """The backbone with a cosine head, a random linear part and, with ``noise``, moved weights."""
    from dialogue_ranker.training.backbone import backbone_dir
    from dialogue_ranker.training.shared_prefix import SharedPrefixRanker

    torch.manual_seed(seed)
    model = SharedPrefixRanker.load(backbone_dir(), head="cosine")
    torch.nn.init.normal_(model.head.weight, std=0.05)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(noise * torch.randn_like(p))
    return model.eval()


def _encoder_and_requests():
    from dialogue_ranker.serving.list_encoding import ListEncoder
    from dialogue_ranker.training.backbone import backbone_dir

    encoder = ListEncoder.from_file(backbone_dir(), max_prefix_tokens=96, max_candidate_tokens=32)
    return encoder, [encoder.encode_request(*r) for r in REQUESTS]


def test_the_ensemble_graph_scores_the_weighted_sum_of_its_members_logits(tmp_path):
    from dialogue_ranker.evaluation.scoring import score_sequences, session
    from dialogue_ranker.export.graph_variants import export_fp32
    from dialogue_ranker.training.ensemble import EnsembleRanker
    from dialogue_ranker.training.shared_prefix import INPUT_NAMES, score_requests

    first, second = _ranker(0), _ranker(1, noise=0.01)
    encoder, requests = _encoder_and_requests()
    graph = session(
        export_fp32(EnsembleRanker([first, second], [0.7, 0.3]).eval(), tmp_path / "e.onnx", encoder)
    )
    assert [i.name for i in graph.get_inputs()] == list(INPUT_NAMES)
    got = np.concatenate(score_sequences(graph, encoder, requests))
    a, b = (
        np.concatenate(score_requests(m, encoder, requests, torch.device("cpu"))) for m in (first, second)
    )
    assert np.abs(a - b).max() > 0.05  # the members disagree: the weights matter
    np.testing.assert_allclose(got, 0.7 * a + 0.3 * b, atol=1e-4)
    with pytest.raises(ValueError, match="sum to 1"):
        EnsembleRanker([first, second], [0.7, 0.7])


def test_a_soup_member_comes_back_from_the_blockwise_graph_and_the_other_member(tmp_path):
    """Soup = 0.5 A + 0.5 B, exported blockwise int8; B and the graph give A back within a step."""
    from dialogue_ranker.evaluation.scoring import score_sequences, session
    from dialogue_ranker.export import quantize
    from dialogue_ranker.export.graph_variants import export_fp32
    from dialogue_ranker.training.recover import graph_weights, narrowed, recover_member
    from dialogue_ranker.training.shared_prefix import score_requests

    member, other, soup = _ranker(0, noise=0.01), _ranker(1, noise=0.01), _ranker(2)
    with torch.no_grad():
        for s, a, b in zip(soup.parameters(), member.parameters(), other.parameters(), strict=True):
            s.copy_(0.5 * a + 0.5 * b)
    encoder, requests = _encoder_and_requests()
    fp32 = export_fp32(soup, tmp_path / "soup.onnx", encoder)
    graph = quantize.blockwise_int8(fp32, tmp_path / "soup8.onnx")
    # A second quantization of the same weights (dynamic int8, a scale per output) narrows the cells.
    dynamic = quantize.dynamic_int8(fp32, tmp_path / "dynamic.onnx")
    weights, narrowing = narrowed([graph_weights(graph), graph_weights(dynamic)])
    assert narrowing["cells_apart"] == 0 and narrowing["cells_width_after_intersection"] < 0.95
    params = {n: p.detach().numpy() for n, p in soup.named_parameters()}
    quantized = [n for n in params if np.any(weights[n][1] > weights[n][0])]
    assert "encoder.encoder.layer.5.output.dense.weight" in quantized and "head.weight" in quantized
    assert "encoder.embeddings.word_embeddings.weight" in quantized
    for name, value in params.items():  # the soup's weight lies in the cell the graph gives
        low, high = weights[name]
        assert np.all((low - 1e-7 <= value.reshape(low.shape)) & (value.reshape(low.shape) <= high + 1e-7)), (
            name
        )

    recovered, moved = recover_member(weights, _ranker(1, noise=0.01), share=0.5)
    assert 0 < moved["share_outside_other_cell"] < 1
    for (name, got), want in zip(recovered.named_parameters(), member.parameters(), strict=True):
        low, high = (bound.reshape(got.shape) for bound in weights[name])
        got, want = got.detach().numpy(), want.detach().numpy()
        assert np.all(np.abs(got - want) <= 2 * (high - low) + 1e-6 * (1 + np.abs(want))), name

    def logits(model):
        return np.concatenate(score_requests(model, encoder, requests, torch.device("cpu")))

    truth, back = logits(member), logits(recovered)
    soup_logits = np.concatenate(score_sequences(session(graph), encoder, requests))
    assert np.abs(back - truth).max() < np.abs(soup_logits - truth).max() / 2


def test_a_stage_on_top_of_the_shipped_model_starts_from_its_graph_s_weights(model_dir):
    """``ranker train --init-bundle``: the shipped graph's weights, dequantized, score as the graph does."""
    from dialogue_ranker.evaluation.scoring import score_sequences, session
    from dialogue_ranker.serving.list_encoding import ListEncoder
    from dialogue_ranker.serving.model_bundle import load_bundle
    from dialogue_ranker.training.recover import dequantized_ranker
    from dialogue_ranker.training.shared_prefix import score_requests

    bundle = load_bundle(model_dir)
    model, moved = dequantized_ranker(model_dir, head="cosine")
    assert moved["weights"] > 20_000_000 and 0.9 * moved["weights"] < moved["quantized"] < moved["weights"]
    encoder = bundle.pair_encoder()
    assert isinstance(encoder, ListEncoder)
    requests = [encoder.encode_request(*r) for r in REQUESTS]
    torch_logits = score_requests(model.eval(), encoder, requests, torch.device("cpu"))
    graph_logits = score_sequences(session(bundle.ranker.path), encoder, requests)
    for ours, shipped in zip(torch_logits, graph_logits, strict=True):
        # The graph also quantizes activations (per token and block): close, not equal.
        assert int(np.argmax(ours)) == int(np.argmax(shipped)), (ours, shipped)
        assert np.abs(np.asarray(ours) - np.asarray(shipped)).max() < 0.3, (ours, shipped)


def test_fp16_weights_keep_a_move_smaller_than_an_int8_step(tmp_path):
    """A stage on top of an int8 graph moves weights by less than a step: fp16 keeps it, int8 does not."""
    from dialogue_ranker.evaluation.scoring import score_sequences, session
    from dialogue_ranker.export import quantize
    from dialogue_ranker.export.graph_variants import export_fp32

    encoder, requests = _encoder_and_requests()
    before, after = _ranker(0), _ranker(0)
    with torch.no_grad():  # a small push on every matrix, a stage's worth (the situation stage: <= 8e-4)
        for name, p in after.named_parameters():
            if p.dim() == 2 and "embeddings" not in name:
                p.add_(4e-4 * torch.sign(torch.randn_like(p)))

    def graphs(model, stem):
        fp32 = export_fp32(model, tmp_path / f"{stem}.onnx", encoder)
        half = quantize.fp16_weights(fp32, tmp_path / f"{stem}-fp16.onnx")
        blocks = quantize.blockwise_int8(fp32, tmp_path / f"{stem}-int8.onnx")
        return [np.concatenate(score_sequences(session(g), encoder, requests)) for g in (fp32, half, blocks)]

    (fp32_0, half_0, int8_0), (fp32_1, half_1, int8_1) = graphs(before, "before"), graphs(after, "after")
    assert (tmp_path / "after-fp16.onnx").stat().st_size < 0.6 * (tmp_path / "after.onnx").stat().st_size
    moved = np.abs(fp32_1 - fp32_0)
    assert moved.max() > 0.05  # the push changes the scores
    half_error = np.abs((half_1 - half_0) - (fp32_1 - fp32_0)).max()
    int8_error = np.abs((int8_1 - int8_0) - (fp32_1 - fp32_0)).max()
    assert half_error < 0.25 * moved.max() and half_error < int8_error, (half_error, int8_error, moved.max())
    assert np.abs(half_1 - fp32_1).max() < 0.02 * np.abs(fp32_1).max()  # the int8 embeddings' share


def test_zero_point_blocks_keep_a_move_the_start_s_symmetric_grid_rounds_back(tmp_path):
    """A stage trained on from a symmetric int8 graph starts on its grid: only another grid keeps the move.

    The weights are read back from a symmetric blockwise graph (as ``ranker train --init-bundle``
    reads the shipped one) and moved by less than half a step. Quantized symmetrically again, most
    weights return to where they started and the move is lost; blocks with zero points (another
    grid) keep it, within their own rounding. The read-back of the zero-point graph holds the moved
    weights (so a stage on top of it starts where it scores).
    """
    import json

    from dialogue_ranker.export import quantize
    from dialogue_ranker.export.graph_variants import export_fp32
    from dialogue_ranker.training.recover import dequantized_ranker, graph_weights

    encoder, _ = _encoder_and_requests()
    bundle = tmp_path / "start"
    bundle.mkdir()
    quantize.blockwise_int8(export_fp32(_ranker(0), tmp_path / "s.onnx", encoder), bundle / "model.onnx")
    (bundle / "metadata.json").write_text(json.dumps({"ranker": {"file": "model.onnx"}}))
    model = dequantized_ranker(bundle, head="cosine")[0].eval()
    start = {n: p.detach().numpy().copy() for n, p in model.named_parameters()}
    moves = {}
    with torch.no_grad():  # a stage's worth (2.9.0's: at most 8e-4), under half a step here
        for name, p in model.named_parameters():
            if p.dim() == 2 and "embeddings" not in name:
                moves[name] = torch.empty_like(p).uniform_(-4e-4, 4e-4)
                p.add_(moves[name])
    moved = export_fp32(model, tmp_path / "m.onnx", encoder)
    graphs = {
        "symmetric": graph_weights(quantize.blockwise_int8(moved, tmp_path / "sym.onnx")),
        "zero points": graph_weights(quantize.blockwise_int8(moved, tmp_path / "zp.onnx", symmetric=False)),
    }
    kept, back = {}, {}
    for grid, cells in graphs.items():
        got, want, returned = [], [], []
        for name, move in moves.items():
            low, high = (bound.reshape(move.shape) for bound in cells[name])
            middle = (low + high) / 2
            got.append((middle - start[name]).ravel())
            want.append(move.numpy().ravel())
            returned.append((np.abs(middle - start[name]) < 0.25 * (high - low)).ravel())
            if grid == "zero points":  # each moved weight lies in its cell
                weight = start[name] + move.numpy()
                assert np.all((weight >= low - 1e-6) & (weight <= high + 1e-6)), name
        kept[grid] = np.corrcoef(np.concatenate(got), np.concatenate(want))[0, 1]
        back[grid] = np.concatenate(returned).mean()  # share within a quarter step of the start
    # Measured: symmetric 0.97 of the weights back at the start, the move's correlation 0.18;
    # zero points 0.50 and 0.50 (the rest is their own rounding, as any int8 graph's).
    assert back["symmetric"] > 0.9 and kept["symmetric"] < 0.3, (back, kept)
    assert back["zero points"] < 0.7 and kept["zero points"] > 0.4, (back, kept)


@pytest.mark.parametrize("variant", ["fp32", "fp16_weights"])
def test_a_bundle_with_unquantized_matrices_reads_back_as_the_graph_scores(tmp_path, variant):
    """``--init-bundle``, ``ranker adapt``, teachers: an fp32 or fp16-weight graph's weights come back.

    Its matrices reach a ``MatMul`` as an fp32 initializer or through a ``Cast`` from fp16; each
    trained weight must lie in its cell, and the model read back must score as the graph does.
    """
    import json

    from dialogue_ranker.evaluation.scoring import score_sequences, session
    from dialogue_ranker.export import quantize
    from dialogue_ranker.export.graph_variants import export_fp32
    from dialogue_ranker.training.recover import dequantized_ranker, graph_weights
    from dialogue_ranker.training.shared_prefix import score_requests

    encoder, requests = _encoder_and_requests()
    trained = _ranker(0, noise=1e-3)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    fp32 = export_fp32(trained, tmp_path / "fp32.onnx", encoder)
    graph = fp32 if variant == "fp32" else quantize.fp16_weights(fp32, tmp_path / "half.onnx")
    (bundle / "model.onnx").write_bytes(graph.read_bytes())
    (bundle / "metadata.json").write_text(json.dumps({"ranker": {"file": "model.onnx"}}))

    cells = graph_weights(bundle / "model.onnx")
    for name, p in trained.named_parameters():
        if "embeddings" in name:  # int8 tables in the fp16 variant, checked by the blockwise tests
            continue
        low, high = (bound.reshape(p.shape) for bound in cells[name])
        weight = p.detach().numpy()
        assert np.all((weight >= low - 1e-7) & (weight <= high + 1e-7)), name
    model, counts = dequantized_ranker(bundle, head="cosine")
    ours = np.concatenate(score_requests(model.eval(), encoder, requests, torch.device("cpu")))
    graph_logits = np.concatenate(score_sequences(session(bundle / "model.onnx"), encoder, requests))
    assert np.abs(ours - graph_logits).max() < 1e-3, np.abs(ours - graph_logits).max()
    assert (counts["quantized"] == 0) == (variant == "fp32"), counts
