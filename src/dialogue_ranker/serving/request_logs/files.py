"""Log files of one kind in one directory: appended, a new file past a size, the oldest deleted.

Each file is ``<kind>-<UTC time it was opened>.jsonl`` (``requests-20261128T100000123456Z.jsonl``),
so names sort in the order the files were written, and a file, once named, is only appended to
(while it is the newest) or deleted (when it is the oldest past the retention count).

Why not :class:`logging.handlers.RotatingFileHandler`: it rotates by renaming, ``requests.jsonl``
to ``requests.jsonl.1``, ``.1`` to ``.2`` and so on at every rotation. A reader that runs while
the service writes (``ranker adapt`` on a live directory) lists the files and then opens them;
between the two a rotation shifts every name, and the reader reads a file twice or misses one.
Names that never change make a listing true for as long as a file exists, and a reader can tell
which files it has already read. The handler's record formatting and lock add nothing to one
writer thread writing ready-made lines.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import BinaryIO

_STAMP = "%Y%m%dT%H%M%S%fZ"


def log_files(directory: Path, kind: str, *, tree: bool = False) -> list[Path]:
    """The ``kind`` files in ``directory`` (and with ``tree`` its subdirectories), oldest first.

    Oldest by the time a file was opened, its name; none when the directory does not exist.
    """
    pattern = re.compile(rf"{re.escape(kind)}-\d{{8}}T\d{{12}}Z\.jsonl")
    if not directory.is_dir():
        return []
    paths = directory.rglob(f"{kind}-*.jsonl") if tree else directory.iterdir()
    found = (path for path in paths if pattern.fullmatch(path.name) and path.is_file())
    return sorted(found, key=lambda path: (path.name, str(path)))


def check_writable(directory: Path) -> None:
    """Make ``directory`` if missing and write (then delete) a file in it.

    Raises:
        OSError: it cannot be made or written.
    """
    directory.mkdir(parents=True, exist_ok=True)
    probe = directory / ".ranker-write-check"
    probe.write_bytes(b"")
    probe.unlink()


class RotatingJsonl:
    """Appends lines to the newest ``kind`` file of ``directory``; a new file before one passes ``max_bytes``.

    Used by one thread at a time. Every start opens a file of its own, so a line cut short by a
    crash is only ever the last line of a file.
    """

    def __init__(self, directory: Path, kind: str, *, max_bytes: int, max_files: int) -> None:
        self.directory = directory
        self.kind = kind
        self.max_bytes = max_bytes
        self.max_files = max_files
        self._file: BinaryIO | None = None
        self._size = 0

    @property
    def path(self) -> Path | None:
        """The file being written (None before the first line)."""
        return None if self._file is None else Path(self._file.name)

    def write(self, line: bytes) -> None:
        """Append ``line`` (a whole line, newline included), in a new file if it would pass the size.

        Raises:
            OSError: the directory or the file cannot be written.
        """
        if self._file is None or (self._size and self._size + len(line) > self.max_bytes):
            self._rotate()
        assert self._file is not None
        self._file.write(line)
        self._size += len(line)

    def flush(self) -> None:
        """Hand the lines written so far to the operating system."""
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        """Flush and close the current file."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def _rotate(self) -> None:
        self.close()
        self.directory.mkdir(parents=True, exist_ok=True)
        self._file = self._new_path().open("xb")
        self._size = 0
        for old in log_files(self.directory, self.kind)[: -self.max_files]:
            old.unlink(missing_ok=True)

    def _new_path(self) -> Path:
        """A name not taken yet: the current UTC time, a microsecond later while it is taken."""
        moment = dt.datetime.now(dt.UTC)
        while True:
            path = self.directory / f"{self.kind}-{moment.strftime(_STAMP)}.jsonl"
            if not path.exists():
                return path
            moment += dt.timedelta(microseconds=1)
