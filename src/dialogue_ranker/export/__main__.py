"""``ranker export`` (``python -m dialogue_ranker.export``): a training run to a served bundle.

The run is one of ``ranker train`` (a shared-prefix ranker); see
:mod:`dialogue_ranker.export.shared_prefix`. A run that is not finished, or a per-pair design run
(``ranker train --layout pair``), is refused by name before anything loads.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dialogue_ranker.export import shared_prefix


def main(argv: list[str] | None = None) -> dict:
    """Check the run directory, then export it."""
    peek = argparse.ArgumentParser(add_help=False)
    peek.add_argument("--run")
    given = peek.parse_known_args(argv)[0].run
    if given:
        config = Path(given) / "config.json"
        if not config.is_file():
            # A run directory is complete only when training ends (config.json is written last).
            sys.exit(f"{given}: not a finished training run (no config.json)")
        kind = json.loads(config.read_text()).get("encoding", {}).get("kind")
        if kind == "pair-design-run":
            sys.exit(f"{given}: a per-pair design run (ranker train --layout pair) is not exported")
    return shared_prefix.main(argv)


if __name__ == "__main__":
    main()
