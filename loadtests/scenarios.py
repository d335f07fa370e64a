"""Request bodies of the four traffic scenarios.

- ``socialbot``: a multi-turn chat, 5 to 10 candidates from named generators;
- ``situated``: a SUGAR example (request, 12 statements, 3 candidates), from the real data when
  its file is there, else from the built-in samples;
- ``agent_assist``: a customer-service conversation with an intent and actions, some of which
  the guidelines do not allow for that intent, in hard, soft or off mask mode;
- ``large_pool``: a socialbot turn with 100 candidates;
- ``bank``: a Topical-Chat context (or a sample chat) ranked against a served response bank,
  half the requests with a few candidates of their own (``bank.py`` makes the bank's file).

Bodies vary (lengths, ids given or positional, ``top_k``, ``min_score``)
so that every response check and every batching path gets exercised.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtests import samples
from loadtests.bank import Conversation
from loadtests.expected import BankInfo, Guidelines

logger = logging.getLogger(__name__)

SCENARIOS = ("socialbot", "situated", "agent_assist", "large_pool", "bank")
#: The default traffic mix, in percent: mostly socialbot turns, a few requests against a bank and
#: fewer very large pools (docs/guides/load-tests.md, "SLO gate", says how these were chosen).
#: Locust's users and ``benchmarks/soak.py`` deal their requests by it.
DEFAULT_WEIGHTS = {"socialbot": 50, "situated": 20, "agent_assist": 23, "large_pool": 2, "bank": 5}
SOCIALBOT_GENERATORS = ("template", "retrieval", "neural", "llm")
AGENT_GENERATORS = ("retrieval", "llm", "rule")
LARGE_POOL_SIZE = 100
#: A bank request's ``retrieve_k``, drawn evenly; None leaves it to the service (``banks.retrieve-k``,
#: 50 by default). Each bank response ranked costs what an explicit candidate does (Topical-Chat
#: replies and contexts are long: 50 of them took about as long as 60 of the large pool's).
BANK_RETRIEVE_K: tuple[int | None, ...] = (None, 10, 20, 50)
#: The share of bank requests that send candidates of their own too (1 to 3 of them).
BANK_OWN_CANDIDATES = 0.5
#: Context turns of a bank request, at most (Topical-Chat turns are long: about 20 words).
BANK_CONTEXT_TURNS = 6

Body = dict[str, Any]


@dataclass(frozen=True)
class SituatedExample:
    """A situated request: the user's request, its statements and three candidate responses."""

    request: str
    statements: tuple[str, ...]
    candidates: tuple[str, ...]


def load_situated(path: Path | None) -> tuple[list[SituatedExample], str]:
    """SUGAR examples from ``path`` when given, else the built-in samples; and where they came from.

    Raises:
        ValueError: the file cannot be read or is not SUGAR JSONL.
    """
    if path is None:
        return [SituatedExample(u, s, c) for u, s, c in samples.SITUATED_SAMPLES], "built-in samples"
    # The training loader is the one parser of the SUGAR format; imported here so that runs on
    # the built-in samples do not need it.
    from dialogue_ranker.data.sugar import load_sugar

    try:
        examples = [SituatedExample(e.request, e.statements, e.candidates) for e in load_sugar(path)]
    except (OSError, KeyError, TypeError, ValueError) as e:
        raise ValueError(f"cannot read SUGAR examples from {path}: {e!r}") from e
    if not examples:
        raise ValueError(f"{path} holds no SUGAR examples")
    return examples, f"SUGAR ({path})"


