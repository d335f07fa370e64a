"""The banks' embedding cache on disk: a restart with the same texts and encoder loads in seconds.

One ``.npz`` per bank, ``<bank name>-<key>.bank-vectors.npz``, in ``banks.cache_dir`` or (by
default) next to the bank file. The key is a SHA-256 of what the vectors depend on: the bank's
texts in order, the encoder's identity (its graph's and tokenizer's digests, its max length) and
this file's layout. So a changed text or encoder misses and re-embeds; an edited id, action or
generator does not. The file also keeps the bank's hubness (``hubness-<neighbours>``) once a fusion
has needed it: it follows from the vectors alone. A write goes to a temporary file renamed into
place (a reader never sees half a file) and removes the bank's older files; a directory that cannot
be written costs only the cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from dialogue_ranker.serving.banks.bank_file import Bank
from dialogue_ranker.serving.banks.index import QuantizedVectors

logger = logging.getLogger(__name__)

#: The stored layout: int8 codes and a float32 scale per row. A new layout gets a new key.
LAYOUT = "int8-rows/1"
SUFFIX = ".bank-vectors.npz"
#: What follows ``<bank name>-`` in a cache file's name.
_KEYED = re.compile(r"[0-9a-f]{24}" + re.escape(SUFFIX))


def cache_key(bank: Bank, encoder_identity: str) -> str:
    """The hex key of a bank's vectors under an encoder (see the module's docstring)."""
    digest = hashlib.sha256()
    for part in (LAYOUT, bank.texts_sha256, encoder_identity):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()


class EmbeddingCache:
    """Reads and writes banks' quantized vectors under their key."""

    def __init__(self, directory: Path | None = None) -> None:
        #: None: each bank's vectors go next to its file.
        self.directory = directory

    def path(self, bank: Bank, key: str) -> Path:
        """Where a bank's vectors under ``key`` are kept."""
        return (self.directory or bank.path.parent) / f"{bank.name}-{key[:24]}{SUFFIX}"

    def load(self, bank: Bank, key: str, dim: int) -> QuantizedVectors | None:
        """The kept vectors, or None when there are none (or they do not fit the bank: re-embed)."""
        path = self.path(bank, key)
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as stored:
                kept_key, codes, scales = str(stored["key"]), stored["codes"], stored["scales"]
        except (OSError, ValueError, KeyError) as e:
            logger.warning(
                "bank cache unreadable bank=%s path=%s error=%s: embedding again", bank.name, path, e
            )
            return None
        if kept_key != key or codes.shape != (bank.size, dim) or scales.shape != (bank.size,):
            logger.warning("bank cache does not fit bank=%s path=%s: embedding again", bank.name, path)
            return None
        return QuantizedVectors(codes=codes.astype(np.int8, copy=False), scales=scales.astype(np.float32))

    def load_hubness(self, bank: Bank, key: str, neighbours: int) -> np.ndarray | None:
        """The kept hubness over ``neighbours`` (None: not kept, or not one value per response)."""
        path = self.path(bank, key)
        try:
            with np.load(path, allow_pickle=False) as stored:
                if str(stored["key"]) != key or f"hubness-{neighbours}" not in stored:
                    return None
                values = stored[f"hubness-{neighbours}"]
        except (OSError, ValueError, KeyError):
            return None  # load() has already said why the file is unreadable
        return values.astype(np.float32, copy=False) if values.shape == (bank.size,) else None

    def save(
        self, bank: Bank, key: str, vectors: QuantizedVectors, hubness: Mapping[int, np.ndarray] | None = None
    ) -> Path | None:
        """Keep ``vectors`` (and ``hubness`` by neighbours) under ``key`` and drop the bank's older files.

        None when it cannot write.
        """
        path = self.path(bank, key)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp.npz")
        extra = {f"hubness-{neighbours}": values for neighbours, values in (hubness or {}).items()}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(temporary, key=np.array(key), codes=vectors.codes, scales=vectors.scales, **extra)
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
