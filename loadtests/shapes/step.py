"""Step load: add ``--step-users`` users every ``--step-time-s`` seconds, up to ``--users``.

Pass after the locustfile (``-f loadtests/locustfile.py,loadtests/shapes/step.py``). The run
ends after ``--run-time``; without it, the last step holds until interrupted. Each step shows
the latency at one concurrency, so the knee where p95 or shed load (429) climbs is visible in
the stats history CSV and the HTML report's charts.
"""

from __future__ import annotations

import math
from typing import Any

from locust import LoadTestShape, events
from locust.env import Environment

from loadtests.shape_options import options_while_running


@events.init_command_line_parser.add_listener
def _add_options(parser: Any, **_kwargs: Any) -> None:
    parser.add_argument(
        "--step-users", type=int, default=2, env_var="LOADTEST_STEP_USERS", help="Users added per step."
    )
    parser.add_argument(
        "--step-time-s", type=float, default=10.0, env_var="LOADTEST_STEP_TIME_S", help="Seconds per step."
    )


@events.init.add_listener
def _check_options(environment: Environment, **_kwargs: Any) -> None:
    options = environment.parsed_options
    if options is not None and (options.step_users < 1 or options.step_time_s <= 0):
        # Locust carries on after an exception in a listener; a shape that cannot tick must stop the run.
        raise SystemExit("loadtests: need --step-users >= 1 and --step-time-s > 0")


class StepLoadShape(LoadTestShape):
    """``--step-users`` more users every ``--step-time-s`` seconds until ``--users``."""

    # Reads --users, --spawn-rate and --run-time instead of ignoring them.
    use_common_options = True

    def tick(self) -> tuple[int, float] | None:
        """Users and spawn rate for now; None once ``--run-time`` is over."""
        options = options_while_running(self, "step")
        if options is None:
            return None
        step = math.floor(self.get_run_time() / options.step_time_s) + 1
        return min(step * options.step_users, options.num_users), options.spawn_rate
