"""Each text's vector under its digest, so that a text the service has embedded is never embedded again.

A text's digest is the SHA-256 of the encoder's identity and the text: the vector depends on
nothing else. A bank's vectors are kept with each row's digest (:class:`KeyedVectors`), in memory
for the version being served and on disk in the cache (:mod:`.cache`). A new version of the bank
(a reload, or a start after the file changed) takes the vector of every text it shares with the
known ones by digest and embeds only the new texts (:func:`assemble`); its rows may be in any
order, and an id, generator or action edit changes no vector.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from dialogue_ranker.serving.banks.index import QuantizedVectors

#: Bytes of a digest (SHA-256).
DIGEST_BYTES = 32
#: Embeds texts: (texts, dim) float32 unit vectors, in the given order.
Embed = Callable[[Sequence[str]], np.ndarray]


def text_digests(texts: Sequence[str], encoder_identity: str) -> np.ndarray:
    """Each text's digest under the encoder: (texts, 32) uint8."""
    prefix = hashlib.sha256(encoder_identity.encode() + b"\0")
    raw = bytearray()
    for text in texts:
        digest = prefix.copy()
        digest.update(text.encode("utf-8"))
        raw += digest.digest()
    return np.frombuffer(bytes(raw), dtype=np.uint8).reshape(len(texts), DIGEST_BYTES)


def digest_keys(digests: np.ndarray) -> list[bytes]:
    """Each row's digest as bytes, to look it up in a dict."""
    raw = np.ascontiguousarray(digests, dtype=np.uint8).tobytes()
    return [raw[i : i + DIGEST_BYTES] for i in range(0, len(raw), DIGEST_BYTES)]


@dataclass(frozen=True)
class KeyedVectors:
    """A bank's vectors, each row with its text's digest, and the hubness of these rows in this order."""

    digests: np.ndarray
    vectors: QuantizedVectors
    #: Neighbours -> each row's centred hubness; it follows from every row, so it holds only for
    #: exactly these rows (see :meth:`same_rows`).
    hubness: Mapping[int, np.ndarray] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        """The number of vectors."""
        return self.vectors.rows

    def same_rows(self, digests: np.ndarray) -> bool:
        """Whether ``digests`` are these rows' digests, in this order (the hubness then holds)."""
        return bool(np.array_equal(self.digests, digests))


@dataclass(frozen=True)
class Assembled:
    """A bank's vectors, and how many texts were embedded for them and how many rows reused a vector."""

    vectors: KeyedVectors
    embedded: int
    reused: int


def assemble(
    texts: Sequence[str], digests: np.ndarray, known: KeyedVectors | None, embed: Embed, *, dim: int
) -> Assembled:
    """The vectors of ``texts`` (digests ``digests``): reused from ``known`` by digest, the rest embedded.

    A text that appears on several rows is embedded once. Reused rows keep their int8 codes as
    they are, so an unchanged text searches exactly as before.

    Raises:
        whatever ``embed`` raises.
    """
    keys = digest_keys(digests)
    where = {key: row for row, key in enumerate(digest_keys(known.digests))} if known is not None else {}
    source = np.fromiter((where.get(key, -1) for key in keys), dtype=np.int64, count=len(keys))
    codes = np.empty((len(texts), dim), dtype=np.int8)
    scales = np.empty(len(texts), dtype=np.float32)
    reused = np.flatnonzero(source >= 0)
    if known is not None and len(reused):
        codes[reused] = known.vectors.codes[source[reused]]
        scales[reused] = known.vectors.scales[source[reused]]
    first_row: dict[bytes, int] = {}
    for row in np.flatnonzero(source < 0):
        first_row.setdefault(keys[row], int(row))
    if first_row:
        fresh = QuantizedVectors.from_float(embed([texts[row] for row in first_row.values()]))
        fresh_of = {key: i for i, key in enumerate(first_row)}
        missing = np.flatnonzero(source < 0)
        picks = np.fromiter((fresh_of[keys[row]] for row in missing), dtype=np.int64, count=len(missing))
        codes[missing] = fresh.codes[picks]
        scales[missing] = fresh.scales[picks]
    vectors = KeyedVectors(digests, QuantizedVectors(codes=codes, scales=scales))
    return Assembled(vectors, embedded=len(first_row), reused=len(reused))
