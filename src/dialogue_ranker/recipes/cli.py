"""``ranker recipe``: run a training recipe (TOML) stage by stage, or show where it stands.

    ranker recipe run recipes/dialogue-minilm-l6-cpu.toml            # resumes where it stopped
    ranker recipe run recipes/dialogue-minilm-l6-2.8.0.toml --dry-run
    ranker recipe run RECIPE.toml --from bundle                      # export and what follows again
    ranker recipe run RECIPE.toml --allow-slow                       # GPU stages on the CPU
    ranker recipe show RECIPE.toml                                   # stages, where each runs, status

The recipe format is :mod:`dialogue_ranker.recipes.schema`; how stages run and resume is
:mod:`dialogue_ranker.recipes.runner`. Exit status: 0 done, 1 a stage failed, 2 a bad recipe or
option, 3 refused (a GPU stage on a machine without one).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dialogue_ranker.recipes.runner import Plan, Runner
from dialogue_ranker.recipes.schema import RecipeError


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """``run RECIPE [--from STAGE] [--dry-run] [--allow-slow]`` or ``show RECIPE``."""
    parser = argparse.ArgumentParser(
        prog="ranker recipe", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="action", required=True)
    run = sub.add_parser("run", help="run the recipe's pending stages in order")
    run.add_argument("recipe", type=Path)
    run.add_argument(
        "--from",
        dest="start_from",
        metavar="STAGE",
        help="run from this stage on, even if done (the stages before it must be done)",
    )
    run.add_argument("--dry-run", action="store_true", help="print what would run, run nothing")
    run.add_argument(
        "--allow-slow",
        action="store_true",
        help="run gpu stages on the CPU when there is no CUDA GPU (hours, say the estimates)",
    )
    show = sub.add_parser("show", help="print the stages, where each runs and whether it is done")
    show.add_argument("recipe", type=Path)
    return parser.parse_args(argv)


def show(plan: Plan) -> None:
    """Print the recipe's stages: kind, where each runs, its estimate and its status."""
    recipe = plan.recipe
    print(f"recipe {recipe.name} {recipe.version}: {plan.path}\noutput {plan.out}")
    rows = [
        (step.name, step.kind, step.runs_on, step.estimate or "-", status) for step, status in plan.statuses()
    ]
    header = ("stage", "kind", "runs on", "estimate", "status")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def main(argv: list[str] | None = None) -> None:
    """``ranker recipe``; exits 1 when a stage failed, 2 on a bad recipe, 3 when refused."""
    args = parse_args(argv)
    try:
        plan = Plan(args.recipe)
        if args.action == "show":
            show(plan)
            return
        code = Runner(plan).run(start_from=args.start_from, dry_run=args.dry_run, allow_slow=args.allow_slow)
    except RecipeError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    if code:
        raise SystemExit(code)


if __name__ == "__main__":
    main()
