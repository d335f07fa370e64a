r"""Seed 24's control moved back toward 2.10.0 (2026-12-07-interpolating-seed-24.md).

    for a in 0.35 0.5 0.65 0.8; do
      HF_HUB_OFFLINE=1 .venv/bin/ranker interpolate --run runs/probe-multi-right/control-s24 \
          --toward-bundle runs/model-2.10.0 --alphas $a --alpha $a --out runs/probe-interp/s24-a$a
    done
    HF_HUB_OFFLINE=1 .venv/bin/python docs/research/probes/2026-12-07-interpolate-s24.py \
        runs/probe-pointwise/start runs/probe-multi-right/control-s24 runs/probe-interp/s24-a0.8 ...

The frontier probe of 2026-12-07-multi-right-frontier.py on the same dev samples, except that
Topical-Chat gets 600 dev lists instead of 200: the release check refused seed 24 on Topical-Chat
ranking (test R@1 -0.055), which 200 dev lists had shown as -0.025.
"""

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "frontier", Path(__file__).with_name("2026-12-07-multi-right-frontier.py")
)
frontier = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(frontier)

if __name__ == "__main__":
    frontier.pointwise.SETS["topical-chat"] = ("topical-chat.jsonl", "dev", 600)
    frontier.main([Path(p) for p in sys.argv[1:]])
