"""``ranker bench``: the speed comparison a newcomer needs, measured on their own CPU in minutes.

The service at its defaults (``--backend auto``) beside the same service forced to ONNX Runtime
(``--backend onnx``), both real ``ranker serve`` processes on loopback measured in turns, and a
typical PyTorch ``CrossEncoder`` where torch is installed; then what ``auto`` chose and why, and
the CPU's model and flags. ``benchmarks/report.py`` (``make report``) is the long form.
"""
