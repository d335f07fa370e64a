"""Constant throughput: ``--target-rps`` requests/s from ``--users`` users for ``--run-time``.

Pass after the locustfile (``-f loadtests/locustfile.py,loadtests/shapes/constant.py``) with
``--target-rps``. The users pace themselves (the locustfile's wait time shares the rate among
the users running), so the offered load stays fixed while latency changes; this shape holds
the user count and ends the run. Give enough users: a user sends one request at a time, so the
rate needs at least rate x latency users; the SLO summary says when the rate was not reached.
"""

from __future__ import annotations

import logging

from locust import LoadTestShape

from loadtests.shape_options import options_while_running

logger = logging.getLogger(__name__)


class ConstantThroughputShape(LoadTestShape):
    """``--users`` users, paced to ``--target-rps`` in total, until ``--run-time``."""

    # Reads --users, --spawn-rate and --run-time instead of ignoring them.
    use_common_options = True

    def tick(self) -> tuple[int, float] | None:
        """Users and spawn rate for now; None once ``--run-time`` is over."""
        options = options_while_running(self, "constant-throughput")
        if options is None:
            return None
        if options.target_rps <= 0:
            # Unpaced users would make this a plain fixed-users run under the wrong name.
            logger.error("the constant-throughput shape needs --target-rps > 0; stopping")
            return None
        return options.num_users, options.spawn_rate
