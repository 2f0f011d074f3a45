"""Outputs for a paper: LaTeX tables (booktabs, best per column in bold, CIs), the model x
prompt pivot, figures as a vector PDF and the page's PNG with the chance level, `--pair-by`, and
p-values adjusted when many are reported."""

from __future__ import annotations

import base64
import csv
import io
import json
import math
import re
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from harness.cli.main import app
from harness.reports.analysis import analyse, chance_levels
from harness.reports.latex import escape
from harness.reports.plots import PAGE_DPI
from harness.scoring import registry
from harness.scoring.stats import adjust_p_values
from tests.conftest import load_runs, write_tiny_dataset
from tests.harness.reports._runs import pointwise_records, tiny_scores, write_run

runner = CliRunner()
N = 12


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture
def table7(tmp_path: Path) -> Path:
    """Two models x two prompts: "pro" is perfect with zero_shot and reversed with cot;
    "flash" is perfect with both, except one item of its cot run reversed."""
    dataset = write_tiny_dataset(tmp_path / "data", n_items=N, seconds=0.1)
    sweep = tmp_path / "results" / "t7"
    perfect, reverse = tiny_scores(N), tiny_scores(N, reverse=True)
    mixed = perfect | {"d0": reverse["d0"]}
    runs = [
        ("pro_zero", "gemini-2.5-pro", "zero_shot", perfect),
        ("pro_cot", "gemini-2.5-pro", "cot", reverse),
        ("flash_zero", "gemini-2.5-flash", "zero_shot", perfect),
        ("flash_cot", "gemini-2.5-flash", "cot", mixed),
    ]
    for name, model, prompt, scores in runs:
        provider = {"name": "gemini", "model": model}
        write_run(
            sweep / name, dataset, pointwise_records(scores), provider=provider, prompt=prompt
        )
    order = {"sweep": "t7", "runs": [name for name, *_ in runs]}  # as `harness run` leaves it
    (sweep / "sweep.json").write_text(json.dumps(order))
    return sweep


def test_latex_tables_bold_the_best_of_each_column(table7: Path) -> None:
    result = runner.invoke(app, ["report", str(table7)])
    assert result.exit_code == 0, result.output
    tex = (table7 / "comparison.tex").read_text()
    assert "\\toprule" in tex and "\\midrule" in tex and "\\bottomrule" in tex
    assert tex.count("{") == tex.count("}")
    rows = [line for line in tex.splitlines() if line.endswith("\\\\")]
    assert all(row.count("&") == 5 for row in rows)  # run, 4 metrics, coverage
    body = {row.split(" & ")[0]: row for row in rows[1:]}
    assert set(body) == {
        "gemini-2.5-pro $\\cdot$ zero\\_shot",
        "gemini-2.5-pro $\\cdot$ cot",
        "gemini-2.5-flash $\\cdot$ zero\\_shot",
        "gemini-2.5-flash $\\cdot$ cot",
    }
    assert (
        "\\textbf{1.000} {\\scriptsize [1.000, 1.000]}"
        in body["gemini-2.5-pro $\\cdot$ zero\\_shot"]
    )
    assert "\\textbf" not in body["gemini-2.5-pro $\\cdot$ cot"]  # worst everywhere
    assert "$-$1.000 {\\scriptsize [$-$1.000, $-$1.000]}" in body["gemini-2.5-pro $\\cdot$ cot"]

    pivot = (table7 / "pivot.tex").read_text()
    assert "\\multicolumn{4}{c}{zero\\_shot} & \\multicolumn{4}{c}{cot}" in pivot
    assert "\\cmidrule(lr){2-5} \\cmidrule(lr){6-9}" in pivot
    pivot_rows = [line for line in pivot.splitlines() if line.startswith("gemini")]
    assert [r.split(" & ")[0] for r in pivot_rows] == ["gemini-2.5-pro", "gemini-2.5-flash"]
    assert all(r.count("&") == 8 for r in pivot_rows)
    # cot Hit@1: flash (11/12) is the best of the column, pro (0) is not.
    assert pivot_rows[1].split(" & ")[5].startswith("\\textbf{0.917}")
    assert not pivot_rows[0].split(" & ")[5].startswith("\\textbf")
    cells = {(r["model"], r["prompt"]): r for r in _csv(table7 / "pivot.csv")}
    assert float(cells[("gemini-2.5-flash", "cot")]["hit@1_mean"]) == pytest.approx(11 / 12)
    assert "## Model x prompt" in (table7 / "comparison.md").read_text()


