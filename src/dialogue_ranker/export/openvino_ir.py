"""An ONNX graph as OpenVINO IR, for Triton's OpenVINO backend (``ranker triton-repo --runtime openvino``)."""

from __future__ import annotations

from pathlib import Path


def write_openvino_ir(onnx_path: Path, xml_path: Path) -> Path:
    """Convert an ONNX graph to OpenVINO IR (``.xml`` and ``.bin``), int8 weights kept as they are.

    Raises:
        SystemExit: the ``openvino`` package is not installed.
    """
    try:
        import openvino as ov
    except ImportError as e:
        raise SystemExit("--runtime openvino needs the openvino package: pip install '.[openvino]'") from e
    ov.save_model(ov.Core().read_model(str(onnx_path)), str(xml_path), compress_to_fp16=False)
    return xml_path
