"""Debian's Chromium as the browser tests and `bench report_scale` drive it (through
playwright, with no browser download): where it is, and the flags of a quiet headless run."""

from __future__ import annotations

import shutil

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
