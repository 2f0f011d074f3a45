"""`harness list providers|prompts|metrics|protocols|experiments`: what is registered, one
line each, plugins included (`harness.core.plugins`) and marked with their package."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Literal, get_args

import typer

from harness.cli.common import console, user_errors
from harness.core.errors import HarnessError
from harness.core.sanitize import terminal_text

Listing = Literal["providers", "prompts", "metrics", "protocols", "experiments"]


@user_errors
def list_(
    what: Annotated[Listing, typer.Argument(help=", ".join(get_args(Listing)), metavar="WHAT")],
    folder: Annotated[
        Path, typer.Option(help="Where `experiments` looks for experiment files.")
    ] = Path("experiments"),
) -> None:
    """Show what there is to run, one line each: the providers (judges and scorers, with the
    pip extra they need), prompt variants, metrics, protocols, or the experiment files
    of --folder (with the first sentence of each one's opening comment). An entry added by
    an installed plugin names its package."""
    rows = _experiment_files(folder) if what == "experiments" else _registered(what)
    width = max((len(name) for name, _ in rows), default=0)
    for name, detail in rows:
        line = f"{name:<{width}}  {detail}".rstrip()
        console.print(terminal_text(line), highlight=False, soft_wrap=True)


def _registered(what: str) -> list[tuple[str, str]]:
    from harness.calls.prompting.variants import VARIANTS
    from harness.config.protocols import PROTOCOLS
    from harness.scoring.registry import METRICS, metrics
    from providers import REGISTRY

    rows: Iterable[tuple[str, str]]
    if what == "providers":
        rows = (
            (name, f"{e.kind} · {e.summary}" + (f" [{e.extra}]" if e.extra else ""))
            for name, e in sorted(REGISTRY.items())
        )
        plugins = REGISTRY.plugins
    elif what == "prompts":
        rows = ((name, f"{v.mode} · {v.template}") for name, v in VARIANTS.items())
        plugins = VARIANTS.plugins
    elif what == "metrics":
        rows = (
            (m.name, f"{m.label} · {m.kind}" + ("" if m.higher_is_better else ", lower is better"))
            for m in metrics()
        )
        plugins = METRICS.plugins
    else:
        rows = ((name, p.summary) for name, p in PROTOCOLS.items())
        plugins = PROTOCOLS.plugins
    return [
        (name, detail + (f" (plugin: {plugins[name]})" if name in plugins else ""))
        for name, detail in rows
    ]


def _experiment_files(folder: Path) -> list[tuple[str, str]]:
    """Each experiment file of `folder` and the first sentence of its opening comment."""
    from harness.core.yaml_files import yaml_text

    if not folder.is_dir():
        raise HarnessError(f"{folder}: no such folder (--folder names where experiments are)")
    rows = []
    for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
        comment = []
        for line in yaml_text(path).splitlines():
            if not line.startswith("#"):
                break
            comment.append(line.lstrip("#").strip())
        text = " ".join(comment)
        rows.append((path.stem, re.split(r"\.\s+(?=[A-Z])", text)[0].rstrip(".")))
    return rows
