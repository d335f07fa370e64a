"""Response-ranking inference service: calibrated cross-encoder scores over HTTP."""
