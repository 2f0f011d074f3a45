"""What `harness evaluate` is given besides predictions: a dataset folder or a Hugging Face
dataset (written as one), or TREC qrels whose items take their candidates from the run."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from harness.config.sources import HFSource, is_hf_source, parse_hub_id
from harness.core.dataset import Item, pydantic_reason
from harness.core.errors import HarnessError
from harness.core.trec import is_trec_run, items_from_qrels, read_candidates, read_qrels
from harness.interop.hf import materialize


def dataset_folder(dataset: str, columns: str | None, rows: str | None = None) -> Path:
    """The dataset folder, a Hugging Face dataset written as one first (`rows`: as the rows
    of a protocol's own dataset form, `harness.interop.hf.materialize`)."""
    if not is_hf_source(dataset):
        if columns is not None:
            raise HarnessError("--columns maps the columns of a Hugging Face dataset")
        return Path(dataset)
    if dataset.startswith("hf://"):
        parse_hub_id(dataset)
    from harness.core.yaml_files import parse_yaml  # here: only --columns is YAML

    mapping = parse_yaml(columns or "{}", "--columns") or {}
    try:
        source = HFSource.model_validate({"uri": dataset, "columns": mapping})
    except ValidationError as exc:
        raise HarnessError(f"--columns: {pydantic_reason(exc)}") from None
    return materialize(source, rows=rows)


def qrels_items(qrels: Path, run: Path) -> list[Item]:
    """Items from qrels, with the documents each query's run ranks as its candidates."""
    if not is_trec_run(run):
        raise HarnessError(f"--qrels goes with a TREC run file; {run} is not one")
    listed = read_candidates(run)
    short = [qid for qid, docs in listed.items() if len(docs) < 2]
    if short:
        raise HarnessError(f"{run}: queries ranking fewer than 2 documents: {short[:5]}")
    rows, _, _ = items_from_qrels(read_qrels(qrels), listed)
    try:
        return [Item.model_validate(row) for row in rows]
    except ValidationError as exc:
        raise HarnessError(f"{run}: {pydantic_reason(exc)}") from None
