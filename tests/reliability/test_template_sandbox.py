"""User templates (BGM_JUDGE_PROMPTS) that reach outside their context are refused with a
clear TemplateError, never rendered and never a crash."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from harness.calls.prompting.templates import ClipView, TemplateError, render, template_hash
from harness.cli.main import app
from tests.reliability.conftest import MakeDataset

SECRET = "TOP-SECRET-CONTENT-4711"

ATTACKS = {
    "class_of_a_list": ("{{ dialogue.__class__ }}", "refused by the sandbox"),
    "subclasses": ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "refused by the sandbox"),
    "function_globals": ("{{ range.__globals__ }}", "refused by the sandbox"),
    "cycler_globals": ("{{ cycler.__init__.__globals__.os }}", "refused by the sandbox"),
    "attr_filter": ("{{ dialogue|attr('__class__') }}", "refused by the sandbox"),
    "format_string": ("{{ '{0.__class__}'.format(dialogue) }}", "refused by the sandbox"),
    "template_internals": ("{{ self._TemplateReference__context }}", "refused by the sandbox"),
    "clip_internals": ("{{ clip.__init__.__code__ }}", "refused by the sandbox"),
    "dunder_in_condition": ("{% if ''.__class__ %}x{% endif %}", "refused by the sandbox"),
    "mutate_context_list": ("{{ dialogue.pop() }}", "refused by the sandbox"),
    "mutate_context_dict": ("{{ options.update({'k': 1}) }}", "refused by the sandbox"),
    "include_parent": ('{% include "../secret.jinja" %}', "templates may only use files inside"),
    "include_etc": ('{% include "../../../../../../etc/passwd" %}', "templates may only use"),
    "include_absolute": ('{% include "/etc/passwd" %}', "templates may only use files inside"),
    "import_parent": ('{% import "../secret.jinja" as s %}{{ s }}', "templates may only use"),
    "huge_range": ("{% for i in range(10**9) %}{% endfor %}", "OverflowError"),
    "endless_recursion": ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "RecursionError"),
    "format_map_index": ("{{ '{0}'.format_map(options) }}", "failed while rendering"),
    "unknown_variable": ("{{ config }}", "undefined variable: 'config' is undefined"),
    "clip_id_hidden": ("{{ clip.id }}", "has no attribute 'id'"),
    "clip_path_hidden": ("{{ clip.path }}", "has no attribute 'path'"),
    # the repeat of issue 48's attacks: parsed (to hash the template) before any guard
    "deep_parentheses": ("{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}", "RecursionError"),
    "deep_list_literal": ("{{ " + "[" * 5000 + "]" * 5000 + " }}", "RecursionError"),
    "syntax_error": ("{{ 1 + }}", "unexpected"),
}


def _template(body: str) -> str:
    return "{% block system %}Judge music.{% endblock %}{% block user %}" + body + "{% endblock %}"


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    (tmp_path / "secret.jinja").write_text(SECRET)
    folder = tmp_path / "prompts"
    folder.mkdir()
    return folder


@pytest.mark.parametrize(("body", "expected"), ATTACKS.values(), ids=ATTACKS.keys())
def test_escaping_template_is_refused(prompts: Path, body: str, expected: str) -> None:
    (prompts / "evil.jinja").write_text(_template(body))
    context = {
        "dialogue": [{"speaker": "A", "text": "hi"}],
        "options": {},
        "clip": ClipView("Clip", "soft piano", ""),
    }
    with pytest.raises(TemplateError) as caught:
        render("evil.jinja", context, [], prompts)
    message = str(caught.value)
    assert expected in message
    assert SECRET not in message
    assert "evil.jinja" in message or "secret.jinja" in message or "passwd" in message


@pytest.mark.parametrize(
    "statement",
    [
        '{% extends "../secret.jinja" %}',
        '{% include "../secret.jinja" %}',
        '{% import "/etc/passwd" as p %}',
        '{% from "sub/../../secret.jinja" import x %}',
    ],
)
def test_template_hash_refuses_files_outside_the_folder(prompts: Path, statement: str) -> None:
    """The runner hashes a template and everything it references before rendering."""
    (prompts / "evil.jinja").write_text(statement + _template(""))
    with pytest.raises(TemplateError, match="templates may only use files inside"):
        template_hash("evil.jinja", prompts)


def test_harmless_template_still_renders(prompts: Path) -> None:
    (prompts / "ok.jinja").write_text(_template("{{ dialogue[0].text|upper }} {{ clip.caption }}"))
    rendered = render(
        "ok.jinja", {"dialogue": [{"text": "hi"}], "clip": ClipView("C", "x", "")}, [], prompts
    )
    assert rendered.system == "Judge music."
    assert rendered.parts == ("HI x",)


def _run_with_user_prompts(
    prompts: Path, make_dataset: MakeDataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Result:
    """`harness run` of the mock judge on a small dataset, the prompts read from `prompts`."""
    monkeypatch.setenv("BGM_JUDGE_PROMPTS", str(prompts))
    monkeypatch.chdir(tmp_path)
    make_dataset()
    (tmp_path / "exp.yaml").write_text(
        yaml.safe_dump({"name": "evil", "dataset": "data", "provider": {"name": "mock"}})
    )
    return CliRunner().invoke(
        app,
        ["run", "exp.yaml", "--results-dir", "results", "--cache-dir", "cache", "--no-progress"],
    )


@pytest.mark.parametrize(
    "attack",
    ["class_of_a_list", "include_parent", "huge_range", "deep_parentheses", "syntax_error"],
)
def test_cli_refuses_user_template_with_one_line_and_exit_2(
    attack: str,
    prompts: Path,
    make_dataset: MakeDataset,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A user prompts folder overriding zero_shot.jinja: the run stops before any call."""
    body, expected = ATTACKS[attack]
    (prompts / "zero_shot.jinja").write_text(_template(body))
    result = _run_with_user_prompts(prompts, make_dataset, tmp_path, monkeypatch)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "zero_shot.jinja" in lines[0] or "secret.jinja" in lines[0]
    assert expected in lines[0]
    assert SECRET not in result.output
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


