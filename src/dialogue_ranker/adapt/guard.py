"""The forgetting guard: what keeps the adapted model ranking what the base model ranked.

A fine-tune on one team's lists drifts from what the base knew; the guard holds the drop in ranking
on the regression suite (:mod:`dialogue_ranker.adapt.regression`) to :data:`MAX_DROP`. Guards:

- ``replay``: the base's own training lists mixed into every round with their labels (their train
  split only: the suite reads their test split);
- ``distill``: the same lists learnt from the base bundle's outputs instead of their labels (the
  bundle is ``ranker train --teacher`` on them, ``--distill-replaces-labels``): where the base put
  them, not where their labels would now pull the adapted model;
- ``both``: each replay list learns its labels and the base's outputs, half each
  (``--distill-weight 0.5``);
- ``none``: the team's lists alone.

Beside any of them, ``--team-teacher SHARE`` has the base teach the team's own lists too: each
learns ``(1 - SHARE) x`` its labels ``+ SHARE x`` the base's outputs (learning without forgetting,
Li and Hoiem, ECCV 2016), the one guard that reaches the lists every step trains on.
``--keep-top MARGIN`` adds to wherever the base teaches a hinge that keeps its right top-1 replies
MARGIN logits ahead of the best wrong one (:func:`dialogue_ranker.training.distill.keep_top_loss`).

Replay reads only data the base may have been trained on and a model may ship with: by default the
regression suite's lists files that are present and whose dataset the project knows the licence of
(SUGAR, Topical-Chat, the project's written situations: what 2.10.0 trained on). DailyDialog++
(CC BY-NC-SA) is never replayed. ``--replay FILE[:WEIGHT]`` names files instead; WEIGHT is the
file's lists per list of the team's (default :data:`REPLAY_WEIGHT`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dialogue_ranker.data.ranking_data import DataError
from dialogue_ranker.export.run_stages import dataset_of

GUARDS = ("both", "replay", "distill", "none")
#: The largest drop in a ranking metric of the regression suite the guard is there to prevent.
MAX_DROP = 0.02
#: A replay file's lists per list of the team's, by default: four such files make the replay about
#: 44% of the lists trained on. At 0.1 a file (29%) runs 17 to 30 broke the guard; at 0.2 runs 32
#: and 33 held it, run 33 with 41.5% of the lift in 30 minutes on a Zen 4
#: (docs/research/2026-12-06-attention-dropout.md).
REPLAY_WEIGHT = 0.2
#: The name ``ranker train`` gives the team's lists (their file's stem).
TEAM = "team"
#: Where ``--distill-weight`` puts ``both``: labels and the base's outputs, half each.
BOTH_WEIGHT = 0.5
NON_COMMERCIAL = ("dailydialog", "ddpp")


@dataclass(frozen=True)
class Replay:
    """A replay file: its name (as ``ranker train`` names it), path, weight and licence."""

    name: str
    path: Path
    weight: float
    license: str

    def to_dict(self) -> dict[str, str | float]:
        """The lineage entry."""
        return {"name": self.name, "file": self.path.name, "weight": self.weight, "license": self.license}


def replay_of(path: Path, weight: float = REPLAY_WEIGHT) -> Replay:
    """A replay file, its licence looked up by name or by its lists' groups.

    Raises:
        DataError: non-commercial data (DailyDialog++), or a file named as the team's lists are.
    """
    name = path.stem
    _, license, _ = dataset_of(name, path)
    if any(word in name.lower() for word in NON_COMMERCIAL):
        raise DataError(f"--replay {path}: DailyDialog++ is CC BY-NC-SA, evaluation only: never trained on")
    if name == TEAM:
        raise DataError(f"--replay {path}: the name {TEAM!r} is the team's lists'; rename the file")
    return Replay(name, path, weight, license)


def parse_replay(text: str) -> Replay:
    """``--replay FILE[:WEIGHT]`` (WEIGHT: the file's lists per list of the team's)."""
    path, sep, weight = text.rpartition(":")
    if not sep:
        path, weight = text, ""
    try:
        value = float(weight) if weight else REPLAY_WEIGHT
    except ValueError:
        raise argparse.ArgumentTypeError(f"--replay takes FILE[:WEIGHT], got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"--replay weight must be positive, got {text!r}")
    try:
        return replay_of(Path(path), value)
    except DataError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def default_replay(files: Sequence[Path]) -> tuple[list[Replay], list[str]]:
    """The replay files among the regression suite's ``files``, and a note on each one left out.

    Kept: present, not non-commercial, of a dataset whose licence the project knows.
    """
    kept, notes = [], []
    for path in dict.fromkeys(files):
        if not path.is_file():
            notes.append(f"{path}: absent (the recipe's data stage writes it)")
            continue
        try:
            replay = replay_of(path)
        except DataError as e:
            notes.append(str(e))
            continue
        if replay.license == "?":
            notes.append(f"{path}: its dataset's licence is unknown here: not replayed")
            continue
        kept.append(replay)
    return kept, notes


def distills(guard: str) -> bool:
    """Whether the guard has the base bundle teach the replay lists."""
    return guard in ("distill", "both")


def train_flags(guard: str, base: Path, replay: Sequence[Replay], team_share: float = 0.0) -> list[str]:
    """``ranker train``'s flags for the guard's teacher (the replay files are ``--data`` entries).

    ``team_share``: the base's outputs' share of the team's own lists' targets (``ranker adapt
    --team-teacher``; 0: their labels alone). Given, every taught file gets its share by name, each
    list counting once (``ranker train --distill-on NAME:SHARE``): the replay's lists keep the mix
    the guard gives them (``both``: half each; ``distill``: the base's alone).

    Raises:
        DataError: a guard that needs replay files when there are none.
    """
    if guard in ("replay", "distill", "both") and not replay:
        raise DataError(
            f"--guard {guard} needs replay files: name them with --replay FILE, or make the regression "
            "suite's files (its comment says how), or pass --guard none"
        )
    if team_share > 0:
        replay_share = {"both": BOTH_WEIGHT, "distill": 1.0}.get(guard)
        taught = [f"{r.name}:{replay_share:g}" for r in replay] if replay_share is not None else []
        return ["--teacher", f"{base}:1", *sum((["--distill-on", t] for t in taught), []),
                "--distill-on", f"{TEAM}:{team_share:g}"]  # fmt: skip
    if not distills(guard):
        return []
    flags = ["--teacher", f"{base}:1"]
    for r in replay:
        flags += ["--distill-on", r.name]
    if guard == "distill":
        return [*flags, "--distill-replaces-labels"]
    return [*flags, "--distill-weight", str(BOTH_WEIGHT)]
