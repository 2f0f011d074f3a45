"""Prompt rendering: Jinja templates from `prompts/` in the sandbox, with blocks `system` and
`user`; `{{ clip.audio }}` renders a placeholder split out into an audio part."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import meta, nodes
from jinja2.runtime import Context

from harness.calls.prompting.sandbox import (
    BoundedSandbox,
    FolderLoader,
    check_output,
    reads_of,
    time_limit,
)
from harness.core.errors import HarnessError
from harness.core.sanitize import clean_text
from harness.core.types import AudioRef

# prompts/ in a source checkout; a wheel carries them as harness/bundled_prompts.
_CHECKOUT_PROMPTS = Path(__file__).resolve().parents[3] / "prompts"
_BUNDLED_PROMPTS = Path(__file__).resolve().parents[2] / "bundled_prompts"
DEFAULT_PROMPTS_DIR = _CHECKOUT_PROMPTS if _CHECKOUT_PROMPTS.is_dir() else _BUNDLED_PROMPTS
# A placeholder carries a secret drawn at start-up, so no dataset text can be taken for one.
_NONCE = secrets.token_hex(16)
_PLACEHOLDER = re.compile(rf"<\|audio:{_NONCE}:(\d+)\|>")


class TemplateError(HarnessError):
    pass


@dataclass(frozen=True)
class ClipView:
    """What a template may see of a candidate clip (never its id or path)."""

    label: str
    caption: str
    audio: str  # placeholder, replaced by the clip's audio part


@dataclass(frozen=True)
class RenderedPrompt:
    system: str
    parts: tuple[str | AudioRef, ...]


def prompts_dir() -> Path:
    configured = os.environ.get("BGM_JUDGE_PROMPTS")
    return DEFAULT_PROMPTS_DIR if configured is None else Path(configured)


@lru_cache(maxsize=8)
def environment(directory: Path) -> BoundedSandbox:
    """The sandbox of a prompts folder (each run reloads templates: `TemplateHashes`)."""
    return BoundedSandbox(
        loader=FolderLoader(directory, *PLUGIN_FOLDERS),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        auto_reload=False,
    )


PLUGIN_FOLDERS: list[Path] = []  # plugins' own templates, looked up after the prompts folder


def add_template_folder(folder: Path) -> None:
    """Look templates up in `folder` too (a plugin's own), after the prompts folder."""
    if folder not in PLUGIN_FOLDERS:
        PLUGIN_FOLDERS.append(folder)
        reload_templates()


def reload_templates() -> None:
    environment.cache_clear()
    _read_by_name.clear()


_BLANK_RUN = re.compile(r"\n{3,}")


def audio_placeholder(index: int) -> str:
    return f"<|audio:{_NONCE}:{index}|>"


def template_hash(name: str, directory: Path | None = None) -> str:
    """SHA-256 over the template's source and every template it includes, recursively."""
    digest = hashlib.sha256()
    for current, source, _ in _sources(name, directory or prompts_dir()):
        digest.update(current.encode() + b"\0" + source.encode() + b"\0")
    return digest.hexdigest()


def _sources(name: str, folder: Path) -> Iterator[tuple[str, str, nodes.Template]]:
    """(name, source, tree) of the template and of every template it names, recursively."""
    env = environment(folder)
    seen, queue = set(), [name]
    while queue:
        current = queue.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            source = env.loader.get_source(env, current)[0]  # type: ignore[union-attr]
        except jinja2.TemplateNotFound:
            raise _not_found(current, folder) from None
        except jinja2.exceptions.SecurityError as exc:
            raise TemplateError(f"prompt template {current} was refused: {exc}") from None
        try:
            tree = env.parse(source)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"template {current}:{exc.lineno}: {exc.message}") from None
        except RecursionError:
            raise TemplateError(
                f"template {current} is nested too deeply to read (RecursionError)"
            ) from None
        yield current, source, tree
        queue.extend(t for t in meta.find_referenced_templates(tree) if t)


