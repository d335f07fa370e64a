"""ONNX export, graph optimisation, quantization and model-directory writing."""
