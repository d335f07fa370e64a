"""``python -m service``: settings from flags and ``RANKER_*`` variables, then uvicorn."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

import uvicorn
from pydantic_settings import CliApp

from service.app import create_app
from service.settings import Settings

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def main(argv: Sequence[str] | None = None) -> None:
    """Parse settings and serve until interrupted."""
    settings = CliApp.run(Settings, cli_args=list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(level=settings.log_level.upper(), format=LOG_FORMAT)
    # No access log: a line per request costs throughput and the metrics cover status and time.
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=False,
        timeout_graceful_shutdown=settings.shutdown_timeout_s,
    )


if __name__ == "__main__":
    main()
