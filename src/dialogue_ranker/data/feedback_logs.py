"""The service's request and feedback logs (``ranker serve --logs.dir DIR``) as labelled ranking lists.

    lists = lists_from_logs("runs/logs")          # the join
    lists = read_lists_or_logs(path)              # a JSONL file as read_lists reads it, or a logs directory

The service writes a line per ranked request to ``requests-*.jsonl`` and one per feedback to
``feedback-*.jsonl`` (:mod:`dialogue_ranker.serving.request_logs.lines` has the format). The
files are read from the directory and its subdirectories, so that replicas that each log to a
directory of their own (``/logs/<pod>``) are joined together from their parent. The join:

- a logged request with at least one judged candidate becomes a :class:`RankingList` holding its
  judged candidates, in the request's order, each with its label (a reward ``r`` in [-1, 1]
  becomes the probability ``(r + 1) / 2``); its context, situations and group come from the
  request line, the group being its ``conversation_id`` when the request had one, else its id;
- candidates nobody judged are left out: unjudged is not bad (the user may never have seen the
  reply), and a list that called them 0 would teach the ranker that every reply it was not told
  about is wrong;
- the last judgement of a candidate wins: the latest by its ``time`` (on a tie, the one written
  last), so a judgement sent to another replica counts in the order it was given;
- a request logged twice under one id (a client that reuses its X-Request-ID) is the last one;
- a judged request whose line was written without texts (``--logs.texts`` off: SHA-256 digests
  in place of texts) is refused with its file and line: a digest cannot be trained on.

Feedback whose request or candidate is in no request line (a request older than the files kept,
another replica's directory) joins nothing; :func:`join_logs` counts it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError

from dialogue_ranker.data.ranking_data import Candidate, DataError, RankingList, read_lists
from dialogue_ranker.serving.request_logs.files import log_files
from dialogue_ranker.serving.request_logs.lines import FEEDBACK, FORMAT, REQUESTS, label_of_reward
from dialogue_ranker.serving.tokenization import DEFAULT_SPEAKER, Turn

#: What a reader of a digests-only line is told to do.
ENABLE_TEXTS = "start the service with --logs.texts (RANKER_LOGS__TEXTS=true) to log texts"


class _LoggedTurn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    speaker: str = DEFAULT_SPEAKER
    text: str | None = None


class _LoggedCandidate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    text: str | None = None
    generator: str | None = None
    action: str | None = None


class _RequestLine(BaseModel):
    model_config = ConfigDict(extra="ignore")

    format: Literal[1]
    request_id: str
    group: str
    texts: bool
    context: list[_LoggedTurn]
    situations: list[str] = Field(default_factory=list)
    candidates: list[_LoggedCandidate]


_Grade = Annotated[StrictInt, Field(ge=0, le=2)]
_Probability = Annotated[StrictFloat, Field(ge=0.0, le=1.0)]


class _FeedbackLine(BaseModel):
    model_config = ConfigDict(extra="ignore")

    format: Literal[1]
    request_id: str
    candidate_id: str
    time: str
    label: _Grade | _Probability | None = None
    reward: Annotated[float, Field(ge=-1.0, le=1.0)] | None = None

    def joined_label(self, origin: str) -> int | float:
        if (self.label is None) == (self.reward is None):
            raise DataError(f"{origin}: a feedback line holds exactly one of label and reward")
        return self.label if self.label is not None else label_of_reward(float(self.reward or 0.0))


@dataclass(frozen=True)
class JoinedLogs:
    """The labelled lists of a logs directory, and what the join counted."""

    lists: list[RankingList]
    #: Request lines read (a request logged twice under one id counts twice).
    requests: int
    #: Feedback lines read.
    judgements: int
    #: Feedback lines whose request or candidate is in no request line.
    unmatched: int


def _lines(path: Path) -> list[tuple[str, str]]:
    """``(file:line, text)`` of each line; a last line cut short (no newline: a crash) is left out."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: cannot be read ({type(e).__name__})") from None
    lines = text.split("\n")[:-1]  # the part after the last newline is empty, or a line cut short
    return [(f"{path}:{n}", line) for n, line in enumerate(lines, start=1) if line.strip()]


