"""``auto``'s choice kept on disk, so a restart on the same machine serves it without a trial.

A trial costs seconds at every start (each runtime compiled, checked against fp32 and timed), and
on a busy host two trials may choose differently, so two restarts would serve slightly different
scores (each runtime has its own calibration map). The cache stores the choice under a key made of
everything that decides it: the graph and its samples (digests), the processor (model, flags and
the CPUs the process may use), the runtimes' versions and the settings that shape them. Anything
else starts a new trial, whose choice replaces the file. A directory that cannot be read or
written costs only the cache (a warning), never the start.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

#: Bumped when the stored form or the trial's method changes, so older files are not read.
FORMAT = 1


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes (the graph: 23 MB hash in about 30 ms)."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


@dataclass(frozen=True)
class StoredChoice:
    """What a trial chose: the option's runtime, when, and the choice as ``/v1/models`` shows it."""

    runtime: str
    made_at: str
    choice: dict[str, Any]


@dataclass(frozen=True)
class ChoiceCache:
    """One bundle graph's stored choice in ``directory``, valid for the circumstances in ``parts``."""

    directory: Path
    #: What decides the choice (JSON-serialisable); its digest names the file.
    parts: Mapping[str, Any]

    @property
    def key(self) -> str:
        """A digest of ``parts`` (the first 16 hex digits of SHA-256)."""
        text = json.dumps({"format": FORMAT, **self.parts}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def path(self) -> Path:
        """The file this key's choice is stored in."""
        return self.directory / f"backend-choice-{self.key}.json"

    def load(self) -> StoredChoice | None:
        """The stored choice, or None when there is none (or it cannot be read: a warning)."""
        try:
            stored = json.loads(self.path.read_text())
            return StoredChoice(stored["runtime"], stored["made_at"], dict(stored["choice"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as e:
            logger.warning("backend choice cache unreadable, a new trial follows path=%s: %s", self.path, e)
            return None

    def store(self, runtime: str, choice: Mapping[str, Any]) -> None:
        """Write the option ``runtime``'s choice atomically (a temporary file renamed), or warn."""
        record = {
            "made_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "runtime": runtime,
            "parts": dict(self.parts),
            "choice": dict(choice),
        }
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=self.directory, suffix=".tmp", delete=False) as out:
                json.dump(record, out, indent=1, default=str)
            os.replace(out.name, self.path)
        except OSError as e:
            logger.warning("backend choice cache not written path=%s: %s", self.path, e)
