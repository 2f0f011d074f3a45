"""Snapshot tests of every rendered prompt variant: a change of wording shows up as a diff
of tests/snapshots/*.txt. Refresh them on purpose with `pytest --update-snapshots`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile

from harness.calls.prompting.fewshot import load_examples
from harness.calls.prompting.variants import VARIANTS, PromptContext
from harness.core.audio import audio_ref
from harness.core.dataset import Dataset, load_dataset
from harness.core.types import ChatRequest
from harness.protocols.feedback import simulator_request
from harness.protocols.summaries import summary_request

SNAPSHOTS = Path(__file__).resolve().parents[3] / "snapshots"

ITEMS = [
    {
        "id": "t1",
        "dialogue": [
            {"speaker": "A", "text": "I finally handed in my thesis this morning."},
            {"speaker": "B", "text": "No way! After four years? How do you feel?"},
            {"speaker": "A", "text": "Empty and happy at the same time. Mostly happy."},
            {"speaker": "B", "text": "Let's celebrate tonight. My treat."},
        ],
        "summary": "A student tells a friend the thesis is done; mood: relieved, proud, happy; "
        "keywords: thesis, celebration; BGM: warm light acoustic, mid tempo.",
        "query": "Songs to celebrate finishing a long project with a friend, warm and upbeat.",
        "context_audio": ["audio/k3.wav"],
        "candidates": ["k1", "k2"],
        "human_ranking": ["k2", "k1"],
        # what the response judge (music-crs) reads besides the dialogue
        "profile": {"age_group": "20s", "country_name": "Chile"},
        "response": "Here is some warm acoustic guitar for a quiet celebration: it keeps the "
        "relief you describe without getting loud.",
    },
    {
        "id": "e1",
        "dialogue": [
            {"speaker": "A", "text": "The power's out again."},
            {"speaker": "B", "text": "I'll find the candles. At least it's quiet."},
        ],
        "summary": "Two flatmates sit through a power cut; mood: calm, cosy; keywords: candles, "
        "quiet; BGM: soft slow piano, low energy.",
        "candidates": ["k3", "k4"],
        "human_ranking": ["k3", "k4"],
    },
]
CAPTIONS = {
    "k1": "Loud, fast electronic track with a busy lead synth and a driving beat.",
    "k2": "Warm acoustic guitar at a relaxed mid tempo, soft and steady.",
    "k3": "Sparse slow piano, quiet and sustained.",
    "k4": "Pop song with a prominent female vocal and a bright chorus.",
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return write_prompt_dataset(tmp_path_factory.mktemp("prompt_dataset"))


def write_prompt_dataset(root: Path) -> Dataset:
    (root / "audio").mkdir()
    clips = []
    for index, (cid, caption) in enumerate(CAPTIONS.items()):
        tone = 0.1 * np.sin(np.arange(1600) * (index + 1) / 10.0)
        soundfile.write(root / "audio" / f"{cid}.wav", tone, 16000)
        clips.append({"id": cid, "audio": f"audio/{cid}.wav", "caption": caption})
    (root / "clips.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clips))
    (root / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    return load_dataset(root)


def show(request: ChatRequest) -> str:
    """A request as text: system, user turn (audio parts by clip id), JSON schema."""
    user = "".join(p if isinstance(p, str) else f"[audio: {p.clip_id}]" for p in request.parts)
    schema = json.dumps(request.response_schema, indent=1) if request.response_schema else "none"
    return f"### system\n{request.system}\n\n### user\n{user}\n\n### response schema\n{schema}\n"


# Every registered variant, in every input mode it accepts (a new variant is picked up here;
# record its snapshots with `pytest tests/harness/calls/prompting/test_prompts.py --update-snapshots`).
CASES: dict[str, tuple[str, str, str, dict[str, Any]]] = {}
for _variant, _entry in VARIANTS.items():
    for _dialogue in sorted({"full", "summary"} & _entry.dialogue_modes, key=len):
        for _music in ("audio", "caption") if _entry.sends_audio else ("caption",):
            CASES[f"{_variant}__{_dialogue}__{_music}"] = (_variant, _dialogue, _music, {})
CASES["joint__full__audio__ranking_permuted"] = (
    "joint",
    "full",
    "audio",
    {"answer": "ranking", "order": "permuted"},
)
CASES["joint__full__caption__ranking_partial"] = (
    "joint",
    "full",
    "caption",
    {"answer": "ranking", "partial": True},
)
CASES["listwise__query__caption"] = ("listwise", "query", "caption", {})
# MusiCRS's audio-only and audio+query configurations: the item's own audio on the query side.
CASES["listwise__none__caption__context_audio"] = ("listwise", "none", "caption", {})
CASES["listwise__query__caption__context_audio"] = ("listwise", "query", "caption", {})
CASES["describe__query__caption"] = ("describe", "query", "caption", {})
# The second turn of protocol refine (the first pick k1 and the user's reply), and the user
# simulator's prompt.
TURN_TWO = {
    "refine__query__caption": ("query", "caption"),
    "refine__full__audio": ("full", "audio"),
}
FEEDBACK = (
    "Not quite. I would like something with warm acoustic guitar, and without a busy lead synth."
)
CASES["few_shot__full__audio__example_audio"] = (
    "few_shot",
    "full",
    "audio",
    {"example_audio": True},
)


def render_case(dataset: Dataset, name: str) -> str:
    return show(request_for_case(dataset, name))


def request_for_case(dataset: Dataset, name: str) -> ChatRequest:
    """The first request of case `name` (a variant in one input mode, or the summariser)."""
    if name == "summarize":
        return summary_request(dataset.item("t1"))
    if name == "user_simulator":
        return simulator_request(dataset.item("t1"), dataset.clips, "k1")
    if name in TURN_TWO:
        dialogue, music = TURN_TWO[name]
        item = dataset.item("t1")
        ctx = PromptContext(
            item=item,
            clips=dataset.clips,
            dialogue_mode=dialogue,  # type: ignore[arg-type]
            music_mode=music,  # type: ignore[arg-type]
            summary=None,
            first_pick="k1",
            feedback=FEEDBACK,
        )
        (turn,) = VARIANTS["listwise"].prepare(ctx)
        return ChatRequest(turn.prompt.system, turn.prompt.parts, turn.schema)
    variant_name, dialogue, music, options = CASES[name]
    variant = VARIANTS[variant_name]
    options = {**options, "example_ids": ["e1"]} if variant.uses_examples else options
    examples = load_examples(options, dataset.root) if variant.uses_examples else ()
    item = dataset.item("t1")
    ctx = PromptContext(
        item=item,
        clips=dataset.clips,
        dialogue_mode=dialogue,  # type: ignore[arg-type]
        music_mode=music,  # type: ignore[arg-type]
        summary=item.summary if dialogue == "summary" else None,
        options=options,
        examples=tuple(
            replace(e, summary=e.item.summary if dialogue == "summary" else None) for e in examples
        ),
    )
    if name.endswith("__context_audio"):
        ctx = replace(ctx, context_audio=(audio_ref("t1:context", dataset.root / "audio/k3.wav"),))
    first = variant.prepare(ctx)[0]
    return ChatRequest(first.prompt.system, first.prompt.parts, first.schema)


ALL_CASES = [*CASES, *TURN_TWO, "summarize", "user_simulator"]


@pytest.fixture
def update(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-snapshots"))


@pytest.mark.parametrize("name", ALL_CASES)
def test_rendered_prompt_matches_snapshot(dataset: Dataset, name: str, update: bool) -> None:
    path = SNAPSHOTS / f"{name}.txt"
    rendered = render_case(dataset, name)
    if update:
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(rendered, encoding="utf-8")
    assert path.is_file(), f"no snapshot {path.name}: run pytest --update-snapshots"
    assert rendered == path.read_text(encoding="utf-8"), (
        f"prompt {name} changed; if intended, run pytest --update-snapshots and review the diff"
    )


def _snapshot_files() -> Iterator[Path]:
    return SNAPSHOTS.glob("*.txt")


def test_every_variant_has_snapshots_and_none_is_stale(update: bool) -> None:
    if update:
        for stale in {p.stem for p in _snapshot_files()} - set(ALL_CASES):
            (SNAPSHOTS / f"{stale}.txt").unlink()
    assert {p.stem for p in _snapshot_files()} == set(ALL_CASES)
    assert {case[0] for case in CASES.values()} == set(VARIANTS)


def test_snapshots_show_what_each_mode_sends(dataset: Dataset) -> None:
    """The snapshots are only useful if they are right: spot-check their content."""
    joint = render_case(dataset, "joint__full__audio")
    assert "[audio: k1]" in joint and "[audio: k2]" in joint and '"Clip 2"' in joint
    caption = render_case(dataset, "zero_shot__full__caption")
    assert "[audio:" not in caption and CAPTIONS["k1"] in caption
    summary = render_case(dataset, "cot__summary__audio")
    assert ITEMS[0]["summary"] in summary and "thesis this morning" not in summary
    few = render_case(dataset, "few_shot__full__audio")
    assert "The power's out again." in few and '-> {"score": 8.5}' in few
    assert few.count("[audio:") == 1  # the example's clips are described, not sent
    assert render_case(dataset, "few_shot__full__audio__example_audio").count("[audio:") == 3
    assert "response schema\nnone" in render_case(dataset, "cot__full__audio")
    query = render_case(dataset, "listwise__query__caption")
    assert ITEMS[0]["query"] in query and "thesis this morning" not in query
    assert "[audio:" not in query and CAPTIONS["k2"] in query and '"minItems": 1' in query
    audio_only = render_case(dataset, "listwise__none__caption__context_audio")
    assert "[audio: t1:context]" in audio_only and ITEMS[0]["query"] not in audio_only
    both = render_case(dataset, "listwise__query__caption__context_audio")
    assert "[audio: t1:context]" in both and ITEMS[0]["query"] in both
    judge = render_case(dataset, "response_judge__full__caption")
    assert "- age_group: 20s" in judge and "without getting loud" in judge
    assert "thesis this morning" in judge and CAPTIONS["k1"] not in judge
    describe = render_case(dataset, "describe__full__caption")
    assert "thesis this morning" in describe and CAPTIONS["k1"] not in describe
    assert '"required": [\n  "description"' in describe
    second = render_case(dataset, "refine__query__caption")
    assert f"You first recommended Clip 1: {CAPTIONS['k1']}" in second and FEEDBACK in second
    heard = render_case(dataset, "refine__full__audio")  # the pick's audio, then the pool's
    assert heard.count("[audio: k1]") == 2 and heard.index("recommended Clip 1: [audio: k1]") > 0
    user = render_case(dataset, "user_simulator")
    assert CAPTIONS["k2"] in user and CAPTIONS["k1"] in user and ITEMS[0]["query"] in user


def test_a_checkout_renders_its_own_prompts_folder() -> None:
    """In a source checkout the templates come from the top-level prompts/ folder (the module
    sits two levels below the repository root since the prompting subpackage)."""
    from harness.calls.prompting.templates import DEFAULT_PROMPTS_DIR

    root = Path(__file__).resolve().parents[4]
    assert root / "prompts" == DEFAULT_PROMPTS_DIR
    assert (DEFAULT_PROMPTS_DIR / "zero_shot.jinja").is_file()


def test_a_run_renders_the_templates_it_hashed_and_the_next_run_sees_an_edit(
    tmp_path: Path,
) -> None:
    """Issue 26: templates are not stat'ed at every render; a run (`TemplateHashes`) reads
    them once as it starts, so an edit is seen by the next run, never half-way through one."""
    from harness.calls.prompting.templates import TemplateHashes, render

    template = tmp_path / "t.jinja"
    template.write_text("{% block system %}one{% endblock %}{% block user %}u{% endblock %}")
    hashes = TemplateHashes(tmp_path)
    first = hashes("t.jinja")
    assert render("t.jinja", {}, [], tmp_path).system == "one"
    template.write_text("{% block system %}two{% endblock %}{% block user %}u{% endblock %}")
    assert render("t.jinja", {}, [], tmp_path).system == "one"  # the run's version
    assert hashes("t.jinja") == first
    next_run = TemplateHashes(tmp_path)
    assert render("t.jinja", {}, [], tmp_path).system == "two"
    assert next_run("t.jinja") != first
