"""Taskmaster-3/4's human-rated agent turns as pointwise ranking lists, for calibration.

Each row is a context and one agent turn a person rated good (reward 1.0) or bad (0.0). Rows with
the same context (the same turns, API calls and results) make one list, its candidates the rated
turns with their reward as a probability label (``generator`` ``rated``); most contexts have one
rated turn, so most lists have one candidate: pointwise data that suits calibration (the share of
good turns among those scored p should be p) more than listwise ranking. A row whose generation is
an API call rather than a reply is left out: the service ranks replies. The API results in the
context are what the agent knows: they are the situations, latest first, rendered as
:func:`.taskmaster.render_api_response` renders them; the agent's calls are left out of the turns.

Contexts of one dialogue must stay in one split, and the files name no dialogue (each row has its
own ``conversation_id``): a context that begins with another context (up to at least one user
turn) is taken for the same dialogue, and a group is each set of contexts so joined
(``taskmaster-reward-<file>-<first conversation id>``), split by the project's group split.
CC BY 4.0: a model trained or calibrated on it may ship, with attribution.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from dialogue_ranker.data.ranking_data import Candidate, RankingList
from dialogue_ranker.serving.tokenization import Turn
from dialogue_ranker.training.converters.dialogue_lists import MAX_CONTEXT_TURNS
from dialogue_ranker.training.converters.sgd import read_jsonl_gz
from dialogue_ranker.training.converters.taskmaster import MAX_SITUATIONS, render_api_response

REWARD_FILES = ("tm3_reward.jsonl.gz", "tm4_reward.jsonl.gz")


def context_key(turns: list[dict]) -> tuple[str, ...]:
    """A context's turns as comparable strings (key order and spacing ignored)."""
    return tuple(json.dumps(t, sort_keys=True) for t in turns)


def dialogue_groups(keys: list[tuple[str, ...]]) -> list[int]:
    """Per context, the index of its group's root: contexts that begin with another are joined.

    The shared beginning must hold a user turn: every context opens with the agent's same welcome.
    """
    first = {}
    for i, key in enumerate(keys):
        first.setdefault(key, i)
    parent = list(range(len(keys)))

    def root(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for i, key in enumerate(keys):
        seen_user = False
        for n in range(1, len(key) + 1):
            seen_user = seen_user or json.loads(key[n - 1]).get("role") == "user"
            if seen_user and key[:n] in first:
                parent[root(i)] = root(first[key[:n]])
    return [root(i) for i in range(len(keys))]


def context_of(turns: list[dict]) -> tuple[tuple[Turn, ...], tuple[str, ...]]:
    """The text turns (the agent as ``bot``) and the API results as statements, latest first."""
    spoken, results = [], []
    for t in turns:
        if t.get("role") in ("agent", "user") and str(t.get("text", "")).strip():
            spoken.append(Turn("bot" if t["role"] == "agent" else "user", " ".join(str(t["text"]).split())))
        elif t.get("role") == "api" and isinstance(t.get("response"), dict):
            results.extend(render_api_response(name, value) for name, value in t["response"].items())
    situations = tuple(dict.fromkeys(reversed(results)))[:MAX_SITUATIONS]
    return tuple(spoken[-MAX_CONTEXT_TURNS:]), situations


def reward_lists(path: Path) -> Iterator[RankingList]:
    """One reward file's rated replies, one list per distinct context (see the module doc)."""
    rows = [r for r in read_jsonl_gz(path) if "text" in json.loads(r["generation"])]
    contexts = [json.loads(r["context"]) for r in rows]
    keys = [context_key(c) for c in contexts]
    roots = dialogue_groups(keys)
    names: dict[int, str] = {}
    for i, root in enumerate(roots):
        names[root] = min(names.get(root, rows[i]["conversation_id"]), rows[i]["conversation_id"])
    by_context: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        by_context[key].append(i)
    source = path.name.split("_")[0]
    for members in by_context.values():
        turns, situations = context_of(contexts[members[0]])
        if not turns:
            continue
        candidates, seen = [], set()
        for i in members:
            text = " ".join(str(json.loads(rows[i]["generation"])["text"]).split())
            if text and text.lower() not in seen:
                seen.add(text.lower())
                candidates.append(Candidate(text, float(rows[i]["reward"]), "rated"))
        if candidates:
            group = f"taskmaster-reward-{source}-{names[roots[members[0]]]}"
            yield RankingList(context=turns, situations=situations, candidates=tuple(candidates), group=group)


def convert_taskmaster_reward(source: Path) -> Iterator[RankingList]:
    """The rated turns of ``source``: a reward file, or a folder with :data:`REWARD_FILES`."""
    paths = [source / name for name in REWARD_FILES] if source.is_dir() else [source]
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such reward file")
        yield from reward_lists(path)
