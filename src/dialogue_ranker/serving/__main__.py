"""``ranker serve``: settings from flags and ``RANKER_*`` variables, then uvicorn."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

import uvicorn
from pydantic_settings import CliApp

from dialogue_ranker.serving.api.auth import KeyFileError
from dialogue_ranker.serving.api.connections import guarded_protocol
from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.banks import BankError, check_banks
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.model_bundle import BundleError
from dialogue_ranker.serving.request_logs import LogsError, check_logs
from dialogue_ranker.serving.runtime import AliasError, check_aliases
from dialogue_ranker.serving.settings import Settings

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def main(argv: Sequence[str] | None = None) -> None:
    """Parse settings and serve until interrupted."""
    settings = CliApp.run(Settings, cli_args=list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(level=settings.log_level.upper(), format=LOG_FORMAT)
    metrics = Metrics(generators=settings.ranking.generators)
    try:
        check_aliases(settings)
        check_logs(settings.logs)
        # Read before the server starts, so that a bad bank file stops it with its line and field.
        banks = check_banks(settings)
        app = create_app(settings, metrics=metrics, banks=banks)
    except KeyFileError as e:
        sys.exit(f"auth: {e}")
    except (AliasError, BankError, BundleError, LogsError) as e:
        sys.exit(str(e))
    # No access log: a line per request costs throughput and the metrics cover status and time.
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=False,
        timeout_graceful_shutdown=settings.shutdown_timeout_s,
        http=guarded_protocol(settings.server, metrics),
        timeout_keep_alive=settings.server.keep_alive_timeout_s,
    )


if __name__ == "__main__":
    main()
