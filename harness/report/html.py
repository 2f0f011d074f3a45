"""The self-contained HTML report: one file with the tables, the figures (inlined PNGs) and a
per-dialogue browser (turns, candidates with captions and audio players, the human rank, each
run's score and raw answer), with filters for disagreements and parse failures."""

from __future__ import annotations

import base64
import mimetypes
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
import numpy as np

from harness.dataset import Clip, Item
from harness.records import Record
from harness.report.analysis import Analysis
from harness.report.loading import RunData
from harness.report.tables import (
    PAIRED_HEADER,
    POSITION_HEADER,
    agreement_rows,
    comparison_header,
    comparison_rows,
    paired_rows,
    position_bias_rows,
)

AUDIO_TYPES = {
    ".wav": "audio/wav",
    ".mp3": "audio/mpeg",
    ".flac": "audio/flac",
    ".ogg": "audio/ogg",
}


def data_uri(payload: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(payload).decode('ascii')}"


def audio_type(path: Path) -> str:
    suffix = path.suffix.lower()
    return AUDIO_TYPES.get(suffix) or mimetypes.guess_type(path.name)[0] or "audio/wav"


def audio_source(clip: Clip, out_dir: Path, *, embed: bool) -> str:
    """The clip's audio as a data URI, or as a URL relative to `out_dir` (resolved)."""
    if embed:
        return data_uri(clip.path.read_bytes(), audio_type(clip.path))
    relative = os.path.relpath(clip.path.resolve(), out_dir)
    return quote(Path(relative).as_posix())


@dataclass
class Answer:
    repeat: int
    candidates: list[str]
    raw: str | None
    error: str | None
    parse_error: str | None


@dataclass
class Cell:
    score: str
    top: bool
    answers: list[Answer] = field(default_factory=list)


@dataclass
class CandidateView:
    id: str
    caption: str
    audio_src: str | None
    audio_type: str
    human_rank: int | None
    cells: list[Cell]


@dataclass
class ItemView:
    id: str
    item: Item
    candidates: list[CandidateView]
    joint_answers: list[tuple[str, Answer]]  # (run label, answer) for multi-candidate calls
    disagree: list[int]  # indices of runs whose top-1 is not the human's first
    parse_failure: bool


def _answer(record: Record) -> Answer:
    return Answer(record.repeat, record.candidates, record.raw, record.error, record.parse_error)


def item_views(runs: list[RunData], out_dir: Path, *, embed_audio: bool) -> list[ItemView]:
    """Items of the first run's dataset that any run scored, in dataset order."""
    out_dir = out_dir.resolve()
    reference = runs[0].dataset
    hits = [run.per_item()["hit@1"] for run in runs]
    by_item: list[dict[str, list[Record]]] = []
    for run in runs:
        grouped: dict[str, list[Record]] = {}
        for record in run.records:
            grouped.setdefault(record.item_id, []).append(record)
        by_item.append(grouped)
    views = []
    for item in reference.items:
        if not any(item.id in run.scores for run in runs):
            continue
        ranking = list(item.human_ranking or [])
        candidates = []
        for pos, cid in enumerate(item.candidates):
            cells = []
            for run, grouped in zip(runs, by_item, strict=True):
                scores = run.scores.get(item.id)
                if scores is None or len(scores) != len(item.candidates):
                    scores = np.full(len(item.candidates), np.nan)
                value = float(scores[pos])
                best = np.nanmax(scores) if np.isfinite(scores).any() else np.nan
                top = bool(np.isfinite(value) and value == best)
                single = [_answer(r) for r in grouped.get(item.id, []) if r.candidates == [cid]]
                text = "n/a" if not np.isfinite(value) else f"{value:.3g}"
                cells.append(Cell(text, top, single))
            clip = reference.clips.get(cid)
            heard = clip if clip is not None and clip.has_audio else None  # not a text-only one
            candidates.append(
                CandidateView(
                    id=cid,
                    caption=clip.text if clip else "",
                    audio_src=audio_source(heard, out_dir, embed=embed_audio) if heard else None,
                    audio_type=audio_type(heard.path) if heard else "audio/wav",
                    human_rank=ranking.index(cid) + 1 if cid in ranking else None,
                    cells=cells,
                )
            )
        joint = [
            (run.label, _answer(r))
            for run, grouped in zip(runs, by_item, strict=True)
            for r in grouped.get(item.id, [])
            if len(r.candidates) > 1 and (r.raw is not None or r.error)
        ]
        disagree = [i for i, hit in enumerate(hits) if hit.get(item.id, 1.0) < 1.0]
        failed = any(
            r.parse_error is not None for grouped in by_item for r in grouped.get(item.id, [])
        )
        views.append(ItemView(item.id, item, candidates, joint, disagree, failed))
    return views


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
) -> str:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("harness.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    template = env.get_template("report.html.jinja")
    images = {name: data_uri(png, "image/png") for name, png in figures.items()}
    context: dict[str, Any] = {
        "title": title,
        "runs": analysis.runs,
        "baseline": analysis.baseline.label if analysis.baseline else None,
        "comparison": _compact(comparison_header(analysis.runs), comparison_rows(analysis.runs)),
        "paired": (PAIRED_HEADER, paired_rows(analysis)) if analysis.baseline else None,
        "agreement": (["", *analysis.agreement.labels], agreement_rows(analysis)),
        "position": (POSITION_HEADER, position_bias_rows(analysis))
        if analysis.position_bias
        else None,
        "images": images,
        "items": item_views(analysis.runs, out_dir, embed_audio=embed_audio),
        "repeats": any(run.aggregate.n_repeats > 1 for run in analysis.runs),
    }
    return template.render(**context)
