"""The `harness` command line: each command parses its options and calls the Python API."""

from harness.cli.main import app, main

__all__ = ["app", "main"]
