"""Reloads without a request: SIGHUP reloads every bank, and ``banks.watch-interval-s`` a changed file.

Installed in the app's lifespan (:meth:`BankUpdates.install`) and removed at shutdown. Each reload
is :meth:`BankSet.reload`'s, so it embeds only new texts, swaps in one step, keeps the old version
on a bad file and logs its outcome. The watch compares each file's modification time, size and
inode with what it saw last: a file replaced by a rename (the safe way to write one) changes all
three.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from dialogue_ranker.serving.banks.loader import BankSet
from dialogue_ranker.serving.banks.served import LoadTrigger
from dialogue_ranker.serving.errors import NotReady

logger = logging.getLogger(__name__)

#: What the watch compares: modification time (ns), size, inode; None when the file is not there.
Stamp = tuple[int, int, int] | None


def _stamp(path: Path) -> Stamp:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size, stat.st_ino


class BankUpdates:
    """The SIGHUP handler and the file watch of one app's banks."""

    def __init__(self, banks: BankSet, *, watch_interval_s: float = 0.0) -> None:
        self.banks = banks
        self.watch_interval_s = watch_interval_s
        self._tasks: set[asyncio.Task[None]] = set()
        self._signal_installed = False

    @classmethod
    def install(cls, banks: BankSet | None, *, watch_interval_s: float = 0.0) -> BankUpdates | None:
        """SIGHUP's handler and, when the interval is above 0, the watch (None: no bank is served)."""
        if banks is None:
            return None
        updates = cls(banks, watch_interval_s=watch_interval_s)
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGHUP, updates._on_signal)
            updates._signal_installed = True
        except (AttributeError, NotImplementedError, RuntimeError, ValueError) as e:
            # No SIGHUP (Windows), or not the main thread (an app served from a test's thread).
            logger.warning("bank reload on SIGHUP not installed: %s", e)
        if watch_interval_s > 0:
            updates._spawn(updates._watch(), "watch bank files")
        return updates

    def _spawn(self, coroutine: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_signal(self) -> None:
        logger.info("SIGHUP: reloading banks=%s", ",".join(self.banks.banks))
        self._spawn(self._reload_all(), "reload banks on SIGHUP")

    async def _reload_all(self) -> None:
        await self.banks.reload_all(LoadTrigger.SIGNAL)
        outcomes = [
            f"{served.name}={'ok' if served.last_load.ok else 'failed'}"
            for served in self.banks.banks.values()
            if served.last_load is not None
        ]
        logger.info("SIGHUP: banks reloaded %s", " ".join(outcomes))

    async def _watch(self) -> None:
        """Every interval, reload each bank whose file's stamp changed since it was last seen."""
        seen = {name: _stamp(served.path) for name, served in self.banks.banks.items()}
        while True:
            await asyncio.sleep(self.watch_interval_s)
            for name, served in self.banks.banks.items():
                stamp = await asyncio.to_thread(_stamp, served.path)
                if stamp is None or stamp == seen[name]:
                    continue
                try:
                    await self.banks.reload(name, trigger=LoadTrigger.WATCH)
                except NotReady:
                    continue  # its first load is not done: tried again at the next look
                except Exception as e:  # the reload logged it; the file is tried again once it changes
                    logger.debug("bank watch reload failed bank=%s error=%s", name, e)
                seen[name] = stamp

    async def close(self) -> None:
        """Remove the handler and stop the watch and the reloads it started."""
        if self._signal_installed:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
