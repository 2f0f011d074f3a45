"""The old name of `harness.fake_api` (kept so that scripts written for it still run)."""

from harness.fake_api import FakeServer, FakeSettings, main

__all__ = ["FakeServer", "FakeSettings", "main"]
