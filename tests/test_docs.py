"""The documentation a user reads (README.md, docs/, the datasets' READMEs) stays true to the
code: every relative link and anchor resolves inside the repository, nothing points at a
file the user does not have, and the reference pages name every provider option, every
experiment-file key, every prompt variant, every metric and every extra the code defines
(the lists come from the code, so a new option or metric without its documentation fails
here)."""

from __future__ import annotations

import ast
import re
import tomllib
import types
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from harness.calls.prompting.variants import VARIANTS
from harness.config.experiment import ExperimentConfig, SweepConfig
from harness.config.protocols import PROTOCOLS
from harness.core.dataset import Item
from harness.core.types import ProviderConfig
from harness.scoring import registry
from harness.scoring.evaluation import Evaluation, evaluate_predictions
from providers import REGISTRY

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(
    [ROOT / "README.md", *DOCS.rglob("*.md"), *(ROOT / "data").glob("*/README.md")],
    key=str,
)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
PARENT_PATH = re.compile(r"(?:\.\./)+[\w./-]*")
# The name of the design notes the project was built from, which users never receive.
UNSHIPPED = re.compile(r"\b" + "DESIGN" + r"(\.md\b|'s\b)")


def _prose(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    found: set[str] = set(EXPLICIT_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for _, line in _prose(text):
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            slug = _slug(heading.group(1))
            count = seen.get(slug, 0)
            found.add(slug if count == 0 else f"{slug}-{count}")
            seen[slug] = count + 1
    return found


def _inside_repository(path: Path) -> bool:
    return path.resolve().is_relative_to(ROOT)


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_the_pages_are_found() -> None:
    names = {_rel(p) for p in PAGES}
    assert {"README.md", "docs/formats.md", "docs/metrics.md", "docs/providers.md"} <= names
    assert {"docs/experiments.md", "docs/protocols/rank.md", "data/sample/README.md"} <= names


def test_the_slugs_follow_github() -> None:
    assert _slug("`--set` overrides") == "--set-overrides"
    assert _slug("Ties: the expectation over tie-breaks") == "ties-the-expectation-over-tie-breaks"
    assert _slug("`metrics.json`") == "metricsjson"


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for number, line in _prose(page.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            path_part, _, anchor = target.partition("#")
            file = (page.parent / path_part) if path_part else page
            where = f"{_rel(page)}:{number}: {target}"
            if not _inside_repository(file):
                broken.append(f"{where} leads out of the repository")
            elif not file.exists():
                broken.append(f"{where} does not exist")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{where}: no heading with anchor #{anchor}")
    assert broken == []


def _docstrings() -> Iterator[tuple[str, str]]:
    for top in ("harness", "providers"):
        for module in sorted((ROOT / top).rglob("*.py")):
            tree = ast.parse(module.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(
                    node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
                ):
                    doc = ast.get_docstring(node, clean=False)
                    if doc:
                        yield _rel(module), doc


def test_nothing_points_outside_the_repository() -> None:
    """No page or docstring sends the reader to a file the repository does not hold."""
    found = []
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            where = f"{_rel(page)}:{number}"
            if UNSHIPPED.search(line):
                found.append(f"{where}: {line.strip()}")
            for path in PARENT_PATH.findall(line):
                if not _inside_repository(page.parent / path):
                    found.append(f"{where}: {path} is outside the repository")
    for module, doc in _docstrings():
        if UNSHIPPED.search(doc):
            found.append(f"{module}: docstring names a file users do not have")
        if any(
            not _inside_repository((ROOT / module).parent / p) for p in PARENT_PATH.findall(doc)
        ):
            found.append(f"{module}: docstring names a path outside the repository")
    assert found == []


DOC_FILE = re.compile(r"\b(?:docs/[\w./-]+\.md|[A-Z]+\.md)\b")


def test_every_page_a_docstring_names_exists() -> None:
    """A docstring that sends the reader to docs/x.md or README.md names a page that is there."""
    missing = [
        f"{module}: {name}"
        for module, doc in _docstrings()
        for name in DOC_FILE.findall(doc)
        if not (ROOT / name).is_file()
    ]
    assert missing == []


def test_no_source_file_names_the_design_notes() -> None:
    """Comments and tests included: the user's copy of the code cites its own docs."""
    this = Path(__file__).resolve()
    hits = [
        _rel(path)
        for top in ("harness", "providers", "tests", "bench", "experiments", "prompts")
        for path in sorted((ROOT / top).rglob("*"))
        if path.is_file()
        and path.resolve() != this
        and path.suffix in {".py", ".md", ".yaml", ".jinja", ".txt"}
        and UNSHIPPED.search(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert hits == []


def _mentioned(page: str, names: typing.Iterable[str]) -> list[str]:
    text = (DOCS / page).read_text(encoding="utf-8")
    return sorted({name for name in names if f"`{name}`" not in text})


def test_every_provider_and_option_is_in_providers_md() -> None:
    text = (DOCS / "providers.md").read_text(encoding="utf-8")
    missing = []
    for name, entry in REGISTRY.items():
        row = next((ln for ln in text.splitlines() if ln.startswith(f"| `{name}` |")), None)
        if row is None:
            missing.append(f"{name}: no row in the providers table")
            continue
        if entry.extra is not None and f"`{entry.extra}`" not in row:
            missing.append(f"{name}: its extra {entry.extra!r} is not in its row")
        if entry.kind not in row:
            missing.append(f"{name}: its kind {entry.kind!r} is not in its row")
        options = entry.load(name).Options
        missing += [f"{name}: option {o}" for o in _mentioned("providers.md", options.model_fields)]
    assert missing == []


def _table_names(text: str, heading: str) -> list[str]:
    """The backquoted names that start the rows of the first table under `heading`."""
    section = text.split(heading, 1)[1]
    rows = [line for line in section.split("\n## ", 1)[0].splitlines() if line.startswith("|")]
    return [m.group(1) for row in rows if (m := re.match(r"\| `([\w-]+)` \|", row))]


def test_every_prompt_variant_is_in_the_prompts_table() -> None:
    """docs/prompts.md's table of `prompt:` values lists every variant of the registry, once."""
    page = (DOCS / "prompts.md").read_text(encoding="utf-8")
    names = _table_names(page, "# Prompt variants")
    assert sorted(names) == sorted(VARIANTS)


def test_every_judge_variant_is_in_one_mode_row_of_rank_md() -> None:
    """docs/protocols/rank.md's table of modes names every variant that scores candidates in
    exactly one row (`describe` has a page of its own), the pointwise row exactly the
    variants whose mode is pointwise."""
    text = (DOCS / "protocols" / "rank.md").read_text(encoding="utf-8")
    rows = {
        line.split("|")[1].strip(): re.findall(r"`([\w-]+)`", line.split("|")[2])
        for line in text.split("## ", 1)[0].splitlines()
        if line.startswith("| ") and not line.startswith(("| mode", "| scorer"))
    }
    listed = [name for names in rows.values() for name in names]
    assert sorted(listed) == sorted(n for n, v in VARIANTS.items() if v.mode != "describe")
    assert sorted(rows["pointwise"]) == sorted(
        n for n, v in VARIANTS.items() if v.mode == "pointwise"
    )
    # no candidate to score: describe's page and music-crs's (its replies are rated)
    assert [n for n, v in VARIANTS.items() if v.mode == "describe"] == [
        "describe",
        "response_judge",
    ]
    assert "[`protocol: describe`](describe.md)" in text
    assert [name for name in PROTOCOLS if f"`protocol: {name}`" not in text] == []


def _models(model: type[BaseModel]) -> Iterator[type[BaseModel]]:
    """`model` and every model its fields nest, provider blocks excepted (providers.md)."""
    yield model
    for info in model.model_fields.values():
        for nested in _types_in(info.annotation):
            if issubclass(nested, BaseModel) and not issubclass(nested, ProviderConfig):
                yield from _models(nested)


def _types_in(annotation: object) -> Iterator[type]:
    if isinstance(annotation, type) and not isinstance(annotation, types.GenericAlias):
        yield annotation
    for argument in typing.get_args(annotation):
        yield from _types_in(argument)


def test_every_experiment_key_is_in_experiments_md() -> None:
    models = {*_models(ExperimentConfig), *_models(SweepConfig)}
    models |= {v.options for v in VARIANTS.values() if v.options is not None}
    assert len(models) >= 8  # the two configs, inputs, metrics, budget, rerank, refine, options
    keys = {info.alias or name for model in models for name, info in model.model_fields.items()}
    assert _mentioned("experiments.md", keys) == []


def _two_turns() -> list[Evaluation]:
    item = Item(id="d1", query="calm piano", candidates=("a", "b", "c"), relevant=("b",))
    scores = {0: {"d1": {"a": 1.0, "b": 2.0, "c": None}}}
    return [evaluate_predictions([item], scores, at=(7,), n_bootstrap=10) for _ in range(2)]


def test_every_metric_name_is_in_metrics_md() -> None:
    names = {metric.name for metric in registry.metrics()}
    assert {"hit@1", "mrr", "recall@K", "median_rank", "success@K", "bleu_1"} <= names
    assert _mentioned("metrics.md", names) == []


def test_every_metrics_json_key_is_in_metrics_md() -> None:
    first = _two_turns()[0]
    evaluation = Evaluation(
        first.aggregate,
        first.matrices,
        first.predictions,
        groups={"g": first.aggregate},
        turns=[(1, first.aggregate)],
        turn_gain={},
    )
    keys = set(evaluation.to_json()) | {b for p in PROTOCOLS.values() for b in p.blocks}
    assert {"n_items", "coverage", "tie_rate", "groups", "turns", "description"} <= keys
    assert _mentioned("metrics.md", keys) == []


def test_every_extra_is_in_the_install_table() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    install = (DOCS / "install.md").read_text(encoding="utf-8")
    rows = {ln.split("|")[1].strip() for ln in install.splitlines() if ln.startswith("| `")}
    assert {f"`{extra}`" for extra in extras} <= rows


def test_the_readme_activates_the_venv_before_its_first_harness_command() -> None:
    """Else the first `harness ...` a new user types is "command not found"."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "source .venv/bin/activate" in readme
    assert readme.index("source .venv/bin/activate") < readme.index("`harness ")
