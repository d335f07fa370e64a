"""What the load shapes (``loadtests/shapes/``) read on every tick: the locust command's options.

Kept outside ``shapes/``: Locust takes the first LoadTestShape class of each file it is given, so
the shape files hold one class each and share this function instead of a base class.
"""

from __future__ import annotations

import argparse

from locust import LoadTestShape


def options_while_running(shape: LoadTestShape, name: str) -> argparse.Namespace | None:
    """The parsed options, or None once ``--run-time`` is over (which ends the run).

    Raises:
        RuntimeError: Locust runs without its command line (as a library).
    """
    options = shape.runner.environment.parsed_options if shape.runner else None
    if options is None:
        raise RuntimeError(f"the {name} shape reads the locust command's options")
    if options.run_time and shape.get_run_time() >= options.run_time:
        return None
    return options
