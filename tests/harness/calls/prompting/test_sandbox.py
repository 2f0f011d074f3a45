"""The sandbox's attribute reads: its shortcut for dicts and registered views returns exactly
what jinja2's own sandbox returns (or refuses), and the blocks of one template share a
context without sharing what they assign."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jinja2.sandbox import ImmutableSandboxedEnvironment

from harness.calls.prompting.sandbox import BoundedSandbox, reads_of, template_view
from harness.calls.prompting.templates import ClipView, TemplateError, reload_templates, render
from harness.calls.prompting.variants import ExampleClipView, ExampleView

BOUNDED = BoundedSandbox(undefined=jinja2.StrictUndefined)
JINJA = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined)

# Names a template may read: a dict's own methods (jinja2 hands those out, not the item),
# private and dunder names (refused), and plain names.
NAMES = st.sampled_from(
    ["items", "get", "keys", "pop", "update", "copy", "__class__", "_private", "__len__"]
) | st.text(min_size=1, max_size=6)
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.just("a {} b".format),  # a str's format method: jinja2 wraps it when it is an attribute
    st.just(len),
)


def same_read(obj: Any, name: str) -> None:
    ours, theirs = BOUNDED.getattr(obj, name), JINJA.getattr(obj, name)
    if isinstance(theirs, jinja2.Undefined):
        assert type(ours) is type(theirs)
        assert ours._undefined_hint == theirs._undefined_hint
        assert ours._undefined_name == theirs._undefined_name
    elif callable(theirs) and not isinstance(theirs, type):
        assert type(ours) is type(theirs)
        assert getattr(ours, "__name__", None) == getattr(theirs, "__name__", None)
    else:
        assert type(ours) is type(theirs)
        assert ours == theirs


@given(st.dictionaries(NAMES, VALUES, max_size=5), NAMES)
def test_a_dict_read_is_what_jinjas_sandbox_reads(obj: dict[str, Any], name: str) -> None:
    same_read(obj, name)
    for key in obj:
        same_read(obj, key)


@given(st.text(max_size=5), st.text(max_size=5), st.text(max_size=5), NAMES)
def test_a_view_read_is_what_jinjas_sandbox_reads(
    label: str, caption: str, audio: str, name: str
) -> None:
    view = ClipView(label, caption, audio)
    example = ExampleView([{"speaker": "A", "text": "hi"}], None, "audio", [])
    for field in ("label", "caption", "audio", name):
        same_read(view, field)
    for field in ("dialogue", "summary", "music_mode", "clips", name):
        same_read(example, field)
    same_read(ExampleClipView(label, caption, audio, "7.0"), name)


def test_reads_of_a_view_are_seen_through_the_shortcut() -> None:
    view = ClipView("A", "calm piano", "")
    with reads_of(view) as reads:
        BOUNDED.getattr(view, "caption")
        BOUNDED.getattr({"caption": "other"}, "caption")
    assert reads == {"caption": "calm piano"}


def test_only_frozen_dataclasses_are_template_views() -> None:
    @dataclass
    class Mutable:
        text: str

    class Plain:
        text = "x"

    for cls in (Mutable, Plain):
        with pytest.raises(TypeError, match="not a frozen dataclass"):
            template_view(cls)


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


class NotInlining(BoundedSandbox):
    """The sandbox as it was: every include rendered as a template of its own."""

    def _generate(
        self,
        source: jinja2.nodes.Template,
        name: str | None,
        filename: str | None,
        defer_init: bool = False,
    ) -> str:
        return ImmutableSandboxedEnvironment._generate(self, source, name, filename, defer_init)


INCLUDED = {
    "sets.jinja": "{% set x = 'inner' %}[{{ x }}]",
    "loop.jinja": "{{ i }}/{{ loop.index }} ",
    "local.jinja": "{{ i }} ",
    "outer.jinja": "<{% include 'inner.jinja' %}>",
    "inner.jinja": "{{ y | default('no y') }}",
    "self.jinja": "{% set depth = depth + 1 %}{{ depth }}{% if depth < 3 %}{% include 'self.jinja' %}{% endif %}",
    "block.jinja": "{% block b %}in block{% endblock %}",
    "macro.jinja": "{% macro m() %}macro{% endmacro %}{{ m() }}",
    "uses_self.jinja": "{{ self.b() if self.b is defined else 'none' }}",
    "count.jinja": "{% set ns.n = ns.n + 1 %}",
    "bad.jinja": "{% if %}",
}
MAINS = {
    "assignments_stay_inside": "{% set x = 'outer' %}{% include 'sets.jinja' %}{{ x }}",
    "loop_variables_are_seen": "{% for i in range(3) %}{% include 'local.jinja' %}{% endfor %}",
    "loop_is_not": "{% for i in range(3) %}{% include 'loop.jinja' %}{% endfor %}",
    "nested_and_block_locals": "{% set y = 2 %}{% include 'outer.jinja' %}",
    "self_include": "{% set depth = 0 %}{% include 'self.jinja' %}",
    "blocks_macros_self": "{% include 'block.jinja' %}{% include 'macro.jinja' %}"
    "{% include 'uses_self.jinja' %}",
    "namespace": "{% set ns = namespace(n=0) %}{% for _ in range(3) %}{% include 'count.jinja' %}"
    "{% endfor %}{{ ns.n }}",
    "not_taken": "{% if false %}{% include 'missing.jinja' %}{% include 'bad.jinja' %}{% endif %}ok",
    "missing": "{% include 'missing.jinja' %}",
    "unparsable": "{% include 'bad.jinja' %}",
    "kinds_left_as_they_are": "{% include 'missing.jinja' ignore missing %}"
    "{% include 'inner.jinja' without context %}{% include name %}",
}


def rendered(environment: jinja2.Environment, name: str) -> str:
    try:
        return environment.get_template(name).render(name="inner.jinja", y="given")
    except jinja2.TemplateError as exc:
        return f"{type(exc).__name__}: {exc}"


@pytest.mark.parametrize("case", MAINS)
def test_an_inlined_include_renders_what_the_include_rendered(case: str, tmp_path: Path) -> None:
    from harness.calls.prompting.sandbox import FolderLoader

    for name, text in {**INCLUDED, "main.jinja": MAINS[case]}.items():
        (tmp_path / name).write_text(text)
    options: dict[str, Any] = {
        "loader": FolderLoader(tmp_path),
        "undefined": jinja2.StrictUndefined,
    }
    ours, before = BoundedSandbox(**options), NotInlining(**options)
    assert rendered(ours, "main.jinja") == rendered(before, "main.jinja")
    failed = rendered(ours, "main.jinja").startswith(("TemplateNotFound", "TemplateSyntaxError"))
    assert failed is (case in ("missing", "unparsable"))


def test_a_template_is_hashed_with_what_it_includes_though_its_code_inlines_it(
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
