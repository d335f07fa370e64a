"""The process's malloc arenas: a long-running server's resident memory levels off instead of creeping.

glibc gives each thread that meets a locked arena a new one, up to 8 per core, and frees little of
an arena back to the system. The server's threads (the event loop, the batchers' backend calls, the
bank builder, the runtimes' own pools) allocate request-sized buffers of every shape, so each
arena keeps its high-water mark of fragments: in a 25-minute soak at 70% of saturation on 2 cores,
resident memory grew from 2.1 to over 4.5 GB, almost all of it in 64 MB anonymous arena heaps, and
was still growing once the logit cache was full (benchmarks/results/soak-*.md). Two arenas hold it
level at no measured cost in throughput. ``mallopt`` (glibc's own call, through ctypes) rather than
the ``MALLOC_ARENA_MAX`` variable: a setting of the service works however it is started (``ranker
serve``, the image, a test), where a variable must be in the environment before the process starts.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

logger = logging.getLogger(__name__)

#: glibc's ``M_ARENA_MAX`` (malloc.h).
M_ARENA_MAX = -8


def limit_malloc_arenas(arenas: int) -> bool:
    """At most ``arenas`` malloc arenas from now on (0: glibc's default); False where libc is not glibc."""
    if arenas <= 0:
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):  # musl, macOS: no mallopt, or another allocator
        logger.info("malloc arenas: not glibc, left as they are")
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, arenas))
