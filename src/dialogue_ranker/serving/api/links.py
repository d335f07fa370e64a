"""OpenAPI links: a value one route answers with that another route's request takes.

Client generators and fuzzers follow them (the contract test, ``benchmarks/contract_fuzz.py``,
chains the calls they describe): the bank ``GET /v1/banks`` lists is the one a ``/rank`` request
names (and the one its own routes take in their path), the model ``GET /v1/models`` lists is the
one a ranking request picks, and the request id ``/rank`` answers with is the one
``POST /v1/feedback`` names.
"""

from __future__ import annotations

from typing import Any


def body_field_link(path: str, *, field: str, pointer: str, description: str) -> dict[str, Any]:
    """A link to ``POST path`` whose body's ``field`` is this response's value at ``pointer``."""
    # A JSON pointer into the document's paths: "~" and "/" in the path are escaped (RFC 6901).
    escaped = path.replace("~", "~0").replace("/", "~1")
    return {
        "operationRef": f"#/paths/{escaped}/post",
        "requestBody": {field: f"$response.body#{pointer}"},
        "description": description,
    }


def path_parameter_link(
    path: str, method: str, *, parameter: str, pointer: str, description: str
) -> dict[str, Any]:
    """A link to ``method path`` whose path ``parameter`` is this response's value at ``pointer``."""
    escaped = path.replace("~", "~0").replace("/", "~1")
    return {
        "operationRef": f"#/paths/{escaped}/{method}",
        "parameters": {parameter: f"$response.body#{pointer}"},
        "description": description,
    }


#: On ``GET /v1/models``: the ranking routes, each with the first listed model as its ``model``.
MODEL_LINKS = {
    name: body_field_link(path, field="model", pointer="/data/0/id", description=f"{path} with this model.")
    for name, path in (("Rank", "/rank"), ("RerankV2", "/v2/rerank"), ("RerankV1", "/v1/rerank"))
}

#: On ``GET /v1/banks``: ``/rank`` with the first listed bank as its ``bank``, and that bank's own routes.
BANK_LINKS = {
    "RankWithBank": body_field_link(
        "/rank", field="bank", pointer="/data/0/name", description="/rank with this bank."
    ),
    "GetBank": path_parameter_link(
        "/v1/banks/{name}", "get", parameter="name", pointer="/data/0/name", description="This bank alone."
    ),
    "ReloadBank": path_parameter_link(
        "/v1/banks/{name}/reload",
        "post",
        parameter="name",
        pointer="/data/0/name",
        description="Reload this bank from its file.",
    ),
}

#: On ``POST /rank``: feedback on that request.
FEEDBACK_LINKS = {
    "Feedback": body_field_link(
        "/v1/feedback", field="request_id", pointer="/request_id", description="Feedback on this request."
    )
}
