"""Each text's vector under its digest: known texts are reused whatever their row, only new ones embedded."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dialogue_ranker.serving.banks.index import QuantizedVectors
from dialogue_ranker.serving.banks.text_vectors import KeyedVectors, assemble, digest_keys, text_digests

DIM = 4


class CountingEncoder:
    """Vectors made from the text's length and letters, and every text it was asked for."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.asked += texts
        rows = np.array([[len(t), ord(t[0]), ord(t[-1]), 1.0] for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def made(texts: list[str], known: KeyedVectors | None = None, *, identity: str = "encoder-a"):
    encoder = CountingEncoder()
    result = assemble(texts, text_digests(texts, identity), known, encoder, dim=DIM)
    return result, encoder.asked


def test_a_digest_depends_on_the_text_and_the_encoder() -> None:
    a, b = text_digests(["hello", "bye", "hello"], "encoder-a"), text_digests(["hello"], "encoder-b")
    assert a.shape == (3, 32) and a.dtype == np.uint8
    keys = digest_keys(a)
    assert keys[0] == keys[2] != keys[1] and digest_keys(b)[0] != keys[0]


def test_the_first_vectors_embed_each_distinct_text_once() -> None:
    result, asked = made(["hi there", "bye now", "hi there"])
    assert sorted(asked) == ["bye now", "hi there"]
    assert (result.embedded, result.reused) == (2, 0)
    codes = result.vectors.vectors.codes
    assert np.array_equal(codes[0], codes[2]) and not np.array_equal(codes[0], codes[1])


def test_a_new_version_embeds_only_its_new_texts_and_keeps_the_known_codes_as_they_are() -> None:
    first, _ = made(["alpha", "beta", "gamma", "delta"])
    second, asked = made(["delta", "gamma", "epsilon", "alpha"], first.vectors)
    assert asked == ["epsilon"] and (second.embedded, second.reused) == (1, 3)
    old, new = first.vectors.vectors, second.vectors.vectors
    for new_row, old_row in ((0, 3), (1, 2), (3, 0)):
        assert np.array_equal(new.codes[new_row], old.codes[old_row])
        assert new.scales[new_row] == old.scales[old_row]


def test_another_encoder_knows_none_of_the_vectors() -> None:
    first, _ = made(["alpha", "beta"])
    again, asked = made(["alpha", "beta"], first.vectors, identity="encoder-b")
    assert sorted(asked) == ["alpha", "beta"] and again.reused == 0


def test_the_same_rows_in_the_same_order_keep_their_hubness() -> None:
    texts = ["alpha", "beta"]
    digests = text_digests(texts, "encoder-a")
    kept = KeyedVectors(digests, QuantizedVectors.from_float(np.eye(2, DIM, dtype=np.float32)))
    assert kept.same_rows(text_digests(texts, "encoder-a"))
    assert not kept.same_rows(text_digests(texts[::-1], "encoder-a"))
    assert not kept.same_rows(text_digests(texts[:1], "encoder-a"))
