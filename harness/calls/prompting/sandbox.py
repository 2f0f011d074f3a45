"""The Jinja sandbox templates render in: immutable, files of the prompts folder only, and bounded
(`MAX_TEXT` per value, `MAX_POWER_BITS`, `MAX_OUTPUT` per block, `MAX_SECONDS` per render).
Joins, replaces, `~`, formats and `tojson` are measured before they are built; a broken bound
is jinja2's SecurityError."""

from __future__ import annotations

import re
import string
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

MAX_TEXT = 100_000
MAX_OUTPUT = 1_000_000
MAX_POWER_BITS = 4096
MAX_SECONDS = 5.0
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\d*)(?:\.(\d*))?")
_local = threading.local()


class FolderLoader(jinja2.FileSystemLoader):
    """Templates from the prompts folder, then plugins' folders; a link out is refused."""

    def __init__(self, folder: Path, *more: Path) -> None:
        super().__init__([folder, *more])
        self.folder = folder

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        source, filename, uptodate = super().get_source(environment, template)
        found = Path(filename).resolve()
        if not any(found.is_relative_to(Path(root).resolve()) for root in self.searchpath):
            raise SecurityError(
                f"templates may only use files inside the prompts folder "
                f"{self.folder.resolve()} ({template} links out of it)"
            )
        return source, filename, uptodate


@contextmanager
def time_limit(seconds: float | None = None) -> Iterator[None]:
    """Rendering inside this block stops (SecurityError) once `seconds` (MAX_SECONDS) pass."""
    previous = getattr(_local, "deadline", None)
    _local.deadline = time.monotonic() + (MAX_SECONDS if seconds is None else seconds)
    try:
        yield
    finally:
        _local.deadline = previous


def check_time() -> None:
    deadline = getattr(_local, "deadline", None)
    if deadline is not None and time.monotonic() > deadline:
        raise SecurityError(f"rendering took longer than {MAX_SECONDS:g} s")


def check_output(chunks: Iterator[str]) -> str:
    pieces: list[str] = []
    total = 0
    for chunk in chunks:
        check_time()
        total += len(chunk)
        if total > MAX_OUTPUT:
            raise SecurityError(f"the rendered text is longer than {MAX_OUTPUT:,} characters")
        pieces.append(chunk)
    return "".join(pieces)


def _check_size(value: Any) -> None:
    if isinstance(value, str | bytes | list | tuple) and len(value) > MAX_TEXT:
        raise _too_long()


def _too_long() -> SecurityError:
    return SecurityError(f"a value longer than {MAX_TEXT:,} items")