class TemplateHashes:
    """`template_hash` once per template for as long as this object lives (a run)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory
        self._hashes: dict[str, str] = {}
        reload_templates()  # a new run renders the templates as they are now

    @property
    def used(self) -> dict[str, str]:  # run.json's `templates`
        return dict(self._hashes)

    def __call__(self, name: str) -> str:
        hashed = self._hashes.get(name)
        if hashed is None:
            hashed = self._hashes[name] = template_hash(name, self.directory)
        return hashed


def _not_found(name: str, folder: Path) -> TemplateError:
    if name.startswith("/") or ".." in name.replace("\\", "/").split("/"):
        return TemplateError(
            f"prompt template {name} was refused: templates may only use files inside the "
            f"prompts folder {folder}"
        )
    return TemplateError(f"prompt template not found: {name}")


def _render_block(template: jinja2.Template, block: str, context: Context) -> str:
    if block not in template.blocks:
        raise TemplateError(f"template {template.name} has no '{block}' block")
    text = check_output(template.blocks[block](context))
    if "\n\n\n" in text:
        text = _BLANK_RUN.sub("\n\n", text)
    return clean_text(text.strip())  # "\ud800" in a template is no UTF-8: U+FFFD


def render(
    name: str, context: dict[str, Any], audio: list[AudioRef], directory: Path | None = None
) -> RenderedPrompt:
    """Render template `name` with `context`; `audio[i]` replaces placeholder i."""
    system, user = _render_text(name, context, directory or prompts_dir())
    return _filled(system, _audio_slots(name, system, user), audio)


def render_each(
    name: str,
    context: dict[str, Any],
    slot: str,
    views: Sequence[object],
    audio: Sequence[list[AudioRef]],
    directory: Path | None = None,
) -> list[RenderedPrompt]:
    """`render(name, {**context, slot: views[i]}, audio[i])` for each i; a view with the same
    values in the fields a render read gets that render's text (when every use of `slot` in
    the templates is a plain `x.name` or `x['name']`; else each view is rendered)."""
    folder = directory or prompts_dir()
    if not views or not _read_by_name_only(name, folder, slot):
        return [
            render(name, {**context, slot: view}, clips, folder)
            for view, clips in zip(views, audio, strict=True)
        ]
    rendered: list[tuple[dict[Any, Any], str, Slots]] = []
    out = []
    for view, clips in zip(views, audio, strict=True):
        found = next((r for r in rendered if _same_reads(view, r[0])), None)
        if found is None:
            with reads_of(view) as reads:
                system, user = _render_text(name, {**context, slot: view}, folder)
            found = (reads, system, _audio_slots(name, system, user))
            rendered.append(found)
        out.append(_filled(found[1], found[2], clips))
    return out


def _same_reads(view: object, reads: dict[Any, Any]) -> bool:
    for field, value in reads.items():
        if not isinstance(field, str) or not isinstance(value, str | int | float | None):
            return False
        mine = getattr(view, field, _MISSING)
        if type(mine) is not type(value) or mine != value:
            return False
    return True


_MISSING = object()
_read_by_name: dict[tuple[Path, str, str], bool] = {}


def _read_by_name_only(name: str, folder: Path, slot: str) -> bool:
    key = (folder, name, slot)
    if key not in _read_by_name:
        _read_by_name[key] = all(
            None not in meta.find_referenced_templates(tree) and _only_read_by_name(tree, slot)
            for _, _, tree in _sources(name, folder)
        )
    return _read_by_name[key]


def _only_read_by_name(tree: nodes.Template, slot: str) -> bool:
    read = {
        id(node.node)
        for node in tree.find_all((nodes.Getattr, nodes.Getitem))
        if isinstance(node, nodes.Getattr)
        or (isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const))
    }
    return all(id(n) in read for n in tree.find_all(nodes.Name) if n.name == slot)


def _render_text(name: str, context: dict[str, Any], folder: Path) -> tuple[str, str]:
    env = environment(folder)
    try:
        with time_limit():
            template = env.get_template(name)
            # One context for both blocks: what a block assigns stays in the block.
            shared = template.new_context(context)
            return _render_block(template, "system", shared), _render_block(
                template, "user", shared
            )
    except jinja2.TemplateNotFound as exc:
        raise _not_found(str(exc.name), folder) from None
    except jinja2.exceptions.SecurityError as exc:
        raise TemplateError(f"template {name} was refused by the sandbox: {exc}") from None
    except jinja2.UndefinedError as exc:
        raise TemplateError(f"template {name} uses an undefined variable: {exc.message}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"template {exc.name}:{exc.lineno}: {exc.message}") from None
    except (ArithmeticError, LookupError, TypeError, ValueError, RecursionError) as exc:
        reason = f"{type(exc).__name__}: {exc}"  # a template is user code: the user's to fix
        raise TemplateError(f"template {name} failed while rendering: {reason}") from None


# A prompt's text cut at its audio placeholders: text, then audio index, text, ...
Slots = tuple[str | int, ...]


def _audio_slots(name: str, system: str, user: str) -> Slots:
    if _PLACEHOLDER.search(system):
        raise TemplateError(f"template {name} puts audio in the system block")
    pieces = _PLACEHOLDER.split(user)
    return tuple(piece if i % 2 == 0 else int(piece) for i, piece in enumerate(pieces) if piece)


def _filled(system: str, slots: Slots, audio: list[AudioRef]) -> RenderedPrompt:
    parts = tuple(audio[slot] if type(slot) is int else slot for slot in slots)
    return RenderedPrompt(system=system, parts=parts)  # type: ignore[arg-type]
