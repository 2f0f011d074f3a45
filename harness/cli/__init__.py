"""The `harness` command line: each command parses its options and calls the Python API."""

import sys

try:
    from harness.cli.main import app, main
except KeyboardInterrupt:  # Ctrl-C while the `harness` script loads: one line, no traceback
    sys.stderr.write("interrupted\n")
    raise SystemExit(130) from None

__all__ = ["app", "main"]
