"""The ``bank`` scenario's data: a bank file the service serves, and the contexts its requests send.

The bank for load tests is made at run time, never committed: by default every turn of the
Topical-Chat conversations of one split (``test_freq``: 11,760 responses, about the 10,000 of
issue #43's speed target), read from ``../shared/data/topical_chat``; where that is absent, the
suite's own sample replies (a few hundred, ``samples.py``)::

    python -m loadtests.bank                          # runs/loadtest/bank/loadtest.jsonl
    ranker serve --bank loadtest=runs/loadtest/bank/loadtest.jsonl

The requests of the scenario take their contexts from the same conversations (2 to 6 turns
before a turn, its responder the ``bot``), so the bank holds each context's true next turn, as
in DSTC7 NOESIS' global pool, and its earlier turns too (the service masks those as repeats).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import requests

from loadtests import samples
from loadtests.expected import BankResponse

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
#: The conversations the bank and the scenario's contexts come from, when ../shared/data is there.
DEFAULT_TOPICAL_CHAT = REPO_ROOT.parent / "shared/data/topical_chat/conversations/test_freq.json"
#: Where ``python -m loadtests.bank`` writes by default (runs/ is git-ignored).
DEFAULT_BANK_FILE = REPO_ROOT / "runs" / "loadtest" / "bank" / "loadtest.jsonl"
#: The bank's name in ``ranker serve --bank NAME=FILE`` and in the requests' ``bank`` field.
DEFAULT_BANK_NAME = "loadtest"
#: A bank text is at most this long (the service's default ``limits.max-text-chars``).
MAX_TEXT_CHARS = 2000
SOURCES = ("auto", "topical-chat", "samples")

#: A conversation: (speaker key, text) per turn, oldest first.
Conversation = tuple[tuple[str, str], ...]


def read_conversations(path: Path, *, limit: int | None = None) -> list[Conversation]:
    """Topical-Chat conversations (``conversations/<split>.json``) with two turns or more, file order.

    Raises:
        ValueError: the file cannot be read or is not Topical-Chat.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        out = []
        for conversation in data.values():
            turns = tuple(
                (str(t["agent"]), str(t["message"]).strip())
                for t in conversation["content"]
                if str(t.get("message", "")).strip()
            )
            if len(turns) >= 2:
                out.append(turns)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"cannot read Topical-Chat conversations from {path}: {e!r}") from e
    if not out:
        raise ValueError(f"{path} holds no Topical-Chat conversation")
    return out[:limit] if limit else out


def topical_chat_bank(conversations: Sequence[Conversation]) -> list[dict[str, str]]:
    """Every turn of ``conversations`` as a bank line: id ``tc-<conversation>-<turn>``."""
    return [
        {"id": f"tc-{c:04d}-{t:02d}", "text": text[:MAX_TEXT_CHARS], "generator": "topical-chat"}
        for c, turns in enumerate(conversations)
        for t, (_, text) in enumerate(turns)
    ]


def sample_bank() -> list[dict[str, str]]:
    """A bank from the suite's own sample texts (no data needed): a few hundred socialbot replies."""
    texts: dict[str, str] = {}  # text -> generator, first one kept
    for i, topic in enumerate(samples.TOPICS):
        other = samples.TOPICS[(i + 1) % len(samples.TOPICS)].name
        for fact in topic.facts:
            texts.setdefault(f"Did you know that {fact}", "retrieval")
            for opener in samples.NEURAL_OPENERS:
                texts.setdefault(f"{opener} I read that {fact}", "neural")
        for line in (*topic.bot, *topic.user):
            texts.setdefault(line, "retrieval")
        for template in samples.TEMPLATE_REPLIES:
            texts.setdefault(template.format(topic=topic.name, other=other), "template")
    for line in samples.PLAIN_AGENT_REPLIES:
        texts.setdefault(line, "template")
    return [{"id": f"s-{n:04d}", "text": t, "generator": g} for n, (t, g) in enumerate(texts.items())]