def test_latex_escapes_what_tex_would_read_as_markup() -> None:
    assert escape("a_b & 50% #1 {x} ~ ^ $ \\") == (
        "a\\_b \\& 50\\% \\#1 \\{x\\} \\textasciitilde{} \\textasciicircum{} \\$ \\textbackslash{}"
    )


def _pdf_text(pdf: bytes) -> str:
    """The PDF's drawing operators (its content streams, inflated)."""
    streams = re.findall(rb"stream\r?\n(.*?)\r?\nendstream", pdf, re.S)
    out = []
    for stream in streams:
        try:
            out.append(zlib.decompress(stream).decode("latin-1"))
        except zlib.error:
            continue
    return "\n".join(out)


def test_figures_as_a_vector_pdf_and_the_pages_png_with_the_chance_level(table7: Path) -> None:
    """Each figure drawn once for the page (PNG, the same bytes as in report.html) and once
    as a vector PDF for a paper; no SVG, no 300-dpi raster."""
    assert runner.invoke(app, ["report", str(table7)]).exit_code == 0
    html = (table7 / "report.html").read_text()
    for name in ("metrics", "agreement"):
        assert (table7 / f"{name}.pdf").read_bytes().startswith(b"%PDF")
        assert not (table7 / f"{name}.svg").exists()
        png = (table7 / f"{name}.png").read_bytes()
        assert base64.b64encode(png).decode() in html
        with Image.open(io.BytesIO(png)) as image:
            assert image.info["dpi"] == pytest.approx((PAGE_DPI, PAGE_DPI), abs=0.1)
            assert image.width <= 1500
    # the dashed chance line: its colour (#c0392b) as a stroke colour in the PDF
    assert "0.7529411765 0.2235294118 0.168627451 RG" in _pdf_text(
        (table7 / "metrics.pdf").read_bytes()
    )
    first = (table7 / "metrics.pdf").read_bytes()
    first_png = (table7 / "metrics.png").read_bytes()
    assert runner.invoke(app, ["report", str(table7)]).exit_code == 0
    assert (table7 / "metrics.pdf").read_bytes() == first  # no creation date: reproducible
    assert (table7 / "metrics.png").read_bytes() == first_png


@pytest.mark.parametrize("n_runs", [2, 20, 60])
def test_figures_of_many_runs_fit_the_page(n_runs: int) -> None:
    """The heatmap and the bars of 20 runs were 3528 x 3231 and 3934 x 2434 px files (and
    their page PNGs half that): the page shows them at most 1,400 px wide."""
    from harness.reports import plots
    from harness.scoring.metrics import MetricSummary
    from harness.scoring.stats import Agreement

    labels = [f"a long run label number {i}" for i in range(n_runs)]
    tau = np.random.default_rng(0).uniform(-1, 1, (n_runs + 1, n_runs + 1))
    heatmap = plots.agreement_heatmap(
        Agreement(["human", *labels], tau, np.ones(tau.shape, dtype=np.int64))
    )
    summary = MetricSummary(mean=0.5, ci95=(0.4, 0.6))
    bars = plots.metric_bars(
        [(label, dict.fromkeys(registry.names("ranking"), summary)) for label in labels]
    )
    for figure, widest in ((heatmap, 1000), (bars, 1500)):
        with Image.open(io.BytesIO(figure.page_png)) as image:
            assert image.width <= widest and image.height <= 1600, image.size
        assert figure.files["png"] == figure.page_png and set(figure.files) == {"png", "pdf"}


