"""The self-contained HTML report: one file with the tables, the figures (inlined PNGs) and a
dialogue browser for benchmark-sized runs: the dialogues travel as JSON and the page draws
one page of them at a time, with search, filters (disagreement with the human, parse
failures) and pagination. Per dialogue: the turns, the candidates in the human's order with
captions and one audio player each (every clip's audio once in the file), each run's score,
and every raw answer full-width below."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import jinja2
import numpy as np

from harness.records import Record
from harness.report.analysis import Analysis
from harness.report.labels import shorten_unique
from harness.report.loading import RunData
from harness.report.media import AudioMode, audio_sources, data_uri
from harness.report.protocol_views import protocol_view
from harness.report.tables import (
    PAIRED_HEADER,
    POSITION_HEADER,
    agreement_rows,
    comparison_header,
    comparison_rows,
    endpoint_notes,
    human_row,
    paired_note,
    paired_rows,
    paired_title,
    position_bias_rows,
    table_metrics,
)

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

HEADER_WIDTH = 14  # characters of a run's label in a column header (the full one on hover)


def _answer(run_index: int, record: Record) -> dict[str, Any]:
    return {
        "run": run_index,
        "candidates": record.candidates,
        "repeat": record.repeat,
        "raw": record.raw,
        "error": record.error,
        "parse_error": record.parse_error,
    }


def _score_text(value: float) -> str:
    return "n/a" if not np.isfinite(value) else f"{value:.3g}"


def item_data(runs: list[RunData]) -> list[dict[str, Any]]:
    """Items of the first run's dataset that any run scored, in dataset order, as the page
    script reads them; candidates in the human's order, or gold first where items name
    relevant candidates instead of a ranking."""
    reference = runs[0].dataset
    hits = [run.per_item()["hit@1"] for run in runs]
    grouped: list[dict[str, list[Record]]] = []
    for run in runs:
        by_item: dict[str, list[Record]] = {}
        for record in run.records:
            by_item.setdefault(record.item_id, []).append(record)
        grouped.append(by_item)
    out = []
    for item in reference.items:
        if not any(item.id in run.scores for run in runs):
            continue
        ranking = list(item.human_ranking or [])
        relevance = item.relevance if item.relevance_form else {}
        per_run = []  # each run's scores of the item and its best score, once per item
        for run in runs:
            scores = run.scores.get(item.id)
            if scores is None or len(scores) != len(item.candidates):
                scores = np.full(len(item.candidates), np.nan)
            per_run.append((scores, np.nanmax(scores) if np.isfinite(scores).any() else np.nan))
        candidates = []
        for pos, cid in enumerate(item.candidates):
            cells = []
            for scores, best in per_run:
                value = float(scores[pos])
                cells.append([_score_text(value), int(value == best)])  # compact: 100s a page
            clip = reference.clips.get(cid)
            candidate: dict[str, Any] = {
                "id": cid,
                "caption": clip.text if clip else "",
                "rank": ranking.index(cid) + 1 if cid in ranking else None,
                "cells": cells,
            }
            if relevance.get(cid):
                candidate["relevance"] = relevance[cid]
            candidates.append(candidate)
        # the human's order; else the gold first (most relevant first), else dataset order
        candidates.sort(key=lambda c: (c["rank"] is None, c["rank"] or 0, -c.get("relevance", 0)))
        views = [
            asdict(view)
            for run, by_item in zip(runs, grouped, strict=True)
            if (view := protocol_view(run, by_item.get(item.id, []), item)) is not None
        ]
        answers = [
            _answer(i, record)
            for i, by_item in enumerate(grouped)
            for record in by_item.get(item.id, [])
            if record.raw is not None or record.error or record.parse_error
        ]
        out.append(
            {
                "id": item.id,
                "turns": [[turn.speaker, turn.text] for turn in item.dialogue],
                "query": item.query,
                "summary": item.summary,
                "candidates": candidates,
                "answers": answers,
                "disagree": [i for i, hit in enumerate(hits) if hit.get(item.id, 1.0) < 1.0],
                "parse_failure": any(a["parse_error"] is not None for a in answers),
                "protocols": views,  # a refine run's turns and reply, a describe run's text
            }
        )
    return out


def script_json(value: Any) -> str:
    """JSON that is safe inside a <script> element (no "</script>", no "<!--")."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
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
    figures: dict[str, bytes],
    out_dir: Path,
    *,
    title: str = "bgm-judge report",
    embed_audio: bool = False,
    audio: AudioMode | None = None,
    live: bool = False,
    warnings: Sequence[str] = (),
    groups: Sequence[tuple[str, str]] = (),
) -> str:
    """The report page. Audio: linked relative to `out_dir`, embedded (`embed_audio`), or
    `audio` (a function giving each clip's URL, for a server). `live`: served by
    `harness view`, which the page polls for new results. `warnings`: what could not be
    read, shown at the top."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("harness.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    template = env.get_template("report.html.jinja")
    runs = analysis.runs
    labels = [run.label for run in runs]
    short = dict(zip(labels, shorten_unique(labels, HEADER_WIDTH), strict=True))
    short["human"] = "human"
    items = item_data(runs) if runs else []
    shown = {c["id"] for item in items for c in item["candidates"]}
    clips = [clip for cid, clip in runs[0].dataset.clips.items() if cid in shown] if runs else []
    mode: AudioMode = audio if audio is not None else "embed" if embed_audio else "link"
    data = {
        "runs": [{"label": label, "short": short[label]} for label in labels],
        "audio": audio_sources(clips, out_dir, mode),
        "items": items,
    }
    context: dict[str, Any] = {
        "title": title,
        "runs": runs,
        "short": short,
        "paired_title": paired_title(analysis) if analysis.paired else None,
        "paired_note": paired_note(analysis) if analysis.paired else None,
        "pair_notes": analysis.notes,
        "endpoint_notes": [note.replace("`", "") for note in endpoint_notes(runs)],
        "comparison": _compact(
            comparison_header(runs),
            comparison_rows(runs)
            + ([human_row(analysis.human, table_metrics(runs))] if analysis.human else []),
        ),
        "paired": (PAIRED_HEADER, paired_rows(analysis)) if analysis.paired else None,
        "agreement": (["", *analysis.agreement.labels], agreement_rows(analysis)),
        "position": (POSITION_HEADER, position_bias_rows(analysis))
        if analysis.position_bias
        else None,
        "images": {name: data_uri(png, "image/png") for name, png in figures.items()},
        "repeats": any(run.aggregate.n_repeats > 1 for run in runs),
        "data": script_json(data),
        "live_script": LIVE_SCRIPT if live else "",
        "warnings": list(warnings),
        "groups": list(groups),
    }
    return template.render(**context)
