"""The self-contained HTML report: one file with the tables, the figures (inlined PNGs) and a
dialogue browser (harness.reports.browser_data) that draws one page of dialogues at a time,
with search, filters and pagination, each clip's audio once in the file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2

from harness.core.json_text import compact_json
from harness.reports.analysis import Analysis
from harness.reports.browser_data import ORDER_SHOWN, TOP_K, item_data
from harness.reports.media import AudioMode, audio_sources, data_uri
from harness.reports.paired_tables import paired_note, paired_title, statistics_tables
from harness.reports.plots import Figure
from harness.reports.protocol_tables import protocol_sections
from harness.reports.sensitivity import sensitivity_section
from harness.reports.tables import comparison_table, endpoint_notes

# Polls the server and offers a reload when the results change.
LIVE_SCRIPT = """<script>
(function () {
  var seen = null;
  function check() {
    fetch("/_signature").then(function (r) { return r.text(); }).then(function (s) {
      if (seen === null) { seen = s; return; }
      if (s !== seen) {
        var bar = document.getElementById("live-banner");
        if (bar) { bar.hidden = false; } else { location.reload(); }
      }
    }).catch(function () {});
  }
  check();
  setInterval(check, 3000);
})();
</script>"""

# What "show all" draws of pools, as a script next to report.html (a page opened from disk
# may load a script from its folder, not fetch a JSON file).
SIDECAR = "report-candidates.js"
SIDECAR_CALLBACK = "bgmReportCandidates"


def script_json(value: Any) -> str:
    """JSON that is safe inside a <script> element (no "</script>", no "<!--")."""
    text = compact_json(value)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _compact(header: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """Provider, model, prompt and inputs in one wrapping "setup" column, so that the
    comparison fits a screen."""
    merged = slice(1, 5)
    assert header[merged] == ["provider", "model", "prompt", "inputs"]
    return (
        [header[0], "setup", *header[5:]],
        [[row[0], " · ".join(row[merged]), *row[5:]] for row in rows],
    )


def render_html(
    analysis: Analysis,
    figures: Mapping[str, Figure],
    out_dir: Path,
    *,
    title: str = "bgm-judge report",
    embed_audio: bool = False,
    audio: AudioMode | None = None,
    live: bool = False,
    warnings: Sequence[str] = (),
    groups: Sequence[tuple[str, str]] = (),
    sidecar: bool = False,
) -> tuple[str, str | None]:
    """The report page, its `figures` inlined; with `sidecar`, the script SIDECAR of what
    "show all" draws, loaded from next to the page so that it opens quickly (None when no
    item has more candidates than the page draws). Audio: linked relative to `out_dir`,
    embedded (`embed_audio`), or `audio` (each clip's URL, for a server). `live`: served by
    `harness view`, which the page polls. `warnings`: shown at the top."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("harness.reports", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    template = env.get_template("report.html.jinja")
    runs = analysis.runs
    labels = [run.label for run in runs]
    items, more = item_data(runs) if runs else ([], {"items": {}, "captions": {}})
    drawn = {c["id"] for item in items for c in item["candidates"]}
    mode: AudioMode = audio if audio is not None else "embed" if embed_audio else "link"
    dataset_clips = runs[0].dataset.clips if runs else {}
    sources = audio_sources(
        [clip for cid, clip in dataset_clips.items() if cid in drawn or cid in more["captions"]],
        out_dir,
        mode,
    )
    more["audio"] = {cid: src for cid, src in sources.items() if cid not in drawn}
    data: dict[str, Any] = {
        "runs": [{"label": label} for label in labels],
        "audio": {cid: src for cid, src in sources.items() if cid in drawn},
        "items": items,
        "top_k": TOP_K,
        "order_shown": ORDER_SHOWN,
    }
    script = None
    if sidecar and more["items"]:
        data["sidecar"] = SIDECAR
        script = f"window.{SIDECAR_CALLBACK}({script_json(more)});\n"
    else:
        data["more"] = more
    context: dict[str, Any] = {
        "title": title,
        "runs": runs,
        "paired_title": paired_title(analysis) if analysis.paired else None,
        "paired_note": paired_note(analysis) if analysis.paired else None,
        "pair_notes": analysis.notes,
        "endpoint_notes": [note.replace("`", "") for note in endpoint_notes(runs)],
        "comparison": _compact(*comparison_table(runs, analysis.human)),
        "protocol_sections": protocol_sections([(run.label, run.metrics_json()) for run in runs])
        + sensitivity_section(runs),
        **statistics_tables(analysis),
        "images": {name: data_uri(f.page_png, "image/png") for name, f in figures.items()},
        "repeats": any(run.aggregate.n_repeats > 1 for run in runs),
        "data": script_json(data),
        "live_script": LIVE_SCRIPT if live else "",
        "warnings": list(warnings),
        "groups": list(groups),
        "sidecar": data.get("sidecar"),
        "audio_linked": mode == "link" and bool(sources),
    }
    return template.render(**context), script
