"""``ranker``: one command for serving, data, training, export and evaluation.

``ranker serve`` takes the service's flags (every setting, see ``ranker serve --help``); each other
subcommand is a module's own ``main(argv)`` with its own ``--help``. A subcommand's module is
imported only when it runs, so ``ranker serve`` never imports torch, and an install without the
``train`` extra (the Docker image) still serves.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import NamedTuple


class Command(NamedTuple):
    """A subcommand: the module whose ``main(argv)`` runs it, and one line of help."""

    module: str
    summary: str


COMMANDS: dict[str, Command] = {
    "serve": Command("dialogue_ranker.serving.__main__", "serve models over HTTP (the service)"),
    "bank-cache": Command(
        "dialogue_ranker.serving.bank_cache", "embed the --bank files once and write their vector cache"
    ),
    "convert": Command("dialogue_ranker.training.convert", "turn a public dataset into ranking lists"),
    "train": Command("dialogue_ranker.training.train", "train a shared-prefix ranker on ranking lists"),
    "train-retriever": Command(
        "dialogue_ranker.training.dual_encoder", "train the banks' retrieval encoder (a dual encoder)"
    ),
    "interpolate": Command("dialogue_ranker.training.interpolate", "average runs' weights (a soup)"),
    "recipe": Command("dialogue_ranker.recipes.cli", "run a training recipe (TOML), stage by stage"),
    "export": Command("dialogue_ranker.export.__main__", "export a run to a served bundle (ONNX)"),
    "export-retriever": Command(
        "dialogue_ranker.export.retriever", "export a sentence encoder as the banks' retrieval encoder (ONNX)"
    ),
    "export-hf": Command("dialogue_ranker.export.hf", "export a Hugging Face cross-encoder to a bundle"),
    "samples": Command("dialogue_ranker.export.samples", "add sample sequences with fp32 logits to a bundle"),
    "calibrate-runtimes": Command(
        "dialogue_ranker.export.runtime_calibration", "fit a bundle's calibration map per runtime (OpenVINO)"
    ),
    "calibrate": Command(
        "dialogue_ranker.export.calibrate", "fit a bundle's map and threshold on your lists (a new bundle)"
    ),
    "adapt": Command(
        "dialogue_ranker.adapt.cli",
        "your lists to a fine-tuned, exported, calibrated bundle and a report (one command)",
    ),
    "card": Command("dialogue_ranker.export.card", "write a bundle's model card from its files"),
    "evaluate": Command("dialogue_ranker.training.evaluate_run", "evaluate a bundle (or a run) per domain"),
    "statement-effect": Command(
        "dialogue_ranker.training.statement_effect", "a bundle's P@1 with and without statements, per domain"
    ),
    "evaluate-sugar": Command("dialogue_ranker.evaluation.sugar_protocol", "SUGAR by the paper's protocol"),
    "evaluate-bank": Command(
        "dialogue_ranker.evaluation.bank_eval", "retrieval, ranker and fused scores on dev banks (--write)"
    ),
    "compare": Command("dialogue_ranker.evaluation.compare_runs", "compare training runs' dev metrics"),
    "release-check": Command(
        "dialogue_ranker.evaluation.release_check",
        "gate a candidate bundle against the shipped one, set by set",
    ),
    "triton-repo": Command("dialogue_ranker.export.triton_repo", "write a Triton model repository"),
    "triton-local": Command("dialogue_ranker.export.triton_local", "run a local Triton (PyTriton) on CPU"),
    "docs": Command("dialogue_ranker.docs_gen", "write the generated reference pages of the docs"),
    "bench": Command(
        "dialogue_ranker.bench.cli", "this CPU's speed: default service vs --backend onnx vs a CrossEncoder"
    ),
}


def usage() -> str:
    """The top-level help: every subcommand and its summary."""
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: ranker COMMAND [ARGS...]   (ranker COMMAND --help for its flags)", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {command.summary}" for name, command in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Dispatch to the subcommand's module; exit 2 on an unknown one."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return
    name, rest = args[0], args[1:]
    command = COMMANDS.get(name)
    if command is None:
        print(f"ranker: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        sys.exit(2)
    try:
        module = importlib.import_module(command.module)
    except ModuleNotFoundError as e:
        # The serving-only install (the Docker image) has neither torch nor the training modules.
        sys.exit(f"ranker {name}: needs {e.name!r}, which this install lacks (pip install '.[train]')")
    # Each module's parser names itself in --help and errors as ``ranker NAME``.
    sys.argv[0] = f"ranker {name}"
    module.main(rest)


if __name__ == "__main__":
    main()
