"""API keys: which paths need which keys, and constant-time checks against stored hashes.

Keys are read once at start from files of one key per line and kept only as SHA-256 digests; a
presented key is hashed and compared with every digest by ``hmac.compare_digest``, so neither
the comparison's time nor a memory dump gives a key away. A key never reaches a log line, a
metric label or an error message.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dialogue_ranker.serving.errors import Unauthorized
from dialogue_ranker.serving.settings import AuthSettings

#: Paths any caller may read: probes for the orchestrator, and the API's own documentation.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/docs", "/openapi.json"})
OPEN_PREFIXES = ("/docs/",)
METRICS_PATH = "/metrics"


class KeyFileError(Exception):
    """A key file is missing, unreadable or holds no key."""


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


class ApiKeys:
    """A set of accepted keys, held as digests."""

    def __init__(self, keys: Iterable[str]) -> None:
        self._digests = [_digest(k) for k in keys]
        if not self._digests:
            raise KeyFileError("no API key given")

    @classmethod
    def from_file(cls, path: Path) -> ApiKeys:
        """One key per line; blank lines and lines starting with ``#`` are skipped.

        Raises:
            KeyFileError: the file cannot be read or holds no key.
        """
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise KeyFileError(f"{path}: cannot read the key file ({type(e).__name__})") from None
        keys = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
        if not keys:
            raise KeyFileError(f"{path}: no key in the file")
        return cls(keys)

    def accepts(self, key: str) -> bool:
        """True when ``key`` is one of the keys; compares against every digest in constant time."""
        presented = _digest(key)
        found = False
        for digest in self._digests:
            found |= hmac.compare_digest(digest, presented)
        return found


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value, if any."""
    if authorization is None:
        return None
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


@dataclass(frozen=True)
class AccessPolicy:
    """Which keys a path needs: API keys for scoring routes, metrics keys for ``/metrics``."""

    api_keys: ApiKeys | None = None
    metrics_keys: ApiKeys | None = None

    @classmethod
    def from_settings(cls, settings: AuthSettings) -> AccessPolicy:
        """Read the configured key files.

        Raises:
            KeyFileError: a configured file cannot be read or holds no key.
        """
        api, metrics = settings.api_keys_file, settings.metrics_keys_file
        return cls(
            api_keys=ApiKeys.from_file(api) if api else None,
            metrics_keys=ApiKeys.from_file(metrics) if metrics else None,
        )

    def keys_for(self, path: str) -> ApiKeys | None:
        """The keys ``path`` needs, or None when it is open."""
        if path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
            return None
        if path == METRICS_PATH:
            return self.metrics_keys
        return self.api_keys

    def check(self, path: str, authorization: str | None) -> None:
        """Pass, or raise for a request to ``path`` without a valid key in its Authorization header.

        Raises:
            Unauthorized: the path needs a key and none or a wrong one was given (401).
        """
        keys = self.keys_for(path)
        if keys is None:
            return
        token = bearer_token(authorization)
        if token is None:
            raise Unauthorized("authorization: an `Authorization: Bearer <key>` header is required")
        if not keys.accepts(token):
            raise Unauthorized("authorization: the key is not valid")