# ------------------------------------------------------------------ links out of the folder
def test_a_link_out_of_the_prompts_folder_is_refused(prompts: Path) -> None:
    (prompts / "looks_local.jinja").symlink_to(prompts.parent / "secret.jinja")
    (prompts / "evil.jinja").write_text(_template('{% include "looks_local.jinja" %}'))
    context = {"clip": ClipView("Clip", "soft piano", "")}
    for attempt in (
        lambda: render("evil.jinja", context, [], prompts),
        lambda: template_hash("evil.jinja", prompts),
        lambda: render("looks_local.jinja", context, [], prompts),
    ):
        with pytest.raises(TemplateError, match="templates may only use files inside") as caught:
            attempt()
        assert SECRET not in str(caught.value)


def test_a_linked_folder_out_of_the_prompts_folder_is_refused(prompts: Path) -> None:
    (prompts / "shared").symlink_to(prompts.parent, target_is_directory=True)
    (prompts / "evil.jinja").write_text(_template('{% include "shared/secret.jinja" %}'))
    with pytest.raises(TemplateError, match="templates may only use files inside") as caught:
        render("evil.jinja", {}, [], prompts)
    assert SECRET not in str(caught.value)


def test_a_link_inside_the_prompts_folder_is_fine(prompts: Path) -> None:
    (prompts / "real.jinja").write_text(_template("inside"))
    (prompts / "alias.jinja").symlink_to(prompts / "real.jinja")
    assert render("alias.jinja", {}, [], prompts).parts == ("inside",)


# ------------------------------------------------------------------ bounded rendering
HUGE = {
    "string_times_a_billion": "{{ 'a' * 1000000000 }}",
    "list_times_a_billion": "{{ ['a'] * 1000000000 }}",
    "repeat_of_a_repeat": "{{ ('a' * 100000) * 100000 }}",
    "power_tower": "{{ 10 ** (10 ** 10) }}",
    "percent_width": "{{ '%1000000000s' % 'a' }}",
    "format_width": "{{ '{:>1000000000}'.format('a') }}",
    "method_width": "{{ 'a'.ljust(1000000000) }}",
    "filter_width": "{{ 'a'|center(1000000000) }}",
    "indent_width": "{{ 'a\nb'|indent(1000000000) }}",
    "loop_of_big_strings": "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}",
    "nested_ranges": "{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}"
    "{% endfor %}{% endfor %}",
}


@pytest.mark.parametrize("body", HUGE.values(), ids=HUGE.keys())
def test_rendering_is_bounded(prompts: Path, body: str) -> None:
    (prompts / "huge.jinja").write_text(_template(body))
    started = time.monotonic()
    with pytest.raises(TemplateError, match=r"huge\.jinja") as caught:
        render("huge.jinja", {}, [], prompts)
    assert time.monotonic() - started < 10.0
    assert len(str(caught.value)) < 400


def test_a_lone_surrogate_a_template_writes_is_replaced_not_a_crash(
    prompts: Path, make_dataset: MakeDataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A template writing "\\ud800" (a lone surrogate) crashed the run hashing its request
    (the repeat of issue 48's attacks): a prompt is UTF-8 text, the surrogate becomes U+FFFD."""
    (prompts / "zero_shot.jinja").write_text(_template("{{ '\\ud800' }} {{ clip.caption }}"))
    rendered = render("zero_shot.jinja", {"clip": ClipView("C", "x", "")}, [], prompts)
    assert rendered.parts == ("\ufffd x",)
    result = _run_with_user_prompts(prompts, make_dataset, tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
