"""Taskmaster-4 coffee-ordering dialogues as ranking lists, the API results the assistant has as situations.

One list per assistant turn (from the second turn on): the true turn (label 1) against the negatives
of :mod:`.dialogue_lists`. The API calls of a dialogue are annotated on the user turn after which
they ran; their results are what the assistant knows from then on, so each list's situations are
the results returned before its turn, latest first, rendered as short statements
(:func:`render_api_response`: "get order details: Name: four of diamonds; Order Type: here; Chai
Latte"). ``contradicted`` swaps a value the reply repeats from the conversation or a result (a
drink, a milk, a size, the order's name, a count) for another of its kind: the kinds are the menu's
(the options ``get_addons`` lists, the drinks ``get_menu_items`` finds, the attributes an order's
details give). Split by dialogue with the project's group split (group ``taskmaster-<id>``).
CC BY 4.0: a model trained on it may ship, with attribution.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from dialogue_ranker.data.ranking_data import RankingList
from dialogue_ranker.training.converters.contradicted_replies import ValueSwapper
from dialogue_ranker.training.converters.dialogue_lists import Dialogue, Reply, contradict_by, dialogue_lists
from dialogue_ranker.training.converters.sgd import read_jsonl_gz

TASKMASTER_NEGATIVES = {"retrieved": 4, "earlier": 1, "later": 2, "contradicted": 1, "random": 1}
#: API results given as situations, latest first (a dialogue makes up to about 10 calls).
MAX_SITUATIONS = 6
#: Keys that are identifiers: never said to a customer, so left out of the statements.
_ID_SUFFIXES = ("_id", "id")


def _leaves(value: object) -> list[str]:
    """The readable parts of a JSON value: ``attribute: option`` pairs, names, ``key: value``."""
    if isinstance(value, list):
        return [part for item in value for part in _leaves(item)]
    if not isinstance(value, dict):
        return [str(value)] if str(value).strip() else []
    label = value.get("attribute_name") or value.get("name")
    if "option" in value or "options" in value:
        options = value.get("options", value.get("option"))
        shown = ", ".join(map(str, options)) if isinstance(options, list) else str(options)
        return [f"{label or value.get('attribute_id', 'option')}: {shown}"]
    parts = []
    for key, item in value.items():
        if key.lower().endswith(_ID_SUFFIXES) or key in ("attribute_name",):
            continue
        if key in ("name", "menu_item_name"):
            parts.append(str(item))
        elif isinstance(item, (dict, list)):
            parts.extend(_leaves(item))
        else:
            parts.append(f"{key.split('.')[-1].replace('_', ' ')}: {item}")
    return parts


def render_api_response(name: str, response: object) -> str:
    """One API result as a statement: ``"<call, in words>: <its readable parts>"``.

    ``response`` is the parsed JSON or, where the annotators' JSON does not parse, its text.
    A result with no readable part (only identifiers) reads ``"<call>: done"``.
    """
    if isinstance(response, str):
        try:
            response = json.loads(response)
        except json.JSONDecodeError:
            response = " ".join(response.split())
    if isinstance(response, dict) and set(response) == {"success"}:
        parts = ["succeeded" if response["success"] else "failed"]
    else:
        parts = _leaves(response) or ["done"]
    return f"{name.replace('_', ' ')}: {'; '.join(parts)}"


def api_results(annotations: list[dict]) -> list[tuple[str, object]]:
    """The ``(call, parsed result)`` pairs of one utterance's annotations, in call order."""
    names, responses = {}, {}
    for a in annotations:
        where = str(a.get("context", ""))
        if a.get("name") == "api_response":
            names[where] = str(a.get("value", ""))
        elif a.get("name") == "response":
            try:
                responses[where] = json.loads(a.get("value", ""))
            except json.JSONDecodeError:
                responses[where] = str(a.get("value", ""))
    return [(names[k], responses[k]) for k in names if k in responses]


def menu_phrases(results: list[tuple[str, object]]) -> dict[str, set[str]]:
    """The kinds of value an order names, from its results: each attribute's options, drink names."""
    phrases: dict[str, set[str]] = defaultdict(set)

    def walk(value: object) -> None:
        if isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            label = str(value.get("attribute_name") or value.get("attribute_id") or "")
            options = value.get("options", value.get("option"))
            if label and options is not None:
                for option in options if isinstance(options, list) else [options]:
                    phrases[label.lower()].add(str(option))
            for key in ("name", "menu_item_name"):
                if isinstance(value.get(key), str) and not label:
                    phrases["drink"].add(value[key])
            for item in value.values():
                walk(item)

    for _, response in results:
        walk(response)
    return phrases


def read_taskmaster(path: Path) -> tuple[list[Dialogue], dict[str, set[str]]]:
    """The file's dialogues, with API results as situations, and the menu's kinds of value."""
    dialogues, phrases = [], defaultdict(set)
    for row in read_jsonl_gz(path):
        turns, replies, known = [], [], []
        for u in row["utterances"]:
            text = " ".join(str(u.get("text", "")).split())
            if text:
                if u["speaker"] == "assistant" and turns:
                    shown = list(dict.fromkeys(reversed(known)))[:MAX_SITUATIONS]
                    replies.append(Reply(len(turns), tuple(shown)))
                turns.append((str(u["speaker"]), text))
            results = api_results(u.get("annotations") or [])
            known.extend(render_api_response(name, response) for name, response in results)
            for kind, values in menu_phrases(results).items():
                phrases[kind] |= values
        if replies:
            dialogues.append(Dialogue(f"taskmaster-{row['conversation_id']}", tuple(turns), tuple(replies)))
    return dialogues, phrases


def convert_taskmaster(
    source: Path,
    *,
    negatives: dict[str, int] | None = None,
    retriever: Path | None = None,
    paraphrases: str = "drop",
    seed: int = 0,
) -> Iterator[RankingList]:
    """Taskmaster-4's assistant turns as ranking lists (see the module doc)."""
    dialogues, phrases = read_taskmaster(source)
    corpus = (text for d in dialogues for _, text in d.turns)
    swapper = ValueSwapper(corpus, {kind: sorted(values) for kind, values in phrases.items()})

    yield from dialogue_lists(
        dialogues,
        dict(TASKMASTER_NEGATIVES if negatives is None else negatives),
        seed=seed,
        retriever=retriever,
        paraphrases=paraphrases,
        contradict=contradict_by(swapper.swap),
    )
