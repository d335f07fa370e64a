"""A response-ranking inference service for dialogue systems, and the tools that build its models.

Subpackages, in the order imports flow (each imports only those after it):
``cli`` -> ``export`` -> ``training`` -> ``evaluation`` -> ``data`` -> ``serving``.
``serving`` is the runtime (no torch); the others train, export and evaluate rankers.
"""
