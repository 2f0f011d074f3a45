"""Regenerate docs/report.png: the top of an HTML report (tables, plots) above its first
dialogue, rendered by Debian's headless chromium and reduced to a small palette PNG.

    harness report results/quickstart --baseline results/quickstart/random_uniform_full_caption \
        --out /tmp/report
    .venv/bin/python docs/make_screenshot.py /tmp/report/report.html docs/report.png
"""

from __future__ import annotations

import io
import shutil
import sys
import tempfile
from pathlib import Path

from PIL import Image
from playwright.sync_api import sync_playwright

WIDTH = 1440
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


def main(report: Path, out: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium is not installed (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=chromium,
            headless=True,
            args=FLAGS,
            viewport={"width": WIDTH, "height": 900},
        )
        page = browser.new_page()
        page.goto(report.resolve().as_uri())
        top = page.locator("#agreement").bounding_box()
        first = page.locator("#dialogues").bounding_box()
        item = page.locator("article.item").first.bounding_box()
        assert top and first and item
        shots = [
            page.screenshot(
                full_page=True, clip={"x": 0, "y": 0, "width": WIDTH, "height": top["y"]}
            ),
            page.screenshot(
                full_page=True,
                clip={
                    "x": 0,
                    "y": first["y"],
                    "width": WIDTH,
                    "height": item["y"] + item["height"] - first["y"] + 8,
                },
            ),
        ]
        browser.close()
    parts = [Image.open(io.BytesIO(png)).convert("RGB") for png in shots]
    sheet = Image.new("RGB", (WIDTH, sum(p.height for p in parts)), "white")
    y = 0
    for part in parts:
        sheet.paste(part, (0, y))
        y += part.height
    sheet = sheet.resize((WIDTH * 7 // 10, sheet.height * 7 // 10), Image.Resampling.LANCZOS)
    sheet.quantize(colors=96, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
        out, optimize=True
    )
    print(f"{out}: {out.stat().st_size // 1024} KiB, {sheet.width}x{sheet.height}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
