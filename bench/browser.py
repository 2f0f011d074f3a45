"""A report page in headless Chromium (Debian's /usr/bin/chromium through playwright): its
load time (from navigation to the frame after the load event, the browser warmed by a blank
page from disk), DOM nodes (Chromium's counter, which counts the nodes inside <audio>
controls too, after a garbage collection), the JavaScript heap, the renderer's proportional
set size, and the time a search, a page turn and a "show all" take, each until the frame
after it."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import psutil

from tests.support.chromium import CHROMIUM, FLAGS

# Runs an action, then waits for the frame after it: the time until the browser has drawn
# the result (content-visibility lays out on-screen content at the next frame). Milliseconds.
TIMED = """async (action) => {
  const started = performance.now();
  await (new Function(action))();
  document.body.getBoundingClientRect();
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return performance.now() - started;
}"""
# The time from navigation to the frame after the load event.
PAINTED = """addEventListener("load", () => {
  requestAnimationFrame(() => requestAnimationFrame(() => { window.__painted = performance.now(); }));
});"""

SEARCH = """const s = document.getElementById('search'); s.value = {};
s.dispatchEvent(new Event('input'));"""
NEXT_PAGE = "document.getElementById('next-page').click();"
# The first dialogue's "show all", until its rows are there (the page may load them first).
SHOW_ALL = """return (async () => {
  const article = document.querySelector('article.item');
  const button = article && article.querySelector('button.show-all');
  if (!button) { return; }
  button.click();
  while (!document.querySelector('#' + CSS.escape(article.id) + ' tr.more-divider')) {
    await new Promise(r => setTimeout(r, 1));
  }
  document.getElementById(article.id).scrollIntoView();
})();"""


def _renderer_pss(browser_cdp: Any) -> int:
    """The proportional set size of the largest renderer process: the page's (Chromium also
    keeps a spare renderer or two of a few MiB)."""
    info = browser_cdp.send("SystemInfo.getProcessInfo")
    sizes = [0]
    for process in info["processInfo"]:
        if process["type"] == "renderer":
            try:
                sizes.append(psutil.Process(process["id"]).memory_full_info().pss)
            except psutil.Error:
                continue
    return max(sizes)


def measure_once(html: Path, query: str) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    executable = CHROMIUM
    if executable is None:
        raise RuntimeError("chromium is not installed (Debian: apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=FLAGS)
        try:
            page = browser.new_page()
            cdp = page.context.new_cdp_session(page)
            cdp.send("Performance.enable")
            page.goto(html.as_uri(), wait_until="load")
            load_ms = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
            cdp.send("HeapProfiler.collectGarbage")
            counters = cdp.send("Memory.getDOMCounters")
            metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
            pss = _renderer_pss(browser.new_browser_cdp_session())
            elements = page.evaluate("document.getElementsByTagName('*').length")
            search_ms = page.evaluate(TIMED, SEARCH.format(json.dumps(query)))
            page.evaluate(TIMED, SEARCH.format('""'))
            page_ms = page.evaluate(TIMED, NEXT_PAGE)
            show_all_ms = page.evaluate(TIMED, SHOW_ALL)
            after_all = cdp.send("Memory.getDOMCounters")["nodes"]
            pss_after = _renderer_pss(browser.new_browser_cdp_session())
        finally:
            browser.close()
    return {
        "load_ms": float(load_ms),
        "dom_nodes": float(counters["nodes"]),
        "elements": float(elements),
        "js_heap_mib": metrics["JSHeapUsedSize"] / 2**20,
        "renderer_pss_mib": pss / 2**20,
        "search_ms": float(search_ms),
        "page_ms": float(page_ms),
        "show_all_ms": float(show_all_ms),
        "dom_nodes_after_show_all": float(after_all),
        "renderer_pss_after_mib": pss_after / 2**20,
    }


def measure(html: Path, query: str, rounds: int) -> dict[str, float]:
    """Each figure's median over `rounds` fresh browsers, and the min of the timings."""
    samples = [measure_once(html, query) for _ in range(rounds)]
    out: dict[str, float] = {}
    for key in samples[0]:
        values = [s[key] for s in samples]
        out[key] = round(statistics.median(values), 1)
        if key.endswith("_ms"):
            out[key.removesuffix("_ms") + "_min_ms"] = round(min(values), 1)
    return out
