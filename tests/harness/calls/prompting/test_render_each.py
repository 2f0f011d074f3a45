"""`render_each`: one template rendered for each of an item's candidates gives exactly what
rendering each alone gives, and renders again only when the text could differ."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.calls.prompting import templates as prompts
from harness.calls.prompting.templates import (
    ClipView,
    TemplateError,
    audio_placeholder,
    reload_templates,
    render,
    render_each,
)
from harness.core.types import AudioRef

# Ways a template may use `clip`; those after the first five hand the object itself to
# something other than an attribute read, so nothing may be reused for them.
USES = [
    "{{ clip.label }}",
    "{{ clip.audio }}",
    "{{ clip['caption'] }}",
    "{% if music_mode == 'caption' %}{{ clip.caption }}{% endif %}",
    "{% if clip.label == 'A' %}{{ clip.caption | upper }}{% endif %}",
    "{{ clip }}",
    "{% set c = clip %}{{ c.caption }}",
    "{{ clip | attr('caption') }}",
    "{% if clip is sameas clip %}same{% endif %}",
    "{% include '_use.jinja' %}",
]
INCLUDED = ["{{ clip.label }}", "{{ clip.caption }}", "{{ clip }}"]

CONTEXT = {"music_mode": "audio", "dialogue": [{"speaker": "A", "text": "Rain again."}]}


def write(folder: Path, user: str, included: str = "") -> None:
    (folder / "t.jinja").write_text(
        "{% block system %}Judge.{% endblock %}{% block user %}" + user + "{% endblock %}"
    )
    (folder / "_use.jinja").write_text(included)
    reload_templates()


def views(captions: list[str]) -> list[ClipView]:
    return [ClipView("A", caption, audio_placeholder(0)) for caption in captions]


def audio(n: int) -> list[list[AudioRef]]:
    return [[AudioRef(f"c{i}", Path(f"/clips/c{i}.wav"), f"{i:064x}")] for i in range(n)]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    uses=st.lists(st.sampled_from(USES), min_size=1, max_size=3),
    included=st.sampled_from(INCLUDED),
    captions=st.lists(st.sampled_from(["warm guitar", "fast synth", "warm guitar "]), min_size=1),
    music_mode=st.sampled_from(["audio", "caption"]),
)
def test_each_prompt_is_what_rendering_it_alone_gives(
    tmp_path: Path, uses: list[str], included: str, captions: list[str], music_mode: str
) -> None:
    write(tmp_path, " / ".join(uses), included)
    context = {**CONTEXT, "music_mode": music_mode}
    shown, sent = views(captions), audio(len(captions))
    together = render_each("t.jinja", context, "clip", shown, sent, tmp_path)
    alone = [
        render("t.jinja", {**context, "clip": view}, clips, tmp_path)
        for view, clips in zip(shown, sent, strict=True)
    ]
    assert together == alone


def count_renders(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    rendered: list[str] = []
    original = prompts._render_block

    def counted(template: object, block: str, context: dict[str, object]) -> str:
        rendered.append(block)
        return original(template, block, context)  # type: ignore[arg-type]

    monkeypatch.setattr(prompts, "_render_block", counted)
    return rendered


def test_text_that_reads_only_equal_fields_is_rendered_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        tmp_path,
        "{% if music_mode == 'caption' %}{{ clip.caption }}{% else %}{{ clip.label }}:"
        " {{ clip.audio }}{% endif %}",
    )
    rendered = count_renders(monkeypatch)
    captions = ["warm guitar", "fast synth", "slow piano", "a choir"]
    prompts_ = render_each("t.jinja", CONTEXT, "clip", views(captions), audio(4), tmp_path)
    assert rendered == ["system", "user"]
    assert [p.parts[-1] for p in prompts_] == [clips[0] for clips in audio(4)]
    rendered.clear()
    caption_mode = {**CONTEXT, "music_mode": "caption"}
    by_caption = render_each("t.jinja", caption_mode, "clip", views(captions), audio(4), tmp_path)
    assert rendered == ["system", "user"] * 4
    assert [p.parts[0] for p in by_caption] == captions


@pytest.mark.parametrize("use", USES[5:])
def test_the_object_itself_handed_on_renders_every_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, use: str
) -> None:
    write(tmp_path, use, "{{ clip.label }}")
    rendered = count_renders(monkeypatch)
    render_each("t.jinja", CONTEXT, "clip", views(["a", "a", "a"]), audio(3), tmp_path)
    expected = ["system", "user"] * (1 if use == USES[-1] else 3)
    assert rendered == expected


def test_a_failing_render_fails_as_rendering_alone_does(tmp_path: Path) -> None:
    write(tmp_path, "{{ clip.tempo }}")
    with pytest.raises(TemplateError, match="undefined variable"):
        render_each("t.jinja", CONTEXT, "clip", views(["a", "b"]), audio(2), tmp_path)


@pytest.mark.parametrize("source", ["{{ [1, 2, 3] | random }}", "{{ lipsum(1) }}"])
def test_templates_render_the_same_text_every_time(tmp_path: Path, source: str) -> None:
    """A cache key is a hash of the prompt: a template that draws at random would give every
    call a new key, so random draws are not offered."""
    write(tmp_path, source)
    with pytest.raises(TemplateError, match=r"random|lipsum"):
        render("t.jinja", CONTEXT, [], tmp_path)