class Traffic:
    """Builds the request bodies; one instance serves every simulated user of a process."""

    def __init__(
        self,
        *,
        guidelines: Guidelines,
        situated: Sequence[SituatedExample],
        seed: int | None = None,
        bank: BankInfo | None = None,
        conversations: Sequence[Conversation] = (),
    ) -> None:
        self.guidelines = guidelines
        self.situated_examples = list(situated)
        #: The bank the ``bank`` scenario names, and the conversations its contexts come from
        #: (none: the socialbot scenario's sample chats).
        self.bank = bank
        self.conversations = list(conversations)
        self.rng = random.Random(seed)
        self._intents = sorted(guidelines.allowed)
        self._actions = sorted(guidelines.actions)
        self._unknown_actions = [a for a in samples.UNKNOWN_ACTIONS if a not in guidelines.actions]

    def builder(self, scenario: str) -> Callable[[], Body]:
        """The body builder of a scenario (one of :data:`SCENARIOS`)."""
        return {
            "socialbot": self.socialbot,
            "situated": self.situated,
            "agent_assist": self.agent_assist,
            "large_pool": self.large_pool,
            "bank": self.bank_request,
        }[scenario]

    def socialbot(self) -> Body:
        """A multi-turn chat and 5 to 10 candidates from several generators."""
        rng = self.rng
        topic = rng.choice(samples.TOPICS)
        count = rng.randint(5, 10)
        # The first generators are fixed so that each request mixes at least three of them.
        generators = [*SOCIALBOT_GENERATORS[:3], *rng.choices(SOCIALBOT_GENERATORS, k=count - 3)]
        rng.shuffle(generators)
        positional = rng.random() < 0.3  # no ids: the service numbers candidates by position
        candidates = []
        for i, generator in enumerate(generators):
            candidate = {"text": self._social_reply(topic, generator), "generator": generator}
            if not positional:
                candidate["id"] = f"{generator[:3]}-{i}"
            candidates.append(candidate)
        body: Body = {"context": self._chat(topic), "candidates": candidates}
        if rng.random() < 0.25:
            body["top_k"] = rng.randint(1, 3)
        if rng.random() < 0.1:
            body["min_score"] = round(rng.uniform(0.2, 0.8), 2)
        return body

    def situated(self) -> Body:
        """A SUGAR request: one user turn, 12 statements, 3 candidates in shuffled order."""
        rng = self.rng
        example = rng.choice(self.situated_examples)
        order = list(range(len(example.candidates)))
        rng.shuffle(order)
        body: Body = {
            "context": [{"speaker": "user", "text": example.request}],
            "situations": list(example.statements),
            "candidates": [{"id": f"r{i}", "text": example.candidates[i]} for i in order],
        }
        return body

    def agent_assist(self) -> Body:
        """An intent, allowed and disallowed actions, and plain replies, in a random mask mode."""
        rng = self.rng
        intent = rng.choice(self._intents)
        allowed = sorted(self.guidelines.allowed[intent])
        others = [a for a in self._actions if a not in self.guidelines.allowed[intent]]
        actions = rng.sample(allowed, k=min(len(allowed), rng.randint(1, 3)))
        # At least one action the intent does not allow (when the file has any), so masks show.
        actions += rng.sample(others, k=min(len(others), rng.randint(1, 2)))
        if self._unknown_actions and rng.random() < 0.2:
            actions.append(rng.choice(self._unknown_actions))
        candidates: list[dict[str, Any]] = [
            {
                "text": rng.choice(samples.ACTION_PHRASES).format(action=action.replace("-", " ")),
                "action": action,
                "generator": rng.choice(AGENT_GENERATORS),
            }
            for action in actions
        ]
        candidates += [
            {"text": text, "generator": "template"}
            for text in rng.sample(samples.PLAIN_AGENT_REPLIES, k=rng.randint(1, 2))
        ]
        rng.shuffle(candidates)
        for i, candidate in enumerate(candidates):
            candidate["id"] = f"a{i}"
        return {
            "context": self._support_chat(intent),
            "candidates": candidates,
            "intent": intent,
            "mask_mode": rng.choices(("hard", "soft", "off"), weights=(6, 3, 1))[0],
        }

    def large_pool(self) -> Body:
        """A socialbot turn with :data:`LARGE_POOL_SIZE` candidates, often cut to the top 10."""
        rng = self.rng
        topic = rng.choice(samples.TOPICS)
        candidates = []
        for i in range(LARGE_POOL_SIZE):
            generator = SOCIALBOT_GENERATORS[i % len(SOCIALBOT_GENERATORS)]
            # Replies on every topic, as a wide retrieval pool would hold, so texts rarely repeat.
            text = self._social_reply(rng.choice(samples.TOPICS), generator)
            candidates.append({"id": f"c{i:03d}", "text": text, "generator": generator})
        body: Body = {"context": self._chat(topic), "candidates": candidates}
        if rng.random() < 0.5:
            body["top_k"] = 10
        return body

    def bank_request(self) -> Body:
        """A context ranked against the bank; half the requests add 1 to 3 candidates of their own.

        Raises:
            RuntimeError: the suite was not told which bank the service serves.
        """
        if self.bank is None:
            raise RuntimeError("the bank scenario needs a served bank (--bank-name)")
        rng = self.rng
        body: Body = {"context": self._bank_context(), "bank": self.bank.name}
        if rng.random() < BANK_OWN_CANDIDATES:
            topic = rng.choice(samples.TOPICS)
            generators = rng.sample(SOCIALBOT_GENERATORS, k=rng.randint(1, 3))
            body["candidates"] = [
                {"id": f"own-{i}", "text": self._social_reply(topic, generator), "generator": generator}
                for i, generator in enumerate(generators)
            ]
        k = rng.choice(BANK_RETRIEVE_K)
        if k is not None:
            body["retrieve_k"] = k
        if rng.random() < 0.25:
            body["top_k"] = 5
        return body

    def _bank_context(self) -> list[dict[str, str]]:
        """2 to 6 turns of a Topical-Chat conversation before one of its turns (that turn's agent: bot)."""
        rng = self.rng
        if not self.conversations:
            return self._chat(rng.choice(samples.TOPICS))
        turns = rng.choice(self.conversations)
        reply = rng.randrange(1, len(turns))  # the turn a bot would say next: in the bank too
        responder = turns[reply][0]
        start = max(0, reply - rng.randint(2, BANK_CONTEXT_TURNS))
        return [
            {"speaker": "bot" if agent == responder else "user", "text": text}
            for agent, text in turns[start:reply]
        ]

    def _chat(self, topic: samples.Topic) -> list[dict[str, str]]:
        rng = self.rng
        turns = rng.randint(2, 8)
        lines = []
        # Oldest first, alternating speakers, always ending on the user's turn.
        for back in range(turns - 1, -1, -1):
            speaker = "user" if back % 2 == 0 else "bot"
            pool = topic.user if speaker == "user" else topic.bot
            lines.append({"speaker": speaker, "text": rng.choice(pool)})
        return lines

    def _social_reply(self, topic: samples.Topic, generator: str) -> str:
        rng = self.rng
        fact = rng.choice(topic.facts)
        if generator == "template":
            other = rng.choice([t.name for t in samples.TOPICS if t is not topic])
            return rng.choice(samples.TEMPLATE_REPLIES).format(topic=topic.name, other=other)
        if generator == "retrieval":
            return f"Did you know that {fact}"
        if generator == "neural":
            opener, closer = rng.choice(samples.NEURAL_OPENERS), rng.choice(samples.NEURAL_CLOSERS)
            return f"{opener} I read that {fact} {closer}".strip()
        # llm: longer, several sentences.
        return (
            f"That's a great point about {topic.name}. {fact[0].upper()}{fact[1:]} "
            f"{rng.choice(topic.bot)} {rng.choice(samples.NEURAL_CLOSERS)}"
        ).strip()

    def _support_chat(self, intent: str) -> list[dict[str, str]]:
        rng = self.rng
        generic = (f"Hi, I need help: {intent.replace('_', ' ')}.",)
        turns = [{"speaker": "customer", "text": rng.choice(samples.CUSTOMER_OPENERS.get(intent, generic))}]
        for _ in range(rng.randint(0, 2)):
            name = rng.choice(samples.CUSTOMER_NAMES)
            follow_up = rng.choice(samples.CUSTOMER_FOLLOW_UPS).format(
                name=name,
                order=rng.randint(100000, 999999),
                email=f"{name.split()[0].lower()}@example.com",
            )
            turns += [
                {"speaker": "agent", "text": rng.choice(samples.AGENT_TURNS)},
                {"speaker": "customer", "text": follow_up},
            ]
        return turns
