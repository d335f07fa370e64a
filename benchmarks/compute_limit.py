"""The theoretical FP32 limit of a BERT cross-encoder on this CPU: FLOPs per pair, peak FLOP/s.

Only matrix products are counted (2 FLOPs per multiply-add). Embedding look-ups are gathers;
LayerNorm, GELU, softmax, the bias adds and the residual adds are elementwise and together cost
well under 1% of the matrix products at these sizes, so they are left out: the limit is then an
upper bound on pairs/s that no FP32 implementation can beat on this machine.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dialogue_ranker.data.machine import CpuInfo

#: Weight-matrix product ops of ONNX graphs, fp32 (MatMul) and dynamically quantised (MatMulInteger).
_WEIGHT_OPS = ("MatMul", "MatMulInteger", "Gemm")


@dataclass(frozen=True)
class ModelDims:
    """The shape parameters of a BERT encoder with a pooler and a classification head."""

    layers: int
    hidden: int
    intermediate: int
    #: Attention heads; they split the attention products but do not change their FLOPs.
    heads: int | None = None
    labels: int = 1
    #: Where these came from (config.json or an ONNX graph), for the report.
    source: str = ""

    @classmethod
    def from_config(cls, path: str | Path) -> ModelDims:
        """Read a Hugging Face ``config.json`` (a file, or the checkpoint directory holding it).

        Raises:
            OSError: the file cannot be read.
            KeyError: a BERT shape entry is missing.
        """
        path = Path(path)
        if path.is_dir():
            path = path / "config.json"
        config = json.loads(path.read_text())
        return cls(
            layers=int(config["num_hidden_layers"]),
            hidden=int(config["hidden_size"]),
            intermediate=int(config["intermediate_size"]),
            heads=int(config["num_attention_heads"]),
            labels=len(config.get("id2label", {"0": ""})),
            source=str(path),
        )

    @classmethod
    def from_onnx(cls, path: str | Path) -> ModelDims:
        """Infer the shapes from an exported graph (fp32, fp16 weights, int8) without a config.

        Layers are counted as softmax nodes (one per attention block); the hidden size is the
        output width of the first weight product (the query projection); the intermediate size is
        the widest weight product fed by the hidden size (the feed-forward expansion).

        Raises:
            ValueError: the graph has no softmax or no weight matrix product.
        """
        import onnx  # only this fallback needs it

        graph = onnx.load(str(path), load_external_data=False).graph
        shapes = {init.name: list(init.dims) for init in graph.initializer}
        # fp16 weights reach their product through a Cast to fp32: the cast's output has their shape.
        casts = [n for n in graph.node if n.op_type == "Cast" and n.input[0] in shapes]
        shapes |= {n.output[0]: shapes[n.input[0]] for n in casts}
        weights = []  # (K, N) of each weight product, in graph order
        for node in graph.node:
            if node.op_type == "MatMulNBits":  # block-quantized: packed weights, K and N as attributes
                attrs = {a.name: a.i for a in node.attribute}
                weights.append([attrs["K"], attrs["N"]])
            elif node.op_type in _WEIGHT_OPS and len(shapes.get(node.input[1], [])) == 2:
                weights.append(shapes[node.input[1]])
        layers = sum(node.op_type == "Softmax" for node in graph.node)
        if not weights or not layers:
            raise ValueError(f"{path}: no attention softmax or weight matrix product found")
        hidden = weights[0][1]
        intermediate = max(n for k, n in weights if k == hidden)
        return cls(layers=layers, hidden=hidden, intermediate=intermediate, source=str(path))


def flops_per_pair(dims: ModelDims, seq_len: float) -> float:
    """Matrix-product FLOPs of one forward pass over one pair of ``seq_len`` tokens.

    With S tokens, hidden size H, intermediate size I, h heads of width d = H / h, L layers::

        per layer
          Q, K, V projections      3 * 2*S*H*H           = 6*S*H^2
          scores Q K^T, per head   h * 2*S*S*d           = 2*S^2*H
          weighted sum P V         h * 2*S*S*d           = 2*S^2*H
          output projection        2*S*H*H               = 2*S*H^2
          feed-forward in and out  2*S*H*I + 2*S*I*H     = 4*S*H*I
        once, on the [CLS] token
          pooler                   2*H*H
          classifier               2*H*labels

        FLOPs = L * (8*S*H^2 + 4*S*H*I + 4*S^2*H) + 2*H^2 + 2*H*labels

    The heads cancel out: splitting H into h heads of width d changes the shape of the attention
    products, not their count of multiply-adds.
    """
    s, h, i = float(seq_len), dims.hidden, dims.intermediate
    per_layer = 8 * s * h * h + 4 * s * h * i + 4 * s * s * h
    return dims.layers * per_layer + 2 * h * h + 2 * h * dims.labels


@dataclass(frozen=True)
class PeakFlops:
    """Peak FP32 FLOP/s of the cores a benchmark uses, and how it was derived."""

    cores: int
    ghz: float
    isa: str
    flops_per_cycle_per_unit: int
    fma_units: int

    @property
    def flops_per_s(self) -> float:
        """Cores x clock x FLOPs per cycle per FMA unit x FMA units per core."""
        return self.cores * self.ghz * 1e9 * self.flops_per_cycle_per_unit * self.fma_units

    def describe(self) -> str:
        """One line with the formula and its numbers."""
        return (
            f"{self.cores} core(s) x {self.ghz:.2f} GHz x {self.flops_per_cycle_per_unit} FP32 FLOPs/cycle "
            f"per FMA unit ({self.isa}) x {self.fma_units} FMA unit(s) per core = "
            f"{self.flops_per_s / 1e9:.1f} GFLOP/s"
        )


def peak_fp32(cpu: CpuInfo, *, threads: int, fma_units: int = 2) -> PeakFlops:
    """Peak FP32 FLOP/s of ``threads`` compute threads on this CPU.

    One FMA is 2 FLOPs per lane: a 512-bit unit has 16 fp32 lanes (32 FLOPs/cycle), a 256-bit
    one 8 (16 FLOPs/cycle). Without FMA (pre-2013 x86), each 128-bit multiply or add port does 4
    FLOPs/cycle and ``fma_units`` counts those ports. Threads beyond the physical cores add
    nothing (SMT siblings share the units).

    ``fma_units`` is an assumption the flags cannot tell: 2 per core on Intel Xeon Scalable
    Gold/Platinum and later and on AMD Zen 2 and later at 256 bits; 1 on some Xeon Silver/Bronze
    parts, and AMD Zen 4 runs a 512-bit FMA as two 256-bit halves (count it as 1 AVX-512 unit).
    """
    if {"avx512f", "fma"} <= cpu.flags:
        isa, per_unit = "AVX-512 FMA", 32
    elif {"avx2", "fma"} <= cpu.flags:
        isa, per_unit = "AVX2 FMA", 16
    else:
        isa, per_unit = "SSE, no FMA: multiply and add ports", 4
    return PeakFlops(
        cores=min(threads, cpu.usable_cores),
        ghz=cpu.mhz / 1000,
        isa=isa,
        flops_per_cycle_per_unit=per_unit,
        fma_units=fma_units,
    )


def describe_limit(dims: ModelDims, seq_len: float, peak: PeakFlops, cpu: CpuInfo) -> list[str]:
    """Markdown lines: the FLOPs formula with its numbers, the peak, the limit and the assumptions."""
    flops = flops_per_pair(dims, seq_len)
    heads = dims.heads or "not read (they do not change the count)"
    return [
        f"- Model: {dims.layers} layers, hidden H = {dims.hidden}, intermediate I = {dims.intermediate}, "
        f"heads {heads} (from {dims.source}); mean pair length S = {seq_len:.1f} real tokens.",
        f"- FLOPs per pair = L(8SH² + 4SHI + 4S²H) + 2H² + 2H·labels = {flops / 1e9:.3f} GFLOP "
        "(matrix products only, 2 FLOPs per multiply-add).",
        f"- Peak FP32: {peak.describe()}.",
        f"- Limit: {peak.flops_per_s / 1e9:.1f} GFLOP/s / {flops / 1e9:.3f} GFLOP per pair = "
        f"**{peak.flops_per_s / flops:.1f} pairs/s**.",
        f"- Assumptions: {peak.fma_units} FMA unit(s) per core (the CPU flags do not tell; "
        "`--fma-units` changes it); every core at the clock from "
        f"{cpu.mhz_source or 'nowhere (no clock found)'}, with no AVX-512 frequency drop; "
        f"cores = min(threads, physical cores usable: {cpu.usable_cores}).",
        "- The int8 rows do their matrix products in int8 (VNNI: 4 int8 multiply-adds per 32-bit "
        "lane per instruction), so they can exceed this FP32 limit; their share says by how much.",
        "- Batched rows pad each call to its longest pair: padded tokens count against their share.",
    ]


def describe_machine(cpu: CpuInfo, *, threads: int, packages: Sequence[str], command: str) -> list[str]:
    """Markdown lines: CPU, threads, package versions, date and the command that ran."""
    versions = []
    for name in packages:
        try:
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name} not installed")
    kernels = {"fma", "avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8"}
    isa = sorted(cpu.flags & kernels)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return [
        f"- CPU: {cpu.model}; {cpu.usable_cpus} usable logical CPU(s), {cpu.threads_per_core} thread(s) "
        f"per core; {cpu.mhz:.0f} MHz from {cpu.mhz_source or 'nowhere'}; {' '.join(isa)}.",
        f"- Threads: {threads} (ONNX Runtime intra-op threads in the raw sessions and Triton, OpenVINO's "
        "in the raw OpenVINO rows; torch.set_num_threads for the CrossEncoder). The embedded service "
        "sizes its own from the CPU quota (serving/cpu.py): two one-thread calls per CPU, every CPU for a "
        "call that starts alone.",
        f"- Python {platform.python_version()}; {', '.join(versions)}.",
        f"- Date: {now}; command: `{command}`.",
    ]