def text_size(value: Any, budget: int = MAX_TEXT) -> int:
    """About the length of `str(value)` or its JSON, unbuilt; SecurityError past `budget`."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str | bytes):
            total += len(item) + 2
        elif isinstance(item, list | tuple | set | frozenset):
            total += 2 * len(item) + 2
            stack.extend(item)
        elif isinstance(item, dict):
            total += 4 * len(item) + 2
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, bool | int | float | None):
            total += 24 if not isinstance(item, int) or abs(item) < 10**20 else len(str(item))
        else:
            total += len(str(item))
        if total > budget:
            raise _too_long()
    return total


def _check_join(items: Any, separator: Any = "") -> None:
    if isinstance(items, list | tuple | str):
        gaps = max(len(items) - 1, 0)
        separators = gaps * text_size(separator) if gaps else 0  # counted, never built
        if separators > MAX_TEXT:
            raise _too_long()
        text_size(items, MAX_TEXT - separators)


def _check_replace(text: Any, old: Any, new: Any, count: Any = None) -> None:
    if isinstance(text, str) and isinstance(old, str) and isinstance(new, str):
        found = text.count(old) if old else len(text) + 1
        if isinstance(count, int) and count >= 0:
            found = min(found, count)
        if len(text) + found * (len(new) - len(old)) > MAX_TEXT:
            raise _too_long()


def _check_fields(template: str, args: Any, percent: bool) -> None:
    if percent:
        fields = len(_PERCENT_SPEC.findall(template))
    else:
        fields = template.count("{") - 2 * template.count("{{")
    if fields > 0 and len(template) + fields * text_size(args) > MAX_TEXT:
        raise _too_long()


def bounded_iter(iterable: Any) -> Iterator[Any]:
    for item in iterable:
        check_time()
        yield item


def bounded_concat(*values: Any) -> str:
    check_time()
    text_size(values)
    return "".join(map(str, values))


class _Bounding(jinja2.visitor.NodeTransformer):
    """Every loop iterates through `bounded_iter`, every `~` is `bounded_concat`."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        iterable = node.iter
        assert isinstance(iterable, nodes.Expr)
        node.iter = _environment_call("bounded_iter", [iterable], iterable.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return _environment_call("bounded_concat", list(node.nodes), node.lineno)


def _environment_call(name: str, args: list[nodes.Expr], lineno: int) -> nodes.Call:
    # An environment attribute, not a template name: a template cannot shadow it.
    return nodes.Call(nodes.EnvironmentAttribute(name), args, [], None, None, lineno=lineno)


def _check_numbers(values: Any) -> None:
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_TEXT:
            raise SecurityError(f"a width or count above {MAX_TEXT:,}")


def _check_format_spec(text: str, percent: bool) -> None:
    if percent:
        widths = [w for match in _PERCENT_SPEC.finditer(text) for w in match.groups() if w]
    else:
        try:
            specs = [spec or "" for _, _, spec, _ in string.Formatter().parse(text)]
        except ValueError:
            return  # the format call itself reports it
        widths = [w for spec in specs for w in re.findall(r"\d+", spec)]
    _check_numbers(int(w) for w in widths)


def _bounded_filter(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    passes_context = getattr(function, "jinja_pass_arg", None) is not None

    @wraps(function)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        check_time()
        given = args[1:] if passes_context else args  # the value, then the filter's arguments
        _check_numbers([*given[1:], *kwargs.values()])
        if name == "format" and given and isinstance(given[0], str):
            _check_format_spec(given[0], percent=True)
            _check_fields(given[0], [*given[1:], *kwargs.values()], percent=True)
        elif name == "join" and given:
            _check_join(given[0], given[1] if len(given) > 1 else kwargs.get("d", ""))
        elif name == "replace" and len(given) >= 3:
            _check_replace(*given[:4])
        elif name == "tojson" and given:
            text_size(given[0])
        elif name == "sum":  # adding lists or strings is quadratic in their number
            start = given[2] if len(given) > 2 else kwargs.get("start", 0)
            if isinstance(start, bool) or not isinstance(start, int | float):
                raise SecurityError("sum adds numbers only")
        result = function(*args, **kwargs)
        _check_size(result)
        return result

    return bounded


class BoundedSandbox(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**", "%", "+"})

    bounded_iter = staticmethod(bounded_iter)
    bounded_concat = staticmethod(bounded_concat)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        # A prompt's cache key is a hash of its text: what draws at random is not offered.
        self.filters.pop("random")
        self.globals.pop("lipsum")
        self.filters = {name: _bounded_filter(f, name) for name, f in self.filters.items()}

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        bounded = _Bounding().visit(tree)
        assert isinstance(bounded, nodes.Template)
        return bounded

    def call_binop(
        self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any
    ) -> Any:
        check_time()
        if operator == "*":
            for sequence, count in ((left, right), (right, left)):
                repeats = isinstance(sequence, str | list | tuple) and isinstance(count, int)
                if repeats and len(sequence) * count > MAX_TEXT:
                    raise _too_long()
        elif operator == "**" and isinstance(left, int) and isinstance(right, int):
            if right > 0 and abs(left) > 1 and right * abs(left).bit_length() > MAX_POWER_BITS:
                raise SecurityError(f"a number of more than {MAX_POWER_BITS} bits")
        elif operator == "%" and isinstance(left, str):
            _check_format_spec(left, percent=True)
            _check_fields(left, right, percent=True)
        result = super().call_binop(context, operator, left, right)
        _check_size(result)
        return result

    def call(
        __self,  # jinja2's signature: a keyword argument of the call may be named "self"
        __context: jinja2.runtime.Context,
        __obj: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        check_time()
        if __obj is not __self.globals.get("range"):  # the sandbox bounds range() itself
            _check_numbers([*args, *kwargs.values()])
        method = getattr(__obj, "__wrapped__", __obj)  # the sandbox wraps str.format
        owner = getattr(method, "__self__", None)
        called = getattr(method, "__name__", "")
        if isinstance(owner, str) and called in ("format", "format_map"):
            _check_format_spec(owner, percent=False)
            _check_fields(owner, [*args, *kwargs.values()], percent=False)
        elif isinstance(owner, str) and called == "join" and args:
            _check_join(args[0], owner)
        elif isinstance(owner, str) and called == "replace" and len(args) >= 2:
            _check_replace(owner, *args[:3])
        result = super().call(__context, __obj, *args, **kwargs)
        _check_size(result)
        return result

    def getattr(self, obj: Any, attribute: str) -> Any:
        check_time()
        return _watched(obj, attribute, super().getattr(obj, attribute))

    def getitem(self, obj: Any, argument: Any) -> Any:
        check_time()
        return _watched(obj, argument, super().getitem(obj, argument))


def _watched(obj: Any, name: Any, value: Any) -> Any:
    if obj is getattr(_local, "watched", None):
        _local.reads[name] = value
    return value


@contextmanager
def reads_of(watched: object) -> Iterator[dict[Any, Any]]:
    """What templates rendered in this block read of `watched`, by name, with the values."""
    previous = getattr(_local, "watched", None), getattr(_local, "reads", None)
    reads: dict[Any, Any] = {}
    _local.watched, _local.reads = watched, reads
    try:
        yield reads
    finally:
        _local.watched, _local.reads = previous
