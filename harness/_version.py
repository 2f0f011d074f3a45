"""The harness version (also `harness.__version__`), kept apart so that any module can read
it without importing the package's API."""

__version__ = "0.2.0"
