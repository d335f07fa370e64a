"""The local Triton's one-row-per-call split feeds each row exactly as the embedded backend does."""

from pathlib import Path

import numpy as np
from helpers import tiny_list_encoder

from dialogue_ranker.export.triton_local import calls_of
from dialogue_ranker.serving.list_encoding import SIMILARITY_INPUT_NAMES
from dialogue_ranker.serving.tokenization import Turn

RANKER_INPUTS = ("input_ids", "token_type_ids", "position_ids", "segment_ids")


def test_each_call_is_the_rows_own_unpadded_feeds_similarity_inputs_included(tmp_path: Path) -> None:
    encoder = tiny_list_encoder(tmp_path, similarity=1)
    turns = [Turn("user", "could you make some coffee " * 3)]
    requests = [
        encoder.encode_request(turns, ["the machine is sorry"], ["sure " * 7, "no", "yes", "tea"]),
        encoder.encode_request([Turn("user", "hi")], [], ["coffee"]),
    ]
    sequences = [s for request in requests for s in request]
    names = (*RANKER_INPUTS, *SIMILARITY_INPUT_NAMES)
    # Triton's batch: every row padded to one bucket longer than any row, as the gateway sends it.
    bucket = 64
    batch = encoder.pad(sequences, pad_to=bucket).as_feeds(names)
    # The case that broke: a row's similarity sequence longer than its ranker sequence.
    assert any(len(s.similarity_ids) > len(s) for s in sequences)

    calls = list(calls_of(batch, 1))

    assert len(calls) == len(sequences)
    for call, sequence in zip(calls, sequences, strict=True):
        alone = encoder.pad([sequence]).as_feeds(names)  # what the embedded backend runs for the row
        assert call.keys() == alone.keys()
        for name in names:
            np.testing.assert_array_equal(call[name], alone[name], err_msg=name)