def test_chance_levels_are_a_random_rankings_expected_metrics(tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "data", n_items=2, seconds=0.1)
    run = write_run(tmp_path / "r", dataset, pointwise_records(tiny_scores(2)))
    chance = chance_levels(load_runs([run])[0].dataset.items)
    discount = [1 / math.log2(r + 1) for r in range(1, 5)]
    ideal = sum(g * d for g, d in zip([3, 2, 1, 0], discount, strict=True))
    assert chance["hit@1"] == pytest.approx(0.25)
    assert chance["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)
    assert chance["ndcg"] == pytest.approx(1.5 * sum(discount) / ideal)
    assert chance["kendall_tau_b"] == 0.0


def test_pair_by_compares_each_run_with_its_own_models_baseline(table7: Path) -> None:
    out = table7.parent / "paired"
    result = runner.invoke(
        app, ["report", str(table7), "--pair-by", "prompt=zero_shot", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    rows = _csv(out / "paired.csv")
    pairs = {(row["run"], row["baseline"]) for row in rows}
    assert pairs == {
        ("gemini-2.5-pro · cot", "gemini-2.5-pro · zero_shot"),
        ("gemini-2.5-flash · cot", "gemini-2.5-flash · zero_shot"),
    }
    hit = {row["run"]: row for row in rows if row["metric"] == "hit@1"}
    assert float(hit["gemini-2.5-pro · cot"]["difference"]) == -1.0
    assert float(hit["gemini-2.5-flash · cot"]["difference"]) == pytest.approx(-1 / 12, abs=1e-6)
    assert "each run against its own prompt=zero_shot run" in (out / "comparison.md").read_text()

    bad = runner.invoke(app, ["report", str(table7), "--pair-by", "temperature=0"])
    assert bad.exit_code == 2 and "FIELD one of prompt" in bad.stderr
    both = runner.invoke(
        app,
        ["report", str(table7), "--pair-by", "prompt=cot", "--baseline", str(table7 / "pro_cot")],
    )
    assert both.exit_code == 2 and "not both" in both.stderr


def test_a_run_without_a_baseline_is_named(table7: Path, tmp_path: Path) -> None:
    runs = load_runs([table7 / "pro_cot", table7 / "flash_cot", table7 / "flash_zero"])
    analysis = analyse(runs, pair=("prompt", "zero_shot"))
    assert list(analysis.paired) == ["gemini-2.5-flash · cot"]
    assert analysis.notes == [
        "gemini-2.5-pro · cot: no run with prompt=zero_shot and otherwise the same setup"
    ]


def test_many_p_values_are_adjusted(table7: Path) -> None:
    out = table7.parent / "paired"
    args = ["report", str(table7), "--baseline", str(table7 / "pro_cot"), "--out", str(out)]
    assert runner.invoke(app, args).exit_code == 0
    rows = _csv(out / "paired.csv")
    assert len(rows) == 12 and {row["correction"] for row in rows} == {"holm"}
    raw = [float(row["p_value"]) for row in rows]
    adjusted = [float(row["p_adjusted"]) for row in rows]
    assert adjusted == pytest.approx(list(adjust_p_values(raw, "holm")))
    assert all(a >= p for a, p in zip(adjusted, raw, strict=True))
    assert "Holm-adjusted over the 12 p-values" in (out / "comparison.md").read_text()
    assert runner.invoke(app, [*args, "--correction", "bh"]).exit_code == 0
    assert {row["correction"] for row in _csv(out / "paired.csv")} == {"bh"}
    bad = runner.invoke(app, [*args, "--correction", "bonferonni"])
    said = " ".join(bad.stderr.replace("│", " ").split())  # typer's box, unwrapped
    assert bad.exit_code == 2 and "'bonferonni' is not one of 'holm', 'bh', 'none'" in said


def test_html_report_names_the_pairing(table7: Path) -> None:
    args = ["report", str(table7), "--pair-by", "prompt=zero_shot"]
    assert runner.invoke(app, args).exit_code == 0
    html = (table7 / "report.html").read_text()
    assert re.search(
        r"<h2>Paired comparison: each run against its own prompt=zero_shot run</h2>", html
    )
    assert "p adj." in html


def test_figures_are_drawn_on_agg_canvases_without_pyplot() -> None:
    """The report's figures need no pyplot (its import, its figure registry): each is a
    Figure on its own Agg canvas, and nothing is left open."""
    import subprocess
    import sys

    script = """
import sys
import numpy as np
from harness.reports import plots
from harness.scoring.metrics import MetricSummary
from harness.scoring.stats import Agreement, PositionBias
summary = {n: MetricSummary(0.5, (0.4, 0.6)) for n in ("hit@1", "mrr", "ndcg", "kendall_tau_b")}
plots.metric_bars([("a", summary), ("b", summary)], dict.fromkeys(summary, 0.5))
tau = np.array([[1.0, 0.2], [0.2, 1.0]])
plots.agreement_heatmap(Agreement(["a", "b"], tau, np.ones((2, 2), dtype=np.int64)))
bias = PositionBias(10, np.array([0.5, 0.5]), np.array([0.5, 0.5]), 1.0)
plots.position_bars({"a": bias})
assert "matplotlib.pyplot" not in sys.modules, "pyplot imported"
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
