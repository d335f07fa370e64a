"""Convert the data in ``../shared/data`` to the ranking-data format (:mod:`data.ranking_data`).

    ranker convert sugar ../shared/data/sugar/sugar.jsonl runs/data/sugar.jsonl
    ranker convert topical-chat ../shared/data/topical_chat runs/data/topical_chat.jsonl
    ranker convert dailydialog-pp ../shared/data/dailydialog_pp/dev.jsonl runs/data/ddpp.jsonl
    ranker convert written-situations data/written_situations/situations.toml runs/data/written.jsonl
    ranker convert sgd ../shared/data/sgd/sgd_dev.jsonl.gz runs/data/sgd-dev.jsonl \
        --retriever models/dialogue-minilm-l6/retriever
    ranker convert persona-chat ../shared/data/synthetic_persona_chat/spc_test.jsonl.gz \
        runs/data/persona-chat.jsonl --retriever models/dialogue-minilm-l6/retriever
    ranker convert taskmaster ../shared/data/taskmaster/tm4_dialogues.jsonl.gz runs/data/taskmaster.jsonl \
        --retriever models/dialogue-minilm-l6/retriever
    ranker convert taskmaster-reward ../shared/data/taskmaster runs/data/taskmaster-reward.jsonl

- **sugar**: one list per example: the request, its 12 statements (the gold ones marked
  relevant), its three rated responses. With ``--negatives``, wrong replies (label 0) are added,
  named in their ``generator``: ``statement`` (one of the example's distractor statements, said as
  the reply: about the situation, but not about the request), ``other-reply`` (the best reply
  to another request: a fitting assistant reply, to something else) and ``situation-flip`` (the
  best reply of an example with the same request and the opposite answer: only the statements
  tell them apart). ``--group-by request`` splits by request text instead of by example. CC BY-SA 4.0.
- **topical-chat**: one list per turn (from the second on) of each conversation: the true next
  turn (label 1) against negatives mined to look right on the surface, each named in its
  ``generator``: ``context`` (one of the context's own earlier turns, repeated), ``nearby`` (a
  turn of the same conversation a few turns away), ``same-entity`` (a turn of another
  conversation about one of the same entities), ``random``; and, when ``--negatives`` asks for
  them, ``echo`` (the partner's last turn, repeated) and ``overlap`` (a turn of another
  conversation among the 10 whose words, TF-IDF weighted, are nearest the last two turns: it
  reuses the context's words without answering it) and ``fact`` (a wiki lead sentence about one
  of the conversation's entities, said as the reply: on topic, but a statement, not an answer)
  and ``shared-word`` (one sentence of a turn of a conversation about none of this one's
  entities that uses one of the last two turns' content words: it reuses a word of the context
  and is about something else, as DailyDialog++'s adversarial replies are; unlike ``overlap`` it is
  drawn at random among such sentences, not the nearest, so it is seldom a fitting reply)
  and ``short`` (a turn of another conversation of at most 10 words: "Haha, I know it's
  crazy.", "Sounds good. Nice chatting with you." Topical-Chat's turns average 20 words, so its
  ``random`` negatives are long and specific, where off-context replies in open chat are often
  short and generic) and ``retrieved`` (a turn of another conversation among the 10 nearest the
  last turns in the retrieval encoder given with ``--retriever DIR``: what a response bank would
  put before the ranker, often a fitting reply to something else).
  Half the lists (seeded) carry as situations the lead sentences of the wiki sections the
  responder read about its entities.
  The responder is ``bot``, its partner ``user``. Community Data License Agreement - Sharing 1.0:
  a model trained on it may ship.
- **dailydialog-pp**: one list per context: 5 positives (label 1, ``human``), 5 adversarial
  (label 0, ``adversarial``: they reuse the context's words) and 5 random negatives (label 0,
  ``random``). CC BY-NC-SA 4.0: for evaluation and model selection only, never for a model
  that ships.
- **written-situations**: the project's own situated requests (``data/written_situations/``), each
  under a situation that blocks it and one that does not, with plainly worded accepting and
  declining replies (:mod:`training.converters.written_situations`): two lists per scenario, the
  right kind of reply label 1, the other kind label 0. Written here; licensed as the project.
- **sgd**, **persona-chat**, **taskmaster**: one list per responder turn, the true turn (label 1)
  against negatives that are on topic but wrong, each named in its ``generator`` (``retrieved``,
  ``earlier``, ``later``, ``same-service``, ``contradicted``, ``random``:
  :mod:`training.converters.dialogue_lists`), paraphrases of the true turn filtered out
  (``--paraphrases right`` keeps them as second right replies instead). Persona
  lines (persona-chat) and API results (taskmaster) are the situations. SGD CC BY-SA 4.0,
  Synthetic-Persona-Chat and Taskmaster CC BY 4.0.
- **taskmaster-reward**: Taskmaster-3/4's human-rated agent turns, one list per context, the
  reward (1.0/0.0) as a probability label: pointwise lists for calibration. CC BY 4.0.

``--statement-variants dropped,shuffled,irrelevant`` (any set) follows each train-part list that
has statements with copies of it whose statements are dropped, shuffled or padded with irrelevant
ones (:mod:`training.converters.statement_variants`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dialogue_ranker.data.ranking_data import write_lists
from dialogue_ranker.data.sugar import GROUPINGS as SUGAR_GROUPINGS
from dialogue_ranker.training.converters.dailydialog_pp import convert_dailydialog_pp
from dialogue_ranker.training.converters.dialogue_lists import (
    DIALOGUE_NEGATIVE_KINDS,
    MAX_PARAPHRASE_RIGHTS,
    PARAPHRASE_USES,
)
from dialogue_ranker.training.converters.persona_chat import PERSONA_NEGATIVES, convert_persona_chat
from dialogue_ranker.training.converters.sgd import SGD_NEGATIVES, convert_sgd
from dialogue_ranker.training.converters.statement_variants import STATEMENT_VARIANTS, statement_variants
from dialogue_ranker.training.converters.sugar import SUGAR_NEGATIVE_KINDS, convert_sugar
from dialogue_ranker.training.converters.taskmaster import TASKMASTER_NEGATIVES, convert_taskmaster
from dialogue_ranker.training.converters.taskmaster_reward import convert_taskmaster_reward
from dialogue_ranker.training.converters.topical_chat import NEGATIVE_KINDS, NEGATIVES, convert_topical_chat
from dialogue_ranker.training.converters.written_situations import convert_written_situations

CONVERTERS = {
    "sugar": convert_sugar,
    "topical-chat": convert_topical_chat,
    "dailydialog-pp": convert_dailydialog_pp,
    "written-situations": convert_written_situations,
    "sgd": convert_sgd,
    "persona-chat": convert_persona_chat,
    "taskmaster": convert_taskmaster,
    "taskmaster-reward": convert_taskmaster_reward,
}
#: The turn-level dialogue sets (:mod:`training.converters.dialogue_lists`) and their default mixes.
DIALOGUE_MIXES = {"sgd": SGD_NEGATIVES, "persona-chat": PERSONA_NEGATIVES, "taskmaster": TASKMASTER_NEGATIVES}
#: The flags passed on to the converter as keywords where given (``parse_args`` has checked that
#: each fits the dataset).
CONVERTER_OPTIONS = (
    "negatives",
    "group_by",
    "strip_openers",
    "reply_max_words",
    "drop_negatives",
    "retriever",
    "max_dialogues",
    "paraphrases",
)
#: Where ``--retriever`` (the ``retrieved`` kind's encoder) applies.
RETRIEVER_SETS = ("topical-chat", *DIALOGUE_MIXES)


def parse_negatives(text: str, kinds: tuple[str, ...] = NEGATIVE_KINDS) -> dict[str, int]:
    """``KIND:N,KIND:N,...`` (kinds from ``kinds``) as a negative mix."""
    mix: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        kind, _, count = part.partition(":")
        if kind not in kinds or not count.isdigit():
            raise argparse.ArgumentTypeError(
                f"--negatives takes KIND:N,... with KIND in {', '.join(kinds)}; got {part!r}"
            )
        mix[kind] = int(count)
    if sum(mix.values()) < 1:
        raise argparse.ArgumentTypeError("--negatives needs at least one negative")
    return mix


def build_parser() -> argparse.ArgumentParser:
    """``ranker convert``'s parser (this module's docstring is its help)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dataset", choices=sorted(CONVERTERS))
    parser.add_argument(
        "source", type=Path, help="the dataset's file (sugar, dailydialog-pp) or folder (topical-chat)"
    )
    parser.add_argument("out", type=Path, help="the JSONL file to write")
    parser.add_argument(
        "--negatives",
        default=None,
        metavar="KIND:N,...",
        help="topical-chat: the negative mix, with KIND in "
        + ", ".join(NEGATIVE_KINDS)
        + " (default: "
        + ",".join(f"{k}:{n}" for k, n in NEGATIVES.items())
        + "); sugar: wrong replies to add, with KIND in "
        + ", ".join(SUGAR_NEGATIVE_KINDS)
        + " (default: none); sgd, persona-chat, taskmaster: the mix, with KIND in "
        + ", ".join(DIALOGUE_NEGATIVE_KINDS)
        + " (defaults: "
        + "; ".join(f"{d} {','.join(f'{k}:{n}' for k, n in m.items())}" for d, m in DIALOGUE_MIXES.items())
        + ")",
    )
    parser.add_argument(
        "--reply-max-words",
        type=int,
        default=None,
        metavar="N",
        help="topical-chat: only the turns whose true reply has at most N words (short replies that "
        "are right, against long wrong ones)",
    )
    parser.add_argument(
        "--drop-negatives",
        default=None,
        metavar="KIND,...",
        help="topical-chat: leave out the mined negatives of these kinds (after they are drawn: the "
        "other lists and candidates stay as the mix gives them)",
    )
    parser.add_argument(
        "--retriever",
        type=Path,
        default=None,
        metavar="DIR",
        help="topical-chat, sgd, persona-chat, taskmaster: the retrieval encoder (a directory with "
        "retriever.json, e.g. a bundle's retriever/) whose nearest turns the retrieved negatives are "
        "drawn from; the dialogue sets' default mixes need it",
    )
    parser.add_argument(
        "--paraphrases",
        choices=PARAPHRASE_USES,
        default=None,
        help="sgd, persona-chat, taskmaster: what a mined negative that says what the true turn says "
        "becomes: dropped (the default) or a second right reply (label 1, 'paraphrase'; at most "
        f"{MAX_PARAPHRASE_RIGHTS} a list), for lists with several right replies",
    )
    parser.add_argument(
        "--statement-variants",
        default=None,
        metavar="KIND,...",
        help="any set: follow each train-part list that has statements with copies of it, KIND in "
        + ", ".join(STATEMENT_VARIANTS)
        + " (statements dropped, shuffled, or with irrelevant ones of other dialogues added; "
        "see training/converters/statement_variants.py)",
    )
    parser.add_argument(
        "--max-dialogues",
        type=int,
        default=None,
        metavar="N",
        help="sgd: a seeded sample of N dialogues of the file (a cap on a large train split)",
    )
    parser.add_argument(
        "--group-by",
        choices=SUGAR_GROUPINGS,
        default=None,
        help="sugar: the split's group, each example (the default) or the request text (dev and test "
        "then hold requests the model never trained on)",
    )
    parser.add_argument(
        "--strip-openers",
        type=float,
        default=None,
        metavar="P",
        help='sugar: drop each reply\'s opener ("Sure,", "Sorry, but") with probability P, so the '
        "opener, which every SUGAR reply of one answer shares, stops telling right from wrong",
    )
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments, ``--negatives`` parsed into a mix of the dataset's kinds; exits 2 on a bad one."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.negatives is not None:
        kinds = {"topical-chat": NEGATIVE_KINDS, "sugar": SUGAR_NEGATIVE_KINDS}.get(args.dataset)
        if args.dataset in DIALOGUE_MIXES:
            kinds = DIALOGUE_NEGATIVE_KINDS
        if kinds is None:
            mined = ", ".join(("topical-chat", "sugar", *DIALOGUE_MIXES))
            parser.error(f"--negatives is for {mined}, not {args.dataset}")
        try:
            args.negatives = parse_negatives(args.negatives, kinds)
        except argparse.ArgumentTypeError as e:
            parser.error(str(e))
    for flag in ("group_by", "strip_openers"):
        if getattr(args, flag) is not None and args.dataset != "sugar":
            parser.error(f"--{flag.replace('_', '-')} is for sugar, not {args.dataset}")
    if args.strip_openers is not None and not 0.0 <= args.strip_openers <= 1.0:
        parser.error(f"--strip-openers {args.strip_openers} is not between 0 and 1")
    for flag in ("reply_max_words", "drop_negatives"):
        if getattr(args, flag) is not None and args.dataset != "topical-chat":
            parser.error(f"--{flag.replace('_', '-')} is for topical-chat, not {args.dataset}")
    if args.paraphrases is not None and args.dataset not in DIALOGUE_MIXES:
        parser.error(f"--paraphrases is for {', '.join(DIALOGUE_MIXES)}, not {args.dataset}")
    if args.retriever is not None and args.dataset not in RETRIEVER_SETS:
        parser.error(f"--retriever is for {', '.join(RETRIEVER_SETS)}, not {args.dataset}")
    if args.max_dialogues is not None and (args.dataset != "sgd" or args.max_dialogues < 1):
        parser.error(f"--max-dialogues takes N >= 1, for sgd only (got {args.max_dialogues}, {args.dataset})")
    mix = args.negatives or DIALOGUE_MIXES.get(args.dataset, {})
    if args.dataset in RETRIEVER_SETS and mix.get("retrieved") and args.retriever is None:
        parser.error(
            "--negatives retrieved:N (in the default mix of the dialogue sets) needs --retriever DIR "
            "(a retrieval encoder, e.g. models/dialogue-minilm-l6/retriever), or a --negatives mix without it"
        )
    if args.retriever is not None and not (args.retriever / "retriever.json").is_file():
        parser.error(f"--retriever {args.retriever}: no retriever.json there")
    if args.reply_max_words is not None and args.reply_max_words < 1:
        parser.error(f"--reply-max-words {args.reply_max_words} is not >= 1")
    if args.drop_negatives is not None:
        dropped = frozenset(k.strip() for k in args.drop_negatives.split(",") if k.strip())
        if unknown := sorted(dropped - set(NEGATIVE_KINDS)):
            parser.error(f"--drop-negatives {unknown[0]!r} is not one of {', '.join(NEGATIVE_KINDS)}")
        args.drop_negatives = dropped
    if args.statement_variants is not None:
        variants = tuple(k.strip() for k in args.statement_variants.split(",") if k.strip())
        if not variants or (unknown := sorted(set(variants) - set(STATEMENT_VARIANTS))):
            parser.error(f"--statement-variants takes KIND,... with KIND in {', '.join(STATEMENT_VARIANTS)}")
        args.statement_variants = variants
    if not args.source.exists():
        parser.error(f"{args.source} does not exist")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    try:
        given = {name: getattr(args, name) for name in CONVERTER_OPTIONS}
        extra = {name: value for name, value in given.items() if value is not None}
        lists = CONVERTERS[args.dataset](args.source, **extra)
        if args.statement_variants:
            lists = statement_variants(lists, args.statement_variants)
        count = write_lists(args.out, lists)
    except (OSError, ValueError, KeyError, TypeError) as e:
        problem = f"{type(e).__name__}: {e}"
        print(
            f"ranker convert {args.dataset}: {args.source} is not in the expected layout ({problem})",
            file=sys.stderr,
        )
        return 1
    print(f"wrote {count} ranking lists to {args.out}")
    if args.dataset == "dailydialog-pp":
        print("note: DailyDialog++ is CC BY-NC-SA 4.0: evaluate and select models with it, never train on it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
