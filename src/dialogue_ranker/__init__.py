"""A response-ranking inference service for dialogue systems, and the tools that build its models.

Subpackages, in the order imports flow (each imports only those after it):
``cli`` -> ``export`` -> ``training`` -> ``evaluation`` -> ``data`` -> ``serving``.
``serving`` is the runtime (no torch); the others train, export and evaluate rankers.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    #: The one version string: ``pyproject.toml``'s, as installed (the API reports it).
    __version__ = version("ranking-service")
except PackageNotFoundError:  # a source tree on the path that was never installed
    __version__ = "0+unknown"
