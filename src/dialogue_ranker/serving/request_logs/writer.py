"""One writer thread behind a bounded queue: the event loop hands lines over and never waits.

The loop puts a *line builder* (a function returning the line's JSON object) on the queue, or
learns at once that the queue is full; building the object, the digests and the JSON, and the
file writes happen on the writer thread. The thread writes lines in the order they were offered,
hands them to the operating system whenever the queue runs empty (a line is on disk within
moments of its request when the service is quiet, and lines are written in batches under load),
and a line that fails is counted and logged, never the end of the thread.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.request_logs.files import RotatingJsonl
from dialogue_ranker.serving.request_logs.lines import KINDS

logger = logging.getLogger(__name__)

#: Builds a line's JSON object, on the writer thread.
LineBuilder = Callable[[], Mapping[str, Any]]
#: At most one failure traceback in the service log per this many seconds.
ERROR_LOG_INTERVAL_S = 60.0


class LineWriter:
    """Writes the lines offered to it to rotating files of their kind, on a thread of its own."""

    def __init__(
        self, directory: Path, *, max_bytes: int, max_files: int, queue_lines: int, metrics: Metrics
    ) -> None:
        self.directory = directory
        self.metrics = metrics
        self._files = {
            kind: RotatingJsonl(directory, kind, max_bytes=max_bytes, max_files=max_files) for kind in KINDS
        }
        self._queue: queue.Queue[tuple[str, LineBuilder] | None] = queue.Queue(maxsize=queue_lines)
        self._thread = threading.Thread(target=self._run, name="ranker-request-logs", daemon=True)
        self._last_error_log = -ERROR_LOG_INTERVAL_S

    def start(self) -> None:
        """Start the thread (the first line of each kind opens its first file)."""
        self._thread.start()

    def offer(self, kind: str, build: LineBuilder) -> bool:
        """Queue a line of ``kind``; False, at once, when the queue is full (the line is not written)."""
        try:
            self._queue.put_nowait((kind, build))
        except queue.Full:
            return False
        return True

    def close(self, timeout_s: float = 10.0) -> None:
        """Write the lines still queued (for at most ``timeout_s``), then close the files. Blocks."""
        if not self._thread.is_alive():
            return
        try:
            self._queue.put(None, timeout=timeout_s)
        except queue.Full:
            logger.warning("request logs: the writer is behind; lines still queued at shutdown are lost")
            return
        self._thread.join(timeout_s)

    def _run(self) -> None:
        try:
            while (item := self._queue.get()) is not None:
                self._write(*item)
                if self._queue.empty():
                    self._flush()
        finally:
            for file in self._files.values():
                self._guarded(file.close)

    def _write(self, kind: str, build: LineBuilder) -> None:
        # Any failure, a line that cannot be encoded or a full disk, costs that line, never the thread.
        try:
            line = json.dumps(build(), ensure_ascii=False, allow_nan=False) + "\n"
            self._files[kind].write(line.encode("utf-8"))
        except Exception as error:
            self.metrics.log_lines_dropped.labels(kind, "write_error").inc()
            self._log_error(error)
            return
        self.metrics.log_lines.labels(kind).inc()

    def _flush(self) -> None:
        for file in self._files.values():
            self._guarded(file.flush)

    def _guarded(self, action: Callable[[], None]) -> None:
        try:
            action()
        except OSError as error:
            self._log_error(error)

    def _log_error(self, error: BaseException) -> None:
        now = time.monotonic()
        if now - self._last_error_log >= ERROR_LOG_INTERVAL_S:
            self._last_error_log = now
            logger.error("request logs: a line could not be written to %s", self.directory, exc_info=error)