def write_bank(path: Path, lines: Iterable[Mapping[str, Any]]) -> int:
    """Write a bank file (JSONL); the number of responses."""
    text = "".join(json.dumps(dict(line), ensure_ascii=False) + "\n" for line in lines)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return text.count("\n")


def read_bank_file(path: Path) -> dict[str, BankResponse]:
    """A bank file's responses by id, for the checks (the service checks the file itself).

    Raises:
        ValueError: the file cannot be read, a line is not an object with ``id`` and ``text``, or
            an id repeats.
    """
    entries: dict[str, BankResponse] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"cannot read the bank file {path}: {e}") from e
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            cid, text = data["id"], data["text"]
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{number}: not a bank line ({e!r})") from e
        if cid in entries:
            raise ValueError(f"{path}:{number}: id {cid!r} repeats")
        entries[cid] = BankResponse(text, data.get("generator"), data.get("action"))
    if not entries:
        raise ValueError(f"{path} holds no response")
    return entries


def served_bank_size(host: str, name: str) -> int:
    """The size of the bank ``name`` as the service at ``host`` lists it (``GET /v1/banks``).

    Raises:
        ValueError: the service does not answer, does not serve that bank, or it is not ready.
    """
    url = f"{host.rstrip('/')}/v1/banks"
    try:
        response = requests.get(url, timeout=10)
        response.raise_for_status()
        banks = {bank["name"]: bank for bank in response.json()["data"]}
    except (requests.RequestException, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"cannot list the banks at {url}: {e}") from e
    if name not in banks:
        served = ", ".join(sorted(banks)) or "none"
        raise ValueError(
            f"the bank scenario ranks against bank {name!r}, which {host} does not serve (it serves: "
            f"{served}). Make a bank file with `python -m loadtests.bank` and start the service with "
            f"`ranker serve --bank {name}=runs/loadtest/bank/loadtest.jsonl`, name another bank with "
            "--bank-name, or leave the scenario out with --weight-bank 0"
        )
    bank = banks[name]
    if not bank.get("ready"):
        raise ValueError(f"bank {name!r} at {host} is not ready ({bank.get('state')}): wait for /readyz")
    return int(bank["size"])


def make_bank(
    out: Path,
    *,
    source: str = "auto",
    topical_chat: Path = DEFAULT_TOPICAL_CHAT,
    conversations: int | None = None,
) -> tuple[int, str]:
    """Write the load tests' bank to ``out``; its size and where it came from.

    ``auto``: Topical-Chat when ``topical_chat`` exists, else the samples.

    Raises:
        ValueError: an unknown source, or Topical-Chat asked for and not readable.
    """
    if source not in SOURCES:
        raise ValueError(f"unknown bank source {source!r}: one of {', '.join(SOURCES)}")
    if source == "topical-chat" or (source == "auto" and topical_chat.is_file()):
        lines = topical_chat_bank(read_conversations(topical_chat, limit=conversations))
        where = f"Topical-Chat ({topical_chat})"
    else:
        lines = sample_bank()
        where = "the suite's sample replies"
    return write_bank(out, lines), where


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loadtests.bank", description="Write the load tests' response bank (JSONL)."
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_BANK_FILE, help=f"default {DEFAULT_BANK_FILE}")
    parser.add_argument(
        "--source", choices=SOURCES, default="auto", help="auto: Topical-Chat when present, else samples"
    )
    parser.add_argument(
        "--topical-chat", type=Path, default=DEFAULT_TOPICAL_CHAT, help="a Topical-Chat conversations JSON"
    )
    parser.add_argument(
        "--conversations", type=int, default=None, help="only the first N conversations (a smaller bank)"
    )
    args = parser.parse_args(argv)
    try:
        size, where = make_bank(
            args.out, source=args.source, topical_chat=args.topical_chat, conversations=args.conversations
        )
    except ValueError as e:
        sys.stderr.write(f"loadtests.bank: {e}\n")
        return 2
    sys.stdout.write(
        f"wrote {size} responses from {where} to {args.out}\n"
        f"serve them with: ranker serve --bank {DEFAULT_BANK_NAME}={args.out}\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
