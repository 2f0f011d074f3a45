"""Prompt rendering: Jinja templates from `prompts/` in a sandbox with StrictUndefined.

A template defines two blocks, `system` and `user`. Audio goes into the user turn where the
template writes `{{ clip.audio }}`: that renders a placeholder which is then split out into
an audio part, so the same template serves every provider's wire format.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import meta

from harness.errors import HarnessError
from harness.prompting.sandbox import BoundedSandbox, FolderLoader, check_output, time_limit
from harness.types import AudioRef

# The project's prompts/ folder in a source checkout; a wheel carries the same files as
# harness/bundled_prompts (see pyproject.toml).
_CHECKOUT_PROMPTS = Path(__file__).resolve().parents[2] / "prompts"
_BUNDLED_PROMPTS = Path(__file__).resolve().parents[1] / "bundled_prompts"
DEFAULT_PROMPTS_DIR = _CHECKOUT_PROMPTS if _CHECKOUT_PROMPTS.is_dir() else _BUNDLED_PROMPTS
# A placeholder carries a secret drawn when the process starts, so that no text of a dataset
# (a dialogue quoting "<|audio:0|>", a caption) can be taken for one.
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
    return DEFAULT_PROMPTS_DIR if configured is None else _as_path(configured)


@lru_cache(maxsize=8)
def _as_path(folder: str) -> Path:
    return Path(folder)  # asked at every render: a Path is not built each time


@lru_cache(maxsize=8)
def environment(directory: Path) -> BoundedSandbox:
    """The sandbox of one prompts folder. Its compiled templates are not checked against
    the files at every render (four `stat`s a call): `reload_templates` drops them, and each
    run calls it as it starts (`TemplateHashes`), so a run renders the files it hashed."""
    return BoundedSandbox(
        loader=FolderLoader(directory),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        auto_reload=False,
    )


def reload_templates() -> None:
    """Templates are read from disk again at their next use (an edit since is seen)."""
    environment.cache_clear()


_BLANK_RUN = re.compile(r"\n{3,}")


def audio_placeholder(index: int) -> str:
    return f"<|audio:{_NONCE}:{index}|>"


def template_hash(name: str, directory: Path | None = None) -> str:
    """SHA-256 over the template's source and every template it includes, recursively."""
    folder = directory or prompts_dir()
    env = environment(folder)
    digest, seen, queue = hashlib.sha256(), set(), [name]
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
        digest.update(current.encode() + b"\0" + source.encode() + b"\0")
        queue.extend(t for t in meta.find_referenced_templates(env.parse(source)) if t)
    return digest.hexdigest()


class TemplateHashes:
    """`template_hash` computed once per template for as long as this object lives (one run:
    reading and parsing the templates again for every item cost more than the call)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory
        self._hashes: dict[str, str] = {}
        reload_templates()  # a new run renders the templates as they are now

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


def _render_block(template: jinja2.Template, block: str, context: dict[str, Any]) -> str:
    if block not in template.blocks:
        raise TemplateError(f"template {template.name} has no '{block}' block")
    text = check_output(template.blocks[block](template.new_context(context)))
    if "\n\n\n" in text:
        text = _BLANK_RUN.sub("\n\n", text)
    return text.strip()


def render(
    name: str, context: dict[str, Any], audio: list[AudioRef], directory: Path | None = None
) -> RenderedPrompt:
    """Render template `name` with `context`; `audio[i]` replaces placeholder i."""
    folder = directory or prompts_dir()
    env = environment(folder)
    try:
        with time_limit():
            template = env.get_template(name)
            system = _render_block(template, "system", context)
            user = _render_block(template, "user", context)
    except jinja2.TemplateNotFound as exc:
        raise _not_found(str(exc.name), folder) from None
    except jinja2.exceptions.SecurityError as exc:
        raise TemplateError(f"template {name} was refused by the sandbox: {exc}") from None
    except jinja2.UndefinedError as exc:
        raise TemplateError(f"template {name} uses an undefined variable: {exc.message}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"template {exc.name}:{exc.lineno}: {exc.message}") from None
    except (ArithmeticError, LookupError, TypeError, ValueError, RecursionError) as exc:
        # A template is user code: its runtime failures (a range too big for the sandbox,
        # endless macro recursion, a bad format string) are the user's to fix.
        reason = f"{type(exc).__name__}: {exc}"
        raise TemplateError(f"template {name} failed while rendering: {reason}") from None
    if _PLACEHOLDER.search(system):
        raise TemplateError(f"template {name} puts audio in the system block")
    parts: list[str | AudioRef] = []
    for i, piece in enumerate(_PLACEHOLDER.split(user)):
        if i % 2 == 0:
            if piece:
                parts.append(piece)
        else:
            parts.append(audio[int(piece)])
    return RenderedPrompt(system=system, parts=tuple(parts))
