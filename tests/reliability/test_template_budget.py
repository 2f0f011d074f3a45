"""D9/D10: the template sandbox's bounds hold where nothing is printed and before a value is
built. D9: the time limit is checked at every step of every loop, so loops with empty bodies
stop after MAX_SECONDS instead of running 1e10 steps. D10: join, replace (filter and method),
`~`, tojson, and str.join/format refuse a result longer than MAX_TEXT before building it,
instead of allocating gigabytes and checking afterwards."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import pytest

from harness.calls.prompting import sandbox
from harness.calls.prompting.templates import TemplateError, render

BIG = "{% set big = 'x' * 100000 %}"

EMPTY_LOOPS = {
    "nested_range": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
    "{% endfor %}",
    "nested_string": BIG + "{% for a in big %}{% for b in big %}{% endfor %}{% endfor %}",
    "loop_with_filter": "{% for i in range(100000) %}{% for j in range(100000) if j %}"
    "{% endfor %}{% endfor %}",
    "loop_variable": "{% for i in range(100000) %}{% for j in range(100000) %}{% set k = loop.index %}"
    "{% endfor %}{% endfor %}",
}

BUILDERS = {
    "join_filter": BIG + "{{ ([big] * 100000) | join }}",
    "join_method": BIG + "{{ ''.join([big] * 100000) }}",
    # the repeat of issue 48's attacks: the check built the separators to measure them (10 GB)
    "join_long_separator": BIG + "{{ (big | list) | join(big) }}",
    "join_method_long_separator": BIG + "{{ big.join(big | list) }}",
    "replace_filter": BIG + "{{ big | replace('x', big) }}",
    "replace_method": BIG + "{{ big.replace('x', big) }}",
    "tilde_doubling": BIG + "{% set ns = namespace(s=big) %}{% for i in range(40) %}"
    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
    "tilde_of_a_list": BIG + "{{ ([big] * 100000) ~ '' }}",
    "tojson": BIG + "{{ ([big] * 100000) | tojson }}",
    "format_fields": BIG + "{{ ('{0}' * 30000).format(big) }}",
    "percent_fields": BIG + "{{ ('%s' * 30000) % ((big,) * 30000) }}",
}


def _template(body: str) -> str:
    return "{% block system %}Judge music.{% endblock %}{% block user %}" + body + "{% endblock %}"


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    folder = tmp_path / "prompts"
    folder.mkdir()
    return folder


@pytest.mark.parametrize("body", EMPTY_LOOPS.values(), ids=EMPTY_LOOPS.keys())
def test_d9_empty_loops_stop_at_the_time_limit(
    prompts: Path, body: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox, "MAX_SECONDS", 0.5)
    (prompts / "slow.jinja").write_text(_template(body))
    started = time.monotonic()
    with pytest.raises(TemplateError, match=r"slow\.jinja.*longer than 0\.5 s"):
        render("slow.jinja", {}, [], prompts)
    assert time.monotonic() - started < 3.0


@pytest.mark.parametrize("body", BUILDERS.values(), ids=BUILDERS.keys())
def test_d10_huge_values_are_refused_before_they_are_built(prompts: Path, body: str) -> None:
    (prompts / "huge.jinja").write_text(_template(body))
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    with pytest.raises(TemplateError, match=r"huge\.jinja.*longer than") as caught:
        render("huge.jinja", {}, [], prompts)
    assert time.monotonic() - started < 5.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before < 200_000  # KiB
    assert len(str(caught.value)) < 400


def test_d9_d10_ordinary_templates_still_render(prompts: Path) -> None:
    body = (
        "{% for turn in dialogue %}{{ loop.index }}. {{ turn.text ~ '!' }}\n{% endfor %}"
        "{{ ['a', 'b'] | join(', ') }} {{ 'abc'.replace('b', 'B') }} {{ {'k': 1} | tojson }}"
        " {{ '{0}-{1}'.format(1, 2) }} {{ '%s/%s' % (3, 4) }}"
        "{% for i in range(3) %}{% for j in 'ab' if j != 'b' %}{{ i }}{{ j }}{% endfor %}{% endfor %}"
    )
    (prompts / "ok.jinja").write_text(_template(body))
    rendered = render("ok.jinja", {"dialogue": [{"text": "hi"}, {"text": "yo"}]}, [], prompts)
    assert rendered.parts == ('1. hi!\n2. yo!\na, b aBc {"k": 1} 1-2 3/40a1a2a',)


@pytest.mark.parametrize(("items", "start"), [("[[0]]", "[]"), ("[(0,)]", "()")])
def test_sum_adds_numbers_only(prompts: Path, items: str, start: str) -> None:
    """Issue 48: `sum(start=[])` over a list of 100,000 lists concatenates in quadratic time
    (past 90 s) while no value passes a bound; sum adds numbers, nothing else."""
    body = "{{ (" + items + " * 100000) | sum(start=" + start + ") }}"
    (prompts / "sum.jinja").write_text(_template(body))
    started = time.monotonic()
    with pytest.raises(TemplateError, match=r"sum\.jinja.*sum adds numbers"):
        render("sum.jinja", {}, [], prompts)
    assert time.monotonic() - started < 5.0
    (prompts / "ok.jinja").write_text(_template("{{ [1, 2.5] | sum }} {{ [1] | sum(start=2) }}"))
    assert render("ok.jinja", {}, [], prompts).parts == ("3.5 3",)
