"""Runs as typed Parquet tables (`harness export parquet`), and back (`harness.load_run`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.core.errors import HarnessError, first_line
from harness.core.files import parse_json, read_parquet
from harness.core.records import Record

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from harness.reports.loading import RunData

RECORDS_FILE = "records.parquet"
ITEMS_FILE = "items.parquet"


def _pa() -> Any:
    try:
        import pyarrow
    except ImportError:
        raise HarnessError(
            "Parquet needs the parquet extra: pip install 'bgm-judge[parquet]'"
        ) from None
    return pyarrow


def records_schema() -> pa.Schema:
    pa = _pa()
    return pa.schema(
        [
            ("run", pa.string()),
            ("sweep", pa.string()),
            ("item_id", pa.string()),
            ("repeat", pa.int32()),
            ("candidates", pa.list_(pa.string())),
            ("raw", pa.string()),
            ("attempts", pa.list_(pa.string())),
            ("scores", pa.map_(pa.string(), pa.float64())),
            ("error", pa.string()),
            ("parse_error", pa.string()),
            ("cache_hit", pa.bool_()),
            ("latency_s", pa.float64()),
            ("input_tokens", pa.int64()),
            ("output_tokens", pa.int64()),
            ("extra", pa.string()),
        ]
    )


def records_table(records: Iterable[Record], run: str, sweep: str | None = None) -> pa.Table:
    rows = []
    for record in records:
        row = record.model_dump(exclude={"extra"})
        for key in record.model_extra or {}:
            row.pop(key, None)
        extra = {**record.extra, **(record.model_extra or {})}
        row["scores"] = list(record.scores.items())
        extra_text = json.dumps(extra, sort_keys=True)
        rows.append({"run": run, "sweep": sweep, **row, "extra": extra_text})
    return _pa().Table.from_pylist(rows, schema=records_schema())


def records_frame(table: pa.Table, path: Path | str = RECORDS_FILE) -> pd.DataFrame:
    """The frame `harness.load_run` returns: `scores` and `extra` as dicts again."""
    frame: pd.DataFrame = table.to_pandas(maps_as_pydicts="strict")
    frame["extra"] = [_extra(text, path, row) for row, text in enumerate(frame["extra"])]
    frame["candidates"] = [list(c) for c in frame["candidates"]]
    frame["attempts"] = [list(a) for a in frame["attempts"]]
    return frame


def _extra(text: str | None, path: Path | str, row: int) -> Any:
    if not text:
        return {}
    try:
        value = parse_json(text, path)
    except HarnessError as exc:
        raise HarnessError(f"{path}: row {row}: extra: {getattr(exc, 'reason', exc)}") from None
    if not isinstance(value, dict):
        raise HarnessError(f"{path}: row {row}: extra: not a JSON object")
    return value


def run_names(runs: Sequence[RunData]) -> list[str]:
    """Each run's folder name, with as many parent folders as tell runs of one name apart."""
    parts = [run.path.resolve().parts for run in runs]
    names = [run.path.name for run in runs]
    depth = 1
    while len(set(names)) < len(names) and depth < max(len(p) for p in parts):
        depth += 1
        names = [
            "/".join(p[-depth:]) if names.count(name) > 1 else name
            for p, name in zip(parts, names, strict=True)
        ]
    return names


def items_table(runs: Sequence[RunData], run_labels: Sequence[str]) -> pa.Table:
    pa = _pa()
    names: list[str] = []
    for run in runs:
        names += [n for n in run.aggregate.per_item if n not in names]
    types = {"run": pa.string(), "sweep": pa.string(), "item_id": pa.string()}
    types |= {"group": pa.string(), "n_candidates": pa.int32(), "n_relevant": pa.int32()}
    columns: dict[str, list[Any]] = {k: [] for k in types}
    values: dict[str, list[float | None]] = {name: [] for name in names}
    for run, run_name in zip(runs, run_labels, strict=True):
        position = {item_id: i for i, item_id in enumerate(run.aggregate.item_ids)}
        for item in run.dataset.items:
            if item.id not in position:
                continue
            columns["run"].append(run_name)
            columns["sweep"].append(run.config.get("sweep"))
            columns["item_id"].append(item.id)
            columns["group"].append(item.group)
            columns["n_candidates"].append(len(item.candidates))
            relevant = None if item.relevance_form is None else int(np.count_nonzero(item.gains))
            columns["n_relevant"].append(relevant)
            for name in names:
                per_item = run.aggregate.per_item.get(name)
                value = None if per_item is None else float(per_item[position[item.id]])
                values[name].append(None if value is None or np.isnan(value) else value)
    fields = [*types.items(), *((name, pa.float64()) for name in names)]
    return pa.Table.from_pydict({**columns, **values}, schema=pa.schema(fields))


def write_parquet(runs: Sequence[RunData], out: Path) -> list[Path]:
    """records.parquet and items.parquet of `runs` in `out`; the files written."""
    pa = _pa()
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    names = run_names(runs)
    tables = [
        records_table(run.records, name, run.config.get("sweep"))
        for run, name in zip(runs, names, strict=True)
    ]
    written = [out / RECORDS_FILE, out / ITEMS_FILE]
    pq.write_table(pa.concat_tables(tables), written[0])
    pq.write_table(items_table(runs, names), written[1])
    return written


def read_records_parquet(path: Path) -> pd.DataFrame:
    schema = records_schema()
    table = read_parquet(path)
    if "sweep" not in table.column_names:  # exported before the column was written
        table = table.append_column("sweep", _pa().nulls(table.num_rows, _pa().string()))
    missing = [n for n in schema.names if n not in table.column_names]
    if missing:
        raise HarnessError(
            f"{path}: not a records table of `harness export parquet` (no {missing})"
        )
    try:
        return records_frame(table.select(schema.names).cast(schema), path)
    except (ValueError, TypeError, NotImplementedError, MemoryError, _pa().ArrowException) as exc:
        first = first_line(exc)
        raise HarnessError(
            f"{path}: not a records table of `harness export parquet` ({first})"
        ) from None
