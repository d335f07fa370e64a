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
CPUINFO = Path("/proc/cpuinfo")
#: CPU flags (as /proc/cpuinfo spells them) of native bf16 arithmetic: AVX-512 BF16 dot products,
#: or AMX tiles. Without one a bf16 graph is emulated or converted back to fp32: no faster.
NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
#: CPU flags of matrix tiles that multiply bf16 (Intel AMX): there a bf16 product of fp32 weights
#: outruns OpenVINO's int8 one (benchmarks/results/report-xeon-amx*.md).
AMX_BF16_FLAGS = frozenset({"amx_bf16"})
#: CPU flags of int8 dot products that accumulate in 32 bits (VNNI, AMX tiles). Without one, ONNX
#: Runtime's u8s8 kernels add pairs of products in saturating 16 bits (AVX2 ``vpmaddubsw``): on an
#: AVX2-only Zen 3 the int8 graph's top-1 agreement was 0.875, under auto's 0.9, and OpenVINO's f32
#: plugin dequantizes int8 weights to fp32 arithmetic rather than multiply in int8.
INT8_DOT_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})
#: The most concurrent backend calls a batcher runs by default (the setting's own upper bound).
MAX_WORKERS = 64


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
    """Concurrent backend calls per batcher: the setting, or (0) two per available CPU.

    Measured on 2 cores (``benchmarks/threads.py``): with one call per CPU the CPUs idle while a
    finished call's logits go back through the event loop and the next call is padded; a second
    call per CPU fills those gaps (4 x 1 served about a tenth more candidates/s at 16 clients than
    2 x 1, and half again more than 1 x 2).
    """
    return setting or min(MAX_WORKERS, 2 * available_cpus(root))


def intra_op_threads(workers: int, root: Path = CGROUP) -> int:
    """Threads per inference call so that ``workers`` concurrent calls fill the CPUs, at least one."""
    return max(1, available_cpus(root) // batch_workers(workers, root))


def serial_tokenizers() -> None:
    """Keep Hugging Face ``tokenizers`` from starting its own thread pool (unless the user set it).

    Its ``encode_batch`` fans a request's few short texts out to a pool of one thread per host
    core whose idle threads spin: on 2 cores under load that took CPU from the inference calls
    (4 x 1 at 16 clients: 150 pairs/s with the pool, 165 without) and saved no time (0.4 ms a
    request either way). The threads sized above are the only ones the service means to run.
    """
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _cpuinfo_field(name: str, cpuinfo: Path) -> str | None:
    """The first processor's ``name`` line in ``/proc/cpuinfo`` (None where it cannot be read)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith(name):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return None


def cpu_flags(cpuinfo: Path = CPUINFO) -> frozenset[str]:
    """The first processor's flags in ``/proc/cpuinfo`` (empty where it cannot be read)."""
    return frozenset((_cpuinfo_field("flags", cpuinfo) or "").split())


def cpu_model(cpuinfo: Path = CPUINFO) -> str:
    """The first processor's model name in ``/proc/cpuinfo`` (``platform.processor()`` elsewhere)."""
    import platform

    return _cpuinfo_field("model name", cpuinfo) or platform.processor() or "unknown"


def native_bf16(flags: frozenset[str] | None = None) -> bool:
    """True when the CPU computes in bf16 natively (AVX-512 BF16 or AMX)."""
    return bool(NATIVE_BF16_FLAGS & (cpu_flags() if flags is None else flags))


def amx_bf16(flags: frozenset[str] | None = None) -> bool:
    """True when the CPU has AMX tiles for bf16 products."""
    return bool(AMX_BF16_FLAGS & (cpu_flags() if flags is None else flags))


def int8_dot_products(flags: frozenset[str] | None = None) -> bool:
    """True when the CPU multiplies int8 with 32-bit accumulation (VNNI or AMX)."""
    return bool(INT8_DOT_FLAGS & (cpu_flags() if flags is None else flags))