def _parse(model: type[BaseModel], origin: str, line: str) -> Any:
    try:
        return model.model_validate(json.loads(line))
    except json.JSONDecodeError as e:
        raise DataError(f"{origin}: not JSON ({e.msg} at column {e.colno})") from None
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "line"
        if where == "format":
            raise DataError(f"{origin}: not a log line of format {FORMAT}") from None
        raise DataError(f"{origin}: {where}: {first['msg']}") from None


def _ranking_list(request: _RequestLine, labels: dict[str, int | float], origin: str) -> RankingList:
    if not request.texts or any(t.text is None for t in request.context):
        raise DataError(
            f"{origin}: request {request.request_id!r} has feedback but was logged without texts (SHA-256 "
            f"digests only), which cannot be trained on; {ENABLE_TEXTS}"
        )
    judged = [c for c in request.candidates if c.id in labels]
    if any(c.text is None for c in judged):
        raise DataError(f"{origin}: a judged candidate has no text; {ENABLE_TEXTS}")
    return RankingList(
        context=tuple(Turn(t.speaker, str(t.text)) for t in request.context),
        candidates=tuple(Candidate(str(c.text), labels[c.id], c.generator, c.action) for c in judged),
        group=request.group,
        situations=tuple(request.situations),
        origin=origin,
    )


def join_logs(directory: str | Path) -> JoinedLogs:
    """Join the request and feedback lines of a logs directory (and its subdirectories) into lists.

    Lists come in the order their requests were logged.

    Raises:
        DataError: a line is not a log line (file, line and field named), a judged request was
            logged without texts, or no logged request has feedback.
    """
    directory = Path(directory)
    requests: dict[str, tuple[str, _RequestLine]] = {}
    request_lines = 0
    for path in log_files(directory, REQUESTS, tree=True):
        for origin, line in _lines(path):
            request: _RequestLine = _parse(_RequestLine, origin, line)
            requests.pop(request.request_id, None)  # a reused id: the last request, in log order
            requests[request.request_id] = (origin, request)
            request_lines += 1
    feedback = [
        (origin, _parse(_FeedbackLine, origin, line))
        for path in log_files(directory, FEEDBACK, tree=True)
        for origin, line in _lines(path)
    ]
    feedback.sort(key=lambda entry: entry[1].time)  # stable: on a tie, the order written
    labels: dict[str, dict[str, int | float]] = {}
    unmatched = 0
    for origin, judgement in feedback:
        logged = requests.get(judgement.request_id)
        if logged is None or judgement.candidate_id not in {c.id for c in logged[1].candidates}:
            unmatched += 1
            continue
        label = judgement.joined_label(origin)
        labels.setdefault(judgement.request_id, {})[judgement.candidate_id] = label
    lists = [
        _ranking_list(request, labels[request_id], origin)
        for request_id, (origin, request) in requests.items()
        if request_id in labels
    ]
    if not lists:
        raise DataError(
            f"{directory}: no logged request has feedback ({request_lines} request lines, {len(feedback)} "
            f"feedback lines, {unmatched} of them matching no logged request)"
        )
    return JoinedLogs(lists, request_lines, len(feedback), unmatched)


def lists_from_logs(directory: str | Path) -> list[RankingList]:
    """The labelled ranking lists of a logs directory (:func:`join_logs`'s lists).

    Raises:
        DataError: as :func:`join_logs`.
    """
    return join_logs(directory).lists


def read_lists_or_logs(path: str | Path) -> list[RankingList]:
    """The ranking lists of a JSONL file (:func:`read_lists`), or of a logs directory (the join).

    Raises:
        DataError: as :func:`read_lists` for a file, as :func:`join_logs` for a directory.
    """
    return lists_from_logs(path) if Path(path).is_dir() else read_lists(path)


def lists_digest(path: str | Path) -> str:
    """SHA-256 of a lists file, or of a logs directory's files (relative names and bytes, name order).

    Which lists, byte for byte, a bundle was fitted on: its lineage records it.
    """
    path = Path(path)
    sha = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            sha.update(str(file.relative_to(path)).encode("utf-8") + b"\0")
        with file.open("rb") as f:
            for block in iter(lambda f=f: f.read(1 << 20), b""):
                sha.update(block)
    return sha.hexdigest()
