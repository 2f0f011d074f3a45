"""`harness export parquet`: records and per-item metrics as typed tables, one row per
record (item) and run, read back by `harness.load_run` in the same schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import harness
from harness.cli.main import app
from harness.core.errors import HarnessError
from harness.core.records import read_records
from tests.conftest import run_pool as run
from tests.conftest import write_pool_dataset

pq = pytest.importorskip("pyarrow.parquet")
runner = CliRunner()


def test_records_and_items_tables_of_two_runs(tmp_path: Path) -> None:
    pool = write_pool_dataset(tmp_path / "pool", 5, 12)
    popular = run(tmp_path, pool, "popular", {"name": "popularity"})
    chance = run(tmp_path, pool, "chance", {"name": "random", "seed": 3})
    out = tmp_path / "parquet"
    result = runner.invoke(app, ["export", "parquet", str(popular.parent), "--out", str(out)])
    assert result.exit_code == 0, result.output
    records = pq.read_table(out / "records.parquet")
    scores = records.schema.field("scores").type
    assert (str(scores.key_type), str(scores.item_type)) == ("string", "double")
    assert str(records.schema.field("repeat").type) == "int32"
    assert records.num_rows == 2 * 5 * 2  # runs x items x repeats
    items = pq.read_table(out / "items.parquet")
    assert items.num_rows == 2 * 5
    assert {"ndcg", "mrr", "hit@5", "recall@5"} <= set(items.column_names)
    assert str(items.schema.field("ndcg").type) == "double"
    for folder in (popular, chance):
        metrics = json.loads((folder / "metrics.json").read_text())["metrics"]
        rows = [r for r in items.to_pylist() if r["run"] == folder.name]
        for name in ("ndcg", "mrr", "recall@5"):
            mean = sum(r[name] for r in rows) / len(rows)
            assert mean == pytest.approx(metrics[name]["mean"], abs=1e-6), (folder.name, name)
    assert {r["group"] for r in items.to_pylist()} == {"left", "right"}


def test_load_run_reads_the_records_table_in_the_same_schema(tmp_path: Path) -> None:
    pool = write_pool_dataset(tmp_path / "pool", 3, 10)
    folder = run(tmp_path, pool, "popular", {"name": "popularity"})
    out = tmp_path / "parquet"
    assert runner.invoke(app, ["export", "parquet", str(folder), "--out", str(out)]).exit_code == 0
    from_folder = harness.load_run(folder)
    from_parquet = harness.load_run(out / "records.parquet")
    assert list(from_folder.columns) == list(from_parquet.columns)
    assert list(from_folder.dtypes) == list(from_parquet.dtypes)
    assert from_folder.drop(columns="extra").equals(from_parquet.drop(columns="extra"))
    assert list(from_folder["extra"]) == list(from_parquet["extra"])
    records = list(read_records(folder / "records.jsonl"))
    assert list(from_parquet["scores"]) == [r.scores for r in records]


def test_a_file_that_is_not_a_records_table_is_one_line(tmp_path: Path) -> None:
    import pyarrow as pa

    pq.write_table(pa.table({"x": [1]}), tmp_path / "other.parquet")
    with pytest.raises(HarnessError, match="not a records table"):
        harness.load_run(tmp_path / "other.parquet")


@pytest.mark.parametrize("extra", ["{", "[1]", "[" * 5000 + "]" * 5000, '"\\ud800'])
def test_a_records_table_whose_extra_is_not_a_json_object_is_one_line(
    tmp_path: Path, extra: str
) -> None:
    from harness.core.records import Record
    from harness.interop.parquet import records_schema, records_table

    record = Record(item_id="d0", candidates=["a", "b"], scores={"a": 1.0, "b": 0.0})
    table = records_table([record], "run")
    table = table.set_column(records_schema().get_field_index("extra"), "extra", [[extra]])
    pq.write_table(table, tmp_path / "records.parquet")
    with pytest.raises(HarnessError) as refused:
        harness.load_run(tmp_path / "records.parquet")
    assert "records.parquet" in str(refused.value) and "row 0" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_runs_whose_folders_share_a_name_keep_their_own_rows(tmp_path: Path) -> None:
    pool = write_pool_dataset(tmp_path / "pool", 3, 10)
    first = run(tmp_path / "a", pool, "same", {"name": "popularity"})
    second = run(tmp_path / "b", pool, "same", {"name": "random", "seed": 3})
    out = tmp_path / "parquet"
    result = runner.invoke(app, ["export", "parquet", str(first), str(second), "--out", str(out)])
    assert result.exit_code == 0, result.output
    for name in ("records.parquet", "items.parquet"):
        rows = pq.read_table(out / name).to_pylist()
        names = sorted({row["run"] for row in rows})
        assert len(names) == 2, names
        assert sum(row["run"] == names[0] for row in rows) == len(rows) // 2


def test_every_row_names_its_sweep(tmp_path: Path) -> None:
    """Issue 47 #5: two sweeps exported together (`results/quickstart results/quick5`) had no
    sweep column to group by; an export written before it reads back with a null sweep."""
    from harness.core.records import Record
    from harness.interop.parquet import records_table

    pool = write_pool_dataset(tmp_path / "pool", 3, 10)
    folder = run(tmp_path, pool, "popular", {"name": "popularity"})
    out = tmp_path / "parquet"
    result = runner.invoke(app, ["export", "parquet", str(folder.parent), "--out", str(out)])
    assert result.exit_code == 0, result.output
    for table in ("items", "records"):
        assert {r["sweep"] for r in pq.read_table(out / f"{table}.parquet").to_pylist()} == {"pool"}
    assert set(harness.load_run(folder)["sweep"]) == {"pool"}
    record = Record(item_id="d0", candidates=["a", "b"], scores={"a": 1.0, "b": 0.0})
    pq.write_table(records_table([record], "run").drop_columns(["sweep"]), out / "old.parquet")
    assert harness.load_run(out / "old.parquet")["sweep"].isna().all()
