"""The machine a measurement ran on: the processor and the instruction sets int8 kernels use.

ONNX Runtime picks its int8 matrix kernels by instruction set (AVX2, AVX-512, VNNI), and the
same dynamic int8 graph gives measurably different scores on different CPUs, so the export
records the machine beside its accuracy and speed figures; the benchmark report does too.
"""

from __future__ import annotations

import os
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: Instruction sets that decide which int8 and fp32 kernels ONNX Runtime runs.
KERNEL_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8")


@dataclass(frozen=True)
class CpuInfo:
    """What the report needs to know about the processor."""

    model: str
    #: Logical CPUs this process may run on (its affinity mask).
    usable_cpus: int
    threads_per_core: int
    mhz: float
    mhz_source: str
    flags: frozenset[str]

    @property
    def usable_cores(self) -> int:
        """Physical cores behind the usable logical CPUs (SMT siblings share FMA units)."""
        return max(1, self.usable_cpus // self.threads_per_core)


def _lscpu() -> dict[str, str]:
    try:
        out = subprocess.run(
            ["lscpu"], capture_output=True, text=True, check=True, env={**os.environ, "LC_ALL": "C"}
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    return dict(
        (key.strip(), value.strip()) for key, _, value in (line.partition(":") for line in out.splitlines())
    )


def _cpuinfo_field(text: str, name: str) -> list[str]:
    return [
        value.strip()
        for key, _, value in (line.partition(":") for line in text.splitlines())
        if key.strip() == name
    ]


def read_cpu() -> CpuInfo:
    """The processor as ``lscpu`` and ``/proc/cpuinfo`` describe it (either may be missing)."""
    lscpu = _lscpu()
    cpuinfo_path = Path("/proc/cpuinfo")
    cpuinfo = cpuinfo_path.read_text() if cpuinfo_path.is_file() else ""
    model = lscpu.get("Model name") or next(iter(_cpuinfo_field(cpuinfo, "model name")), platform.processor())
    if lscpu.get("CPU family") and lscpu.get("Model"):
        # Virtual machines often hide the marketing name; family and model still identify the core.
        model += f" (family {lscpu['CPU family']}, model {lscpu['Model']})"
    flags = lscpu.get("Flags") or next(iter(_cpuinfo_field(cpuinfo, "flags")), "")
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if lscpu.get("CPU max MHz"):
        mhz, source = float(lscpu["CPU max MHz"]), "lscpu 'CPU max MHz'"
    else:
        current = [float(v) for v in _cpuinfo_field(cpuinfo, "cpu MHz")]
        # Without a max clock (typical in a VM) the reported clock is the nominal one.
        mhz, source = max(current, default=0.0), "/proc/cpuinfo 'cpu MHz' (no max clock reported)"
    return CpuInfo(
        model=model or "unknown",
        usable_cpus=usable,
        threads_per_core=int(lscpu.get("Thread(s) per core") or 1),
        mhz=mhz,
        mhz_source=source,
        flags=frozenset(flags.split()),
    )


def describe_for_report(cpu: CpuInfo) -> dict[str, object]:
    """What an export report records about the machine it measured on."""
    import onnxruntime

    return {
        "cpu": cpu.model,
        "usable_cpus": cpu.usable_cpus,
        "kernel_flags": [f for f in KERNEL_FLAGS if f in cpu.flags],
        "onnxruntime": onnxruntime.__version__,
    }
