"""How many CPUs this process may really use, and the thread counts that follow from it.

``os.cpu_count()`` is the host's cores; in a container the CPU quota (cgroup ``cpu.max``, or
``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` under cgroup v1) is what the process gets, and on a
2-core quota running ``cpu_count()`` threads on a 64-core host thrashes. The affinity mask
(``taskset``, Kubernetes static CPU manager) bounds it too.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def _quota_cpus(root: Path = CGROUP) -> float | None:
    """The cgroup CPU quota in CPUs, or None when unlimited or unknown."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        if quota != "max":
            return int(quota) / int(period)
        return None
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def available_cpus(root: Path = CGROUP) -> int:
    """CPUs the process may use: the smaller of the affinity mask and the cgroup quota (at least 1)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    quota = _quota_cpus(root)
    if quota is not None:
        cpus = min(cpus, math.ceil(quota))
    return max(1, cpus)


def batch_workers(setting: int, root: Path = CGROUP) -> int:
    """Concurrent backend calls per batcher: the setting, or (0) 2 when there are 2 CPUs or more.

    Measured on 2 cores (``benchmarks/threads.py``): two calls of one thread each served about a
    third more candidates/s at 16 clients than one call of two threads.
    """
    return setting or (2 if available_cpus(root) >= 2 else 1)


def intra_op_threads(workers: int, root: Path = CGROUP) -> int:
    """Threads per inference call so that ``workers`` concurrent calls fill the CPUs, not more."""
    return max(1, available_cpus(root) // batch_workers(workers, root))
