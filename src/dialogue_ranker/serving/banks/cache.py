"""The banks' embedding cache on disk: a restart reads every vector it holds, and embeds only new texts.

One ``.npz`` per bank and encoder, ``<bank name>-<key>.bank-vectors.npz``, in ``banks.cache_dir``
or (by default) next to the bank file. The key is a SHA-256 of the encoder's identity (its graph's
and tokenizer's digests, its max length) and this file's layout. The file holds the bank's int8
rows with each row's text digest (:mod:`.text_vectors`), so a start or a reload takes the vector of
every text it knows by digest, whatever the file's order or its ids, and embeds only the others. It
also keeps the bank's hubness (``hubness-<neighbours>``) once a fusion has needed it: it holds for
exactly these rows. A write goes to a temporary file renamed into place (a reader never sees half a
file) and removes the bank's other files (another encoder's, an older layout's); a directory that
cannot be written costs only the cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
from pathlib import Path

import numpy as np

from dialogue_ranker.serving.banks.bank_file import Bank
from dialogue_ranker.serving.banks.index import QuantizedVectors
from dialogue_ranker.serving.banks.text_vectors import DIGEST_BYTES, KeyedVectors

logger = logging.getLogger(__name__)

#: The stored layout: each row's text digest, its int8 codes and float32 scale. A new layout gets a
#: new key (a file of the old one is embedded again once, then removed).
LAYOUT = "digest-int8-rows/2"
SUFFIX = ".bank-vectors.npz"
#: What follows ``<bank name>-`` in a cache file's name.
_KEYED = re.compile(r"[0-9a-f]{24}" + re.escape(SUFFIX))
_HUBNESS = re.compile(r"hubness-(\d+)")


def cache_key(encoder_identity: str) -> str:
    """The hex key of a bank's vectors under an encoder (see the module's docstring)."""
    return hashlib.sha256(f"{LAYOUT}\0{encoder_identity}\0".encode()).hexdigest()


class EmbeddingCache:
    """Reads and writes banks' keyed vectors."""

    def __init__(self, directory: Path | None = None) -> None:
        #: None: each bank's vectors go next to its file.
        self.directory = directory

    def path(self, bank: Bank, encoder_identity: str) -> Path:
        """Where a bank's vectors under the encoder are kept."""
        key = cache_key(encoder_identity)
        return (self.directory or bank.path.parent) / f"{bank.name}-{key[:24]}{SUFFIX}"

    def load(self, bank: Bank, encoder_identity: str, dim: int) -> KeyedVectors | None:
        """The kept vectors (the bank's last saved version), or None: none kept, or they do not fit."""
        path = self.path(bank, encoder_identity)
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as stored:
                key, digests = str(stored["key"]), stored["digests"]
                codes, scales = stored["codes"], stored["scales"]
                hubness = {
                    int(match[1]): stored[name].astype(np.float32, copy=False)
                    for name in stored.files
                    if (match := _HUBNESS.fullmatch(name))
                }
        except (OSError, ValueError, KeyError) as e:
            logger.warning(
                "bank cache unreadable bank=%s path=%s error=%s: embedding again", bank.name, path, e
            )
            return None
        rows = len(digests)
        fits = (
            key == cache_key(encoder_identity)
            and digests.shape == (rows, DIGEST_BYTES)
            and codes.shape == (rows, dim)
            and scales.shape == (rows,)
            and all(values.shape == (rows,) for values in hubness.values())
        )
        if not fits:
            logger.warning("bank cache does not fit bank=%s path=%s: embedding again", bank.name, path)
            return None
        vectors = QuantizedVectors(codes=codes.astype(np.int8, copy=False), scales=scales.astype(np.float32))
        return KeyedVectors(digests.astype(np.uint8, copy=False), vectors, hubness)

    def save(self, bank: Bank, encoder_identity: str, kept: KeyedVectors) -> Path | None:
        """Keep ``kept`` (its hubness too) for the bank and drop the bank's other files.

        None when it cannot write.
        """
        path = self.path(bank, encoder_identity)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp.npz")
        extra = {f"hubness-{neighbours}": values for neighbours, values in kept.hubness.items()}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(
                temporary,
                key=np.array(cache_key(encoder_identity)),
                digests=kept.digests,
                codes=kept.vectors.codes,
                scales=kept.vectors.scales,
                **extra,
            )
            os.replace(temporary, path)
        except OSError as e:
            logger.warning("bank cache not written bank=%s path=%s error=%s", bank.name, path, e)
            with contextlib.suppress(OSError):  # nothing may be there, or no directory at all
                temporary.unlink(missing_ok=True)
            return None
        for older in path.parent.glob(f"{bank.name}-*{SUFFIX}"):
            # Only this bank's: "faq-" also begins the files of a bank named "faq-v2".
            if older != path and _KEYED.fullmatch(older.name[len(bank.name) + 1 :]):
                older.unlink(missing_ok=True)
        return path
