"""The serving settings a run fine-tuned from a bundle takes over from it, unless flags say otherwise.

A run started from a shipped bundle (``ranker train --init-bundle DIR``, at any earlier stage)
records the bundle under its first stage's ``bundle`` (:func:`training.shared_prefix.bundle_run_config`).
Its export takes that bundle's context views (``views`` in ``metadata.json``: the last-turn and
prior weights) as the defaults of ``--last-turn-weight`` and ``--prior-weight``: the fine-tune was
trained from a model served so, and 2.10.0 ships at 0.5 and 0.2, which the export's own defaults
of 0 silently dropped. ``--serving-from BUNDLE`` names the bundle for a run that does not record
one (or records one that has moved); an explicit ``--last-turn-weight``/``--prior-weight`` wins
over either. The prior's centre is re-fitted on the run's dev lists (it follows the new weights'
logits); where they have no multi-turn request to fit it on, the bundle's centre is kept.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dialogue_ranker.export.run_stages import training_stages
from dialogue_ranker.serving.context_views import ViewWeights
from dialogue_ranker.serving.model_bundle import METADATA_FILE, BundleError, load_bundle


def recorded_bundle(config: dict[str, Any]) -> Path | None:
    """The bundle the run's latest ``--init-bundle`` stage started from (None: it started from none)."""
    for stage in reversed(training_stages(config)):
        if stage.get("bundle"):
            return Path(stage["bundle"]["path"])
    return None


def base_views(bundle: Path) -> ViewWeights:
    """A bundle's context views, as the service reads them.

    Raises:
        SystemExit: the directory is not a model bundle (named, with the flags that stand in for it).
    """
    if not (bundle / METADATA_FILE).is_file():
        raise SystemExit(
            f"the run started from the bundle {bundle}, which is not here: pass --serving-from BUNDLE, "
            "or --last-turn-weight and --prior-weight"
        )
    try:
        return load_bundle(bundle).views
    except BundleError as e:
        raise SystemExit(f"--serving-from {bundle}: {e}") from e


def resolve_views(args: argparse.Namespace, config: dict[str, Any]) -> dict[str, Any] | None:
    """Fill ``args.last_turn_weight``/``args.prior_weight`` (None: not given) from the base bundle.

    Sets ``args.base_prior_centre`` (the bundle's centre, or None) for dev lists with no multi-turn
    request. Returns what the report records under ``serving_from`` (None: no base bundle used).
    """
    args.base_prior_centre = None
    explicit = args.last_turn_weight is not None and args.prior_weight is not None
    bundle = Path(args.serving_from) if args.serving_from else recorded_bundle(config)
    if bundle is None or (explicit and not args.serving_from):
        args.last_turn_weight = args.last_turn_weight or 0.0
        args.prior_weight = args.prior_weight or 0.0
        return None
    views = base_views(bundle)
    taken = {}
    if args.last_turn_weight is None:
        args.last_turn_weight = taken["last_turn_weight"] = views.last_turn
    if args.prior_weight is None:
        args.prior_weight = taken["prior_weight"] = views.prior
    if views.prior > 0:
        args.base_prior_centre = views.prior_centre
    source = "--serving-from" if args.serving_from else "the bundle the run started from"
    print(f"serving settings from {bundle} ({source}): {taken or 'none taken (flags given)'}", flush=True)
    return {"bundle": str(bundle), "how": source, "taken": taken}
