"""The command's progress on stderr: a bar over the budget's seconds, moved at each phase's end.

Its rate is seconds of work per second of wall clock, about one, so tqdm's remaining time is the
budget's end; training shows its own bar of steps, with their ETA, inside it.
"""

from __future__ import annotations

import sys
import time

from tqdm.auto import tqdm

FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s of the budget [{elapsed}<{remaining}]"


class Progress:
    """The bar: ``spent`` seconds of ``budget_s`` already behind (a resumed run's finished phases)."""

    def __init__(self, budget_s: float, spent: float) -> None:
        behind = round(min(spent, budget_s))
        self.bar = tqdm(
            total=round(budget_s),
            initial=behind,
            desc="adapt",
            file=sys.stderr,
            bar_format=FORMAT,
            dynamic_ncols=True,
        )
        self.phase_started = time.perf_counter()

    def start(self, phase: str, number: int, of: int) -> None:
        """Say which phase runs."""
        self.bar.set_description(f"adapt {number}/{of} {phase}")
        self.phase_started = time.perf_counter()

    def finish(self) -> float:
        """Move the bar by the phase's seconds; returns them."""
        seconds = time.perf_counter() - self.phase_started
        self.bar.update(min(seconds, self.bar.total - self.bar.n))
        return seconds

    def say(self, line: str) -> None:
        """A line on stderr above the bar."""
        self.bar.write(line, file=sys.stderr)

    def close(self) -> None:
        """End the bar."""
        self.bar.close()
