"""Where a ``ranker adapt`` run stands: its arguments, plan and finished phases, in ``OUT/adapt.json``.

Each phase writes its outputs under ``OUT`` and is recorded here only once they are complete (the
file is replaced atomically), so a killed command, run again with ``--resume``, skips the phases
recorded and starts the first one that is not; training itself continues from its newest checkpoint
(``ranker train --resume``). A resumed command must be given the same arguments (``--minutes``
aside: the plan made on the first run is kept).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dialogue_ranker.data.ranking_data import DataError

STATE_FILE = "adapt.json"
#: Arguments that do not change what the command makes.
NOT_FINGERPRINTED = frozenset({"resume", "minutes", "stop_after", "threads"})


def fingerprint(args: dict[str, Any]) -> dict[str, Any]:
    """The arguments a resumed command must share with the first (as JSON values)."""
    return json.loads(json.dumps({k: v for k, v in args.items() if k not in NOT_FINGERPRINTED}, default=str))


class State:
    """The state file of one ``--out`` directory."""

    def __init__(self, out: Path, data: dict[str, Any]) -> None:
        self.path = out / STATE_FILE
        self.data = data

    @classmethod
    def open(cls, out: Path, args: dict[str, Any], *, resume: bool) -> State:
        """The state of a new run in ``out``, or (``resume``) of the run there.

        Raises:
            DataError: ``out`` is in use and ``resume`` is not given; nothing to resume; or the run
                there was started with other arguments.
        """
        path = out / STATE_FILE
        if not resume:
            if out.exists() and any(out.iterdir()):
                raise DataError(
                    f"--out {out} is not empty: --resume continues the run there; remove it or choose "
                    "another directory to start over"
                )
            state = cls(out, {"arguments": fingerprint(args), "phases": {}})
            state.save()
            return state
        if not path.is_file():
            raise DataError(f"--resume: {out} holds no ranker adapt run ({STATE_FILE})")
        data = json.loads(path.read_text())
        given = fingerprint(args)
        changed = sorted(
            k for k in set(given) | set(data["arguments"]) if given.get(k) != data["arguments"].get(k)
        )
        if changed:
            flags = ", ".join("--" + k.replace("_", "-") for k in changed)
            raise DataError(
                f"--resume: {out} was started with other arguments ({flags}); give the first run's, or "
                "start over in another directory"
            )
        return cls(out, data)

    def done(self, phase: str) -> bool:
        """Whether ``phase`` finished."""
        return phase in self.data["phases"]

    def facts(self, phase: str) -> dict[str, Any]:
        """What a finished phase recorded."""
        return self.data["phases"][phase]

    def finish(self, phase: str, seconds: float, facts: dict[str, Any]) -> None:
        """Record ``phase`` as finished in ``seconds`` with its ``facts``."""
        self.data["phases"][phase] = {"seconds": round(seconds, 1), **facts}
        self.save()

    def spent(self) -> float:
        """Seconds the finished phases took (a killed phase's time is not known, so not counted)."""
        return sum(p["seconds"] for p in self.data["phases"].values())

    def save(self) -> None:
        """Write the file atomically (a kill leaves the previous one whole)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(self.data, indent=2) + "\n")
        os.replace(temporary, self.path)
