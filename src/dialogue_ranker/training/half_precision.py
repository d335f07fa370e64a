"""A run's (or a backbone's) encoder weights in fp16 for the trip to or from a lent machine, and back.

    python -m dialogue_ranker.training.half_precision half runs/ranker-distilled/ranker
    python -m dialogue_ranker.training.half_precision full runs/ranker-distilled/ranker

A lent GPU machine takes and returns at most 64 MiB, and a MiniLM-L6 encoder is 87 MiB in fp32:
in fp16 it is half that. ``half`` rewrites a directory's ``model.safetensors`` in fp16, ``full``
back in fp32 (training and the export read fp32; transformers 5 would otherwise load an fp16 file
as an fp16 model). The round trip moves a weight by at most about 1e-3 of its size, far under what
the shipped int8 graph's quantisation moves it. The head and the cosine scale stay as they are
(a few hundred numbers).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

WEIGHTS = "model.safetensors"


def convert(directory: Path, dtype: torch.dtype) -> int:
    """Rewrite ``directory/model.safetensors`` with every floating-point tensor in ``dtype``; its bytes."""
    path = directory / WEIGHTS
    if not path.is_file():
        raise SystemExit(f"{directory}: no {WEIGHTS} to convert")
    tensors = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in load_file(str(path)).items()}
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata={"format": "pt"})
    return path.stat().st_size


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("to", choices=("half", "full"), help="half: fp16; full: back to fp32")
    p.add_argument("directory", type=Path, help="a directory holding model.safetensors")
    args = p.parse_args(argv)
    size = convert(args.directory, torch.float16 if args.to == "half" else torch.float32)
    print(f"{args.directory / WEIGHTS}: {size / 2**20:.1f} MiB")
    return size


if __name__ == "__main__":
    main()
