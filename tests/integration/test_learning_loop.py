"""The learning loop through the real service: requests logged, feedback posted, adapted, served.

A team's deployment runs ``ranker serve --logs.dir`` with texts kept; its dialog manager sends
``/rank`` requests (here: a slice of Synthetic-Persona-Chat, each list one request, its
conversation as ``conversation_id``) and a person's judgements come back as ``POST /v1/feedback``
(the true reply 2, the others 0, for the candidates a person looked at). ``ranker adapt`` reads the
logs directory itself (a smoke run: ``--limit``, two steps), and the adapted bundle is served and
ranks. The real model, real ``ranker serve`` processes on loopback, the real command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from helpers import REPO_ROOT, launch_service, persona_slice_lists, stop_process, wait_ready

from dialogue_ranker.data.feedback_logs import lists_digest, lists_from_logs
from dialogue_ranker.data.ranking_data import read_lists

pytestmark = [pytest.mark.integration, pytest.mark.slow]

pytest.importorskip("torch", reason="training extras (torch) are not installed")

CONVERSATIONS = 60
#: Candidates of each list a person judged (the true reply among them).
JUDGED = 4


@pytest.fixture(scope="module")
def team_lists(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    """A slice of Synthetic-Persona-Chat's test conversations as ranking lists (a team's own lists)."""
    return persona_slice_lists(
        shared_data, tmp_path_factory.mktemp("team"), CONVERSATIONS, "later:2,random:3"
    )


def serve(model: Path, cwd: Path, *flags: str) -> tuple[subprocess.Popen[bytes], str]:
    process, url = launch_service(["--model", str(model), "--backend", "onnx", *flags], cwd=cwd)
    wait_ready(url, process)
    return process, url


def test_logged_traffic_and_feedback_adapt_the_ranker_that_is_then_served(
    tmp_path: Path, team_lists: Path, sugar_lists: Path, model_dir: Path
) -> None:
    logs = tmp_path / "logs"
    per_group: dict[str, list] = {}
    for x in read_lists(team_lists):
        if any(c.appropriate for c in x.candidates) and len(per_group.setdefault(x.group, [])) < 1:
            per_group[x.group].append(x)
    sent = [x for lists in per_group.values() for x in lists]  # a turn of each conversation
    process, url = serve(model_dir, tmp_path, "--logs.dir", str(logs), "--logs.texts")
    judged = 0
    try:
        with httpx.Client(base_url=url, timeout=60) as client:
            for x in sent:
                body = {
                    "context": [{"speaker": t.speaker, "text": t.text} for t in x.context],
                    "situations": list(x.situations),
                    "candidates": [c.text for c in x.candidates],
                    "conversation_id": x.group,
                }
                answer = client.post("/rank", json=body)
                assert answer.status_code == 200, answer.text
                request_id = answer.json()["request_id"]
                right = next(i for i, c in enumerate(x.candidates) if c.appropriate)
                looked_at = [right, *[i for i in range(len(x.candidates)) if i != right][: JUDGED - 1]]
                for i in looked_at:
                    label = 2 if x.candidates[i].appropriate else 0
                    posted = client.post(
                        "/v1/feedback",
                        json={"request_id": request_id, "candidate_id": str(i), "label": label},
                    )
                    assert posted.status_code in (200, 202), posted.text
                    assert posted.json()["matched"] is True
                    judged += 1
    finally:
        stop_process(process)  # a graceful stop: the writer thread drains its queue

    joined = lists_from_logs(logs)
    assert len(joined) == len(sent) and sum(len(x.candidates) for x in joined) == judged
    assert {x.group for x in joined} == {x.group for x in sent}

    suite = tmp_path / "suite.toml"
    suite.write_text(
        f'[[lists]]\nname = "sugar"\nfile = "{sugar_lists}"\nsplit = "test"\nmax_lists = 6\n'
        'metrics = ["precision_at_1", "ece"]\n'
    )
    out = tmp_path / "adapted"
    adapt = subprocess.run(
        [
            *launch_command(),
            "adapt",
            "--lists",
            str(logs),
            "--model",
            str(model_dir),
            "--out",
            str(out),
            "--minutes",
            "8",  # training's share (a quarter at least) holds its two steps on a busy host
            "--limit",
            "8",
            "--max-steps",
            "2",
            "--precision",
            "fp32",  # not timed: a busy host must not pick the weights
            "--replay",
            f"{sugar_lists}:0.5",
            "--guard",
            "replay",
            "--regression-suite",
            str(suite),
            "--suite-root",
            str(suite.parent),
            "--variants",
            "int8_dynamic",
            "--runtimes",
            "onnx",
        ],  # fmt: skip
        cwd=tmp_path,
        env=ranker_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert adapt.returncode == 0, adapt.stdout[-3000:] + adapt.stderr[-3000:]
    bundle = out / "bundle"
    metadata = json.loads((bundle / "metadata.json").read_text())
    adapted_on = metadata["adapted_by"]["lists"]
    logged = {"file": "logs", "sha256": lists_digest(logs), "lists": len(sent), "groups": len(sent)}
    assert adapted_on == [logged], "the card's lineage names the logs it was adapted on"
    assert (out / "report.md").is_file()

    process, url = serve(bundle, tmp_path)
    try:
        x = sent[0]
        answer = httpx.post(
            f"{url}/rank",
            json={
                "context": [{"speaker": t.speaker, "text": t.text} for t in x.context],
                "situations": list(x.situations),
                "candidates": [c.text for c in x.candidates],
            },
            timeout=60,
        )
        models = httpx.get(f"{url}/v1/models", timeout=10).json()["data"][0]
    finally:
        stop_process(process)
    assert answer.status_code == 200
    assert len(answer.json()["ranking"]) + len(answer.json()["masked"]) == len(x.candidates)
    assert models["calibrated_by"] is not None


def launch_command() -> list[str]:
    """``ranker`` as this interpreter runs it."""
    return [sys.executable, "-m", "dialogue_ranker.cli"]


def ranker_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src"), "HF_HUB_OFFLINE": "1"}
