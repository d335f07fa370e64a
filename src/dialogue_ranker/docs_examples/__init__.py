"""The request/answer examples of the README and the docs, produced by the code so they cannot drift.

Each example is declared once here (:data:`EXAMPLES`: route, body). The pages hold regions between
markers that this module writes:

    <!-- example:hot-room request -->   the curl command (text; `ranker docs` rewrites it)
    <!-- /example -->
    <!-- example:hot-room answer runtime=openvino-bf16 kernels=avx512-bf16 -->   the live answer
    <!-- /example -->                                        and who gave it, on which bf16 kernels

``ranker docs`` rewrites the request regions (no model needed) and ``--check`` fails on an edited
one; ``ranker docs --examples`` also sends every example to the shipped model through a real
``ranker serve`` on loopback at its defaults (``--backend auto``) and writes the answers, with the
model, the runtime ``auto`` chose and the CPU in a caption. The suite
(``tests/integration/test_docs_examples.py``) sends each documented request again and fails when a
documented figure differs from the live answer beyond :data:`SAME_RUNTIME` (the documented runtime
forced, where this host can run it on the same kernels) or :data:`OTHER_RUNTIME` (elsewhere: each
runtime has its own calibration map, and AMX and AVX-512 BF16 round bf16 differently, so their
scores differ slightly): :func:`tolerance_for`.
"""

from __future__ import annotations

from dialogue_ranker.docs_examples.compare import (
    OTHER_RUNTIME,
    SAME_RUNTIME,
    Tolerance,
    differences,
    rounded,
)
from dialogue_ranker.docs_examples.live import (
    LiveService,
    live_service,
    machine,
    runtime_flags,
    tolerance_for,
    write_answers,
)
from dialogue_ranker.docs_examples.pages import (
    REGION,
    Region,
    documented_answer,
    regions,
    render_answer,
    render_file,
    render_json,
    render_request,
    rewrite,
    shown_answer,
    stale_requests,
    write_requests,
)
from dialogue_ranker.docs_examples.registry import (
    EXAMPLES,
    FILES,
    HOT_ROOM,
    NULL_FIELDS,
    PAGES,
    SUPPORT_BANK,
    VOLATILE,
    Example,
)

__all__ = [
    "EXAMPLES",
    "Example",
    "FILES",
    "HOT_ROOM",
    "LiveService",
    "NULL_FIELDS",
    "OTHER_RUNTIME",
    "PAGES",
    "REGION",
    "Region",
    "SAME_RUNTIME",
    "SUPPORT_BANK",
    "Tolerance",
    "VOLATILE",
    "differences",
    "documented_answer",
    "live_service",
    "machine",
    "regions",
    "render_answer",
    "render_file",
    "render_json",
    "render_request",
    "rewrite",
    "rounded",
    "runtime_flags",
    "tolerance_for",
    "shown_answer",
    "stale_requests",
    "write_answers",
    "write_requests",
]
