"""`harness export trec`: a run as TREC run file(s) and the qrels of its dataset."""

from __future__ import annotations

import re
from pathlib import Path

from harness.core.errors import HarnessError
from harness.core.predictions import predictions_from_records
from harness.core.trec import check_ids, qrels_lines, run_lines
from harness.reports.loading import RunData

RUN_FILE = "run.trec"
QRELS_FILE = "qrels.txt"

CAVEAT = """\
# TREC files of {label}

`{run_files}` (one per repeat) and `{qrels}` from `harness export trec`.

- Order: score descending; equal scores in the item's candidate order (first listed first);
  candidates without a score last. SCORE is N - RANK + 1, so that no two documents of a query
  share a score and every tool (trec_eval, pytrec_eval, ranx, ir-measures) reads this order.
- The harness's metrics are tie-aware: for tied scores they are the expectation over every
  order of the tied candidates; these files hold one of those orders. Only a tie between
  candidates of different gain, anywhere in the ranking, can move a figure (tie rate in the
  ranking, `tie_rate_ranking` of metrics.json: {ranking}; at the top alone, `tie_rate`:
  {tie_rate}).
- Same figures (where that rate is 0, at any gains): the harness's `ndcg`, `ndcg@K`,
  `recall@K` and `precision@K` are trec_eval's ndcg, ndcg_cut_K, recall_K and P_K: both take
  the gains as given and count a candidate of gain above 0 as relevant.
- Graded gains (a `human_ranking`, or `relevance` of several levels) give other figures for
  `hit@1` (P_1), `mrr` (recip_rank) and `hit@K` (success_K): the harness looks for a best
  candidate (of the item's highest gain: the human's first choice), trec_eval for any of gain
  above 0. With one gain level (a `relevant` list) they agree too. Kendall's tau-b has no
  trec_eval measure.
- The qrels list every candidate of an item with its gain (0 for the others), so that an item
  without relevant candidates is a query scoring 0, as in the harness's means.
"""


OWN_CAVEAT = """\
# TREC files of {label}

`run.trec` and `qrels.txt` of a `protocol: {protocol}` folder (docs/protocols/music_crs.md): a
query per asked turn, its tracks in the submission's order with SCORE = N - RANK + 1; the qrels
hold each turn's gold. `trec_eval -c`'s mean is the plain mean over turns, not over turn numbers.
"""


def export_own_trec(folder: Path, out: Path, dataset: Path | None = None) -> list[Path] | None:
    """The TREC files of a run or evaluation folder of a protocol with an export of its own
    (`harness.config.protocols`: music-crs), its dataset `dataset` or its config's; None for
    any other folder."""
    from harness.config.protocols import own_blocks, own_options, protocol_of, resolve
    from harness.core.run_files import read_run_config

    if not (folder / "config.yaml").is_file():
        return None
    config = own_blocks(read_run_config(folder / "config.yaml"))
    protocol = protocol_of(config)
    if protocol.trec is None:
        return None
    try:
        options = own_options(protocol.name, config.get("protocol_options") or {})
    except ValueError as exc:
        raise HarnessError(f"{folder / 'config.yaml'}: {exc}") from None
    source = dataset or (Path(config["dataset"]) if config.get("dataset") else None)
    tag = re.sub(r"\s+", "_", folder.name) or "harness"
    run_lines, qrels_lines = resolve(protocol.trec)(options, source, tag)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / RUN_FILE]
    written[0].write_text("".join(run_lines), encoding="utf-8")
    if qrels_lines:
        written.append(out / QRELS_FILE)
        written[1].write_text("".join(qrels_lines), encoding="utf-8")
    readme = out / "README.md"
    text = OWN_CAVEAT.format(label=folder.name, protocol=protocol.name)
    readme.write_text(text, encoding="utf-8")
    return [*written, readme]


def export_trec(run: RunData, out: Path) -> list[Path]:
    """Write the run file(s), qrels.txt and README.md to `out`; the files written."""
    items = run.dataset.items
    check_ids(items)
    out.mkdir(parents=True, exist_ok=True)
    predictions = predictions_from_records(run.records)
    tag = re.sub(r"\s+", "_", run.label) or "harness"
    written = []
    for repeat in sorted(predictions):
        name = RUN_FILE if len(predictions) == 1 else f"run.repeat-{repeat}.trec"
        path = out / name
        path.write_text("".join(run_lines(items, predictions[repeat], tag)), encoding="utf-8")
        written.append(path)
    qrels = out / QRELS_FILE
    qrels.write_text("".join(qrels_lines(items)), encoding="utf-8")
    rates = {"tie_rate": run.aggregate.tie_rate, "ranking": run.aggregate.tie_rate_ranking}
    shown = {key: "n/a" if rate is None else f"{rate:.4f}" for key, rate in rates.items()}
    files = ", ".join(p.name for p in written)
    readme = out / "README.md"
    text = CAVEAT.format(label=run.label, run_files=files, qrels=QRELS_FILE, **shown)
    readme.write_text(text, encoding="utf-8")
    return [*written, qrels, readme]
