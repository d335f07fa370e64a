"""``ranker bank-cache``: embed the configured banks once and write their vector cache, without serving.

It takes ``ranker serve``'s settings, flags and ``RANKER_*`` variables alike: ``--bank NAME=FILE``,
``--model`` (whose ``retriever/`` embeds them) or ``--banks.retriever``, and ``--banks.cache-dir``
(default: next to each bank file); the other settings are read and not used. The banks are loaded
by the service's own loader (:class:`~dialogue_ranker.serving.banks.BankSet`), the way
``ranker serve`` loads them at start, so a service started with the same settings finds every
bank's vectors in the cache and embeds nothing. A bank already cached is only read. In Kubernetes a
Job runs it once, with the replicas' settings, before they need the cache
(``deploy/components/bank-volume``).

Exit status 0 once every bank's vectors are in the cache. 1 with the reason otherwise: no bank, a
bank file missing or malformed (its path, line and field), a retrieval encoder that does not load,
a cache directory that cannot be written (found before any embedding), a bank that failed to embed,
or vectors that were not written.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic_settings import CliApp, CliSettingsSource

from dialogue_ranker.serving.__main__ import LOG_FORMAT
from dialogue_ranker.serving.banks import BankError, BankSet, BankState, check_banks
from dialogue_ranker.serving.errors import BackendUnavailable
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.model_bundle import BundleError
from dialogue_ranker.serving.settings import Settings

logger = logging.getLogger(__name__)

PROG = "ranker bank-cache"
#: How often the banks' states are read while they embed: the loader shows its banks' states, not
#: its task, and a tenth of a second is nothing beside an embedding.
POLL_S = 0.1
_PENDING = {BankState.WAITING, BankState.EMBEDDING}


class CacheFillError(Exception):
    """The banks' vectors could not all be put in the cache."""


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the service's settings, fill the banks' cache; exit 1 saying why when it cannot."""
    source: CliSettingsSource[Settings] = CliSettingsSource(Settings, cli_prog_name=PROG)
    args = list(sys.argv[1:] if argv is None else argv)
    settings = CliApp.run(Settings, cli_args=args, cli_settings_source=source)
    logging.basicConfig(level=settings.log_level.upper(), format=LOG_FORMAT)
    try:
        kept = asyncio.run(fill_cache(settings))
    except (BankError, BundleError, BackendUnavailable, CacheFillError) as e:
        sys.exit(str(e))
    logger.info("bank cache filled banks=%d files=%s", len(kept), ",".join(str(path) for path in kept))


async def fill_cache(settings: Settings) -> list[Path]:
    """Embed every ``--bank`` as the service does at start and keep the vectors; each bank's cache file.

    Raises:
        BankError: no bank is configured, a bank file is missing or malformed (the message names its
            line and field), or there is no retrieval encoder.
        BundleError, BackendUnavailable: the retrieval encoder is not the one its metadata describes,
            or does not load.
        CacheFillError: a cache directory cannot be written, a bank failed to embed, or its vectors
            were not written.
    """
    banks = check_banks(settings)
    if not banks:
        raise BankError("no bank to embed: name one with --bank NAME=FILE (or RANKER_BANK)")
    metrics = Metrics(generators=settings.ranking.generators)
    with ThreadPoolExecutor(2, thread_name_prefix="bank-cache") as executor:
        bank_set = await BankSet.start(settings, metrics, executor, banks)
        assert bank_set is not None  # there are banks
        try:
            # Where the loader keeps each bank's vectors (the encoder is started: its identity is known).
            identity = bank_set.encoder.identity
            files = {bank.name: bank_set.builder.cache.path(bank, identity) for bank in banks}
            for directory in sorted({path.parent for path in files.values()}):
                _check_writable(directory)
            bank_set.embed_in_background()
            while any(served.state in _PENDING for served in bank_set.banks.values()):
                await asyncio.sleep(POLL_S)
        finally:
            await bank_set.close()
    failed = [served.describe() for served in bank_set.banks.values() if served.state is BankState.FAILED]
    if failed:
        raise CacheFillError("; ".join(failed))
    # The loader logs and goes on when it cannot write (a service still serves); here that is the failure.
    unwritten = [f"{name} ({path})" for name, path in files.items() if not path.is_file()]
    if unwritten:
        raise CacheFillError(f"bank vectors not written: {', '.join(unwritten)} (the warning above says why)")
    return list(files.values())


def _check_writable(directory: Path) -> None:
    """Fail before minutes of embedding rather than after, on a read-only or foreign-owned directory."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".bank-cache-check-"):
            pass
    except OSError as e:
        raise CacheFillError(f"the bank cache cannot be written in {directory}: {e}") from e


if __name__ == "__main__":
    main()
