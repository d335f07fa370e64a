"""``ranker export``'s flags, and the checks on them that need nothing but the flags.

The parser's description is the entry module's docstring (:mod:`dialogue_ranker.export.shared_prefix`).
"""

from __future__ import annotations

import argparse

from dialogue_ranker.export import view_fit

#: The graphs the export can build, in the order it builds them.
VARIANTS = (
    "fp32",
    "int8_dynamic",
    "int8_blockwise",
    "int8_blockwise_asymmetric",
    "int8_static",
    "fp16_weights",
)


def build_parser(description: str | None) -> argparse.ArgumentParser:
    """``ranker export``'s parser; ``description`` is its ``--help`` text (the entry module's docstring)."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", required=True, help="training run directory (ranker train --out)")
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--build", default=None, help="where intermediate graphs go (default build/<run name>)")
    p.add_argument("--name", default="dialogue-minilm-l6")
    p.add_argument("--version", default="2.10.0")
    p.add_argument("--max-p1-loss", type=float, default=0.01, help="dev P@1 a quantised graph may lose")
    p.add_argument(
        "--max-logit-error",
        type=float,
        default=None,
        help="largest logit difference from fp32 a graph may have on the dev sample (default: not checked, "
        "only --max-p1-loss)",
    )
    p.add_argument(
        "--max-mb",
        type=float,
        default=60.0,
        help="largest graph that may ship (repository budget; fp32 is about 87 MB: --max-mb 100 ships it)",
    )
    p.add_argument("--speed-requests", type=int, default=120, help="situated dev requests timed per graph")
    p.add_argument(
        "--threshold-on",
        default=None,
        help="comma-separated training files, of any stage, whose dev lists choose the abstention "
        "threshold (default: the files the calibration map is fitted on)",
    )
    p.add_argument(
        "--threshold-from",
        default=None,
        metavar="BUNDLE",
        help="keep this bundle's abstention threshold (a calibrated probability, e.g. the shipped model's) "
        "instead of choosing one; excludes --threshold-on",
    )
    p.add_argument(
        "--calibrate-on",
        default=None,
        help="comma-separated training files of the run's own stage whose dev lists fit the "
        "calibration map (default: every file of the run)",
    )
    p.add_argument(
        "--similarity",
        action="store_true",
        help="add the untrained encoder's reply-to-turn cosine to each logit (training/similarity.py), "
        "its weight fitted on the dev lists that choose the threshold",
    )
    p.add_argument(
        "--ensemble-with",
        default=None,
        metavar="RUN:W",
        help="an output ensemble: this run's token logits at 1 - W plus RUN's at W, one graph "
        "(training/ensemble.py); calibration and threshold are fitted on it",
    )
    p.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="comma-separated graphs to build and measure (fp32 is always built: the reference)",
    )
    p.add_argument(
        "--dev-lists",
        type=int,
        default=None,
        help="dev lists per file for the checks, calibration and threshold (default: as many as the run "
        "scored; more where it scored few to save a lent machine's time; the same seeded sample order)",
    )
    p.add_argument(
        "--last-turn-weight",
        type=float,
        default=None,
        help="score a multi-turn request with its last turn alone too, that view's logit averaged in "
        "at this weight (service/context_views.py; 0: one view; default: the base bundle's, see "
        "--serving-from, else 0)",
    )
    p.add_argument(
        "--prior-weight",
        type=float,
        default=None,
        help="score a multi-turn request's candidates with no context too (the reply's prior), that "
        "logit's difference from its mean on the dev lists' multi-turn candidates added at this weight "
        "(service/context_views.py; 0: no such view; default: the base bundle's, see --serving-from, "
        "else 0)",
    )
    p.add_argument(
        "--fit-views-on",
        default=None,
        metavar="FILES",
        help="comma-separated training files of the run whose dev lists choose the context views' "
        "weights from a small grid, the given ones (flags or base bundle) kept on a tie "
        "(export/view_fit.py); default: the given ones as they are",
    )
    p.add_argument(
        "--views-hold",
        default=None,
        metavar="FILES",
        help="with --fit-views-on: comma-separated training files whose dev P@1 a fitted point may "
        f"lower by at most {view_fit.MAX_HOLD_DROP:g} against the given weights (ranker adapt names "
        "its replay files)",
    )
    p.add_argument(
        "--serving-from",
        default=None,
        metavar="BUNDLE",
        help="the bundle whose serving settings (context views) the export takes over where "
        "--last-turn-weight/--prior-weight are not given (default: the bundle the run was fine-tuned "
        "from with ranker train --init-bundle, if any; export/base_serving.py)",
    )
    p.add_argument(
        "--accept-loss",
        action="store_true",
        help="ship the most accurate graph within --max-mb even when it misses the accuracy rule "
        "(--max-p1-loss, --max-logit-error), its loss printed; without it such an export fails",
    )
    return p


def variants_to_build(text: str) -> list[str]:
    """``--variants`` as graph names, fp32 first (always built: the reference); exits on an unknown one."""
    variants = ["fp32", *(v for v in text.split(",") if v != "fp32")]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        raise SystemExit(f"--variants {','.join(unknown)}: no such graph (have: {', '.join(VARIANTS)})")
    return variants
