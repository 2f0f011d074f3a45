"""The sandbox: what templates read of a watched value, blocks of one template that share a
context without sharing what they assign, and a template hashed with what it includes."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from harness.calls.prompting.sandbox import BoundedSandbox, reads_of
from harness.calls.prompting.templates import ClipView, TemplateError, reload_templates, render

BOUNDED = BoundedSandbox(undefined=jinja2.StrictUndefined)
JINJA = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined)


def test_reads_of_a_view_are_what_templates_read_of_it() -> None:
    view = ClipView("A", "calm piano", "")
    with reads_of(view) as reads:
        BOUNDED.getattr(view, "caption")
        BOUNDED.getattr({"caption": "other"}, "caption")
    assert reads == {"caption": "calm piano"}


def test_what_one_block_assigns_the_other_does_not_see(tmp_path: Path) -> None:
    (tmp_path / "t.jinja").write_text(
        "{% block system %}{% set secret = 'x' %}S {{ secret }}{% endblock %}"
        "{% block user %}U {{ secret }}{% endblock %}"
    )
    reload_templates()
    with pytest.raises(TemplateError, match="undefined variable: 'secret' is undefined"):
        render("t.jinja", {}, [], tmp_path)
    (tmp_path / "t.jinja").write_text(
        "{% block system %}{% set shown = 1 %}S {{ shown }}{% endblock %}"
        "{% block user %}U {{ shown | default('none') }} {{ kept }}{% endblock %}"
    )
    reload_templates()
    prompt = render("t.jinja", {"kept": "k"}, [], tmp_path)
    assert (prompt.system, prompt.parts) == ("S 1", ("U none k",))


def test_a_template_is_hashed_with_what_it_includes(
    tmp_path: Path,
) -> None:
    from harness.calls.prompting.templates import template_hash

    (tmp_path / "t.jinja").write_text(
        "{% block system %}S{% endblock %}{% block user %}{% include 'part.jinja' %}{% endblock %}"
    )
    (tmp_path / "part.jinja").write_text("first")
    reload_templates()
    before = template_hash("t.jinja", tmp_path), render("t.jinja", {}, [], tmp_path).parts
    (tmp_path / "part.jinja").write_text("second")
    reload_templates()
    after = template_hash("t.jinja", tmp_path), render("t.jinja", {}, [], tmp_path).parts
    assert before[1] == ("first",) and after[1] == ("second",)
    assert before[0] != after[0]
