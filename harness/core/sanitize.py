"""Text from outside (datasets, answers, labels) made safe for where it goes, one place per
destination: Unicode that encodes (`clean_text`), the terminal (`terminal_text`), spreadsheet
cells (`csv_cell`, `write_csv`), and JSON numbers (`finite_json`, `dumps_json`)."""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rich.markup import escape

# A lone surrogate (what JSON's "\ud800" decodes to) cannot be encoded as UTF-8.
_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def clean_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD, so it encodes as UTF-8."""
    return _SURROGATE.sub(REPLACEMENT, text)


def clean_value(value: Any) -> Any:
    """`value` (plain JSON data) with `clean_text` applied to every string and key in it."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_value(k): clean_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_value(v) for v in value]
    return value


# ------------------------------------------------------------------------------ the terminal
# C0 and C1 control characters (ESC starts colour, cursor and title sequences; BEL, BS, CR
# rewrite what was shown) except tab and newline, and the bidirectional overrides.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_text(value: object) -> str:
    """Data as a string safe to print on a rich console: control characters shown as escapes
    (`\\x1b`), lone surrogates replaced, rich markup (`[bold]`) escaped to print literally."""
    text = clean_text(str(value))
    text = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
    return escape(text)


# ---------------------------------------------------------------------------- CSV cells
# What a spreadsheet reads as the start of a formula (OWASP's list).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A CSV cell that a spreadsheet shows as text: a string that would start a formula gets a
    leading apostrophe; numbers (negative ones included) stay numbers."""
    if isinstance(value, str):
        value = clean_text(value)
        if value.startswith(_FORMULA_START) and not _is_number(value):
            return "'" + value
    return value


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def write_csv(path: Path, rows: Iterable[Mapping[str, object]]) -> None:
    """The one CSV writer: a header from the first row's keys, every cell (header included)
    through `csv_cell`; no file for no rows."""
    rows = list(rows)
    if not rows:
        return
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=[str(k) for k in rows[0]])
        writer.writerow({str(k): csv_cell(str(k)) for k in rows[0]})
        for row in rows:
            writer.writerow({str(k): csv_cell(v) for k, v in row.items()})


# ----------------------------------------------------------------------------- JSON numbers
def finite_json(value: Any) -> Any:
    """`value` with every NaN or infinite float replaced by None (strict readers refuse `NaN`)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(v) for v in value]
    return value


def dumps_json(value: Any, **options: Any) -> str:
    """The one JSON encoder of the files the harness writes: NaN and infinities become null."""
    return json.dumps(finite_json(value), allow_nan=False, **options)
