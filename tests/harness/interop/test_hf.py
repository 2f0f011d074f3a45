"""Hugging Face datasets as datasets: a save_to_disk folder with an Audio column, Parquet files
and an `hf://` id (read from a prepared `datasets` cache: no network) run like the same data
as a dataset folder; the audio is written once, named by its content; the revision is kept."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.config.loading import load_experiments
from harness.config.sources import HFSource, folder_for, is_hf_source, parse_hub_id
from harness.core.errors import ConfigError, HarnessError
from harness.interop.hf import materialize

datasets = pytest.importorskip("datasets")
runner = CliRunner()
ROOT = Path(__file__).resolve().parents[3]
pytestmark = [
    pytest.mark.filterwarnings("ignore:Inheritance class Aiohttp:DeprecationWarning"),
    pytest.mark.usefixtures("api_keys", "offline_hub"),
]
COLUMNS = (
    "columns:\n"
    "  items: {split: items, id: thread, dialogue: turns, human_ranking: ranked}\n"
    "  clips: {split: clips, id: clip, audio: wav, caption: text}\n"
)
FOLDER_HASH_BEFORE_ISSUE_47 = "aa5181bec726"  # of hf://someone/tiny-bgm with no columns:


@pytest.fixture
def offline_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No request to the Hub; the `datasets` cache and the harness's data folder in tmp."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    monkeypatch.setenv("BGM_JUDGE_DATA", str(tmp_path / "data"))


def hf_tables(folder: Path) -> Any:
    """The dataset folder as two tables with other column names and an Audio column."""
    items = [json.loads(line) for line in (folder / "items.jsonl").read_text().splitlines()]
    clips = [json.loads(line) for line in (folder / "clips.jsonl").read_text().splitlines()]
    item_rows = {
        "thread": [i["id"] for i in items],
        "turns": [i["dialogue"] for i in items],
        "candidates": [i["candidates"] for i in items],
        "ranked": [i["human_ranking"] for i in items],
    }
    clip_rows = {
        "clip": [c["id"] for c in clips],
        "wav": [str(folder / c["audio"]) for c in clips],
        "text": [c["caption"] for c in clips],
    }
    clips_table = datasets.Dataset.from_dict(clip_rows).cast_column("wav", datasets.Audio())
    return datasets.DatasetDict(
        {"items": datasets.Dataset.from_dict(item_rows), "clips": clips_table}
    )


def run(tmp_path: Path, name: str, dataset: str, extra: str = "", *, cache: str = "") -> Path:
    experiment = tmp_path / f"{name}.yaml"
    experiment.write_text(
        f"name: {name}\ndataset: {dataset}\nn_bootstrap: 20\n{extra}"
        "provider: {name: gemini, model: gemini-2.5-flash, max_concurrency: 4}\n"
    )
    args = ["run", str(experiment), "--results-dir", str(tmp_path / "results"), "--no-progress"]
    result = runner.invoke(app, [*args, "--cache-dir", str(tmp_path / (cache or f"cache-{name}"))])
    assert result.exit_code == 0, result.output
    return tmp_path / "results" / name


def metrics(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / "metrics.json").read_text())["metrics"])


@pytest.mark.slow  # two runs through the fake API (~8 s)
def test_a_saved_dataset_with_audio_runs_like_the_dataset_folder(
    tmp_path: Path, tiny_dataset: Path, server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_BASE_URL", server.url)
    hf_tables(tiny_dataset).save_to_disk(str(tmp_path / "saved"))
    assert is_hf_source(tmp_path / "saved") and not is_hf_source(tiny_dataset)
    plain = run(tmp_path, "plain", str(tiny_dataset))
    from_hf = run(tmp_path, "hf", str(tmp_path / "saved"), COLUMNS)
    assert metrics(from_hf) == metrics(plain)
    assert metrics(plain)["ndcg"]["mean"] is not None
    config = (from_hf / "config.yaml").read_text()
    assert f"uri: {tmp_path / 'saved'}" in config
    folder = Path(load_experiments(from_hf / "config.yaml")[0].dataset)
    audio = [
        json.loads(line)["audio"] for line in (folder / "clips.jsonl").read_text().splitlines()
    ]
    names = [Path(a).name for a in audio]
    import hashlib

    originals = sorted(p.read_bytes() for p in (tiny_dataset / "audio").glob("*.wav"))
    assert sorted(n.removesuffix(".wav") for n in names) == sorted(
        hashlib.sha256(b).hexdigest() for b in originals
    )  # content-addressed, the bytes unchanged
    provenance = json.loads((from_hf / "run.json").read_text())["provenance"]
    assert provenance["dataset"]["uri"] == str(tmp_path / "saved")
    assert provenance["dataset"]["path"] == str((tmp_path / "saved").resolve())
    assert provenance["dataset"]["fingerprint"]


def test_parquet_files_and_titles_as_candidates(tmp_path: Path) -> None:
    rows = {
        "name": ["t1", "t2"],
        "query": ["songs for rain", "songs for sun"],
        "final_candidates": [["Blue", "Grey", "Rain"], ["Sun", "Blue"]],
        "limited_gt": [["Rain"], ["Sun"]],
    }
    path = tmp_path / "threads.parquet"
    datasets.Dataset.from_dict(rows).to_parquet(str(path))
    columns = {"items": {"id": "name", "candidates": "final_candidates", "relevant": "limited_gt"}}
    source = HFSource.model_validate({"uri": str(path), "columns": columns})
    folder = materialize(source)
    assert folder == folder_for(source) and folder.is_relative_to(tmp_path / "data")
    from harness.core.dataset import load_dataset

    data = load_dataset(folder)
    assert [len(i.candidates) for i in data.items] == [3, 2]
    blue = {c.id for c in data.clips.values() if c.title == "Blue"}
    assert len(blue) == 1 and blue <= set(data.items[1].candidates)  # one clip per title
    assert [data.clips[c].title for c in data.items[0].relevant or ()] == ["Rain"]
    again = materialize(source)
    assert again == folder


def prepare_hub_cache(configs: Any, cache: Path, repo: str, commit: str) -> None:
    """What `datasets` leaves in its cache after downloading `repo` at `commit`: the Arrow
    files of each configuration's train split under <owner>___<name>/<config>/0.0.0/<commit>/.
    Audio is embedded as bytes, as `push_to_hub` uploads it."""
    for config, table in configs.items():
        if "wav" in table.column_names:
            table = table.cast_column("wav", datasets.Audio(decode=False)).map(
                lambda row: {"wav": {"bytes": Path(row["wav"]["path"]).read_bytes(), "path": None}}
            )
        files = cache.parent / "hub-files" / config
        files.mkdir(parents=True)
        table.to_parquet(str(files / "train-00000-of-00001.parquet"))
        builder = datasets.load_dataset_builder(str(files), cache_dir=str(cache / "build"))
        builder.download_and_prepare()
        target = cache / repo.replace("/", "___") / config / "0.0.0" / commit
        shutil.copytree(builder.cache_dir, target)
        info = json.loads((target / "dataset_info.json").read_text())
        prefix, name = info["dataset_name"], repo.split("/")[1]
        info |= {"dataset_name": name, "config_name": config}
        (target / "dataset_info.json").write_text(json.dumps(info))
        for file in target.glob(f"{prefix}-*.arrow"):
            file.rename(target / file.name.replace(prefix, name, 1))
        shutil.rmtree(cache / "build")


def test_a_hub_id_with_a_revision_reads_the_datasets_cache(
    tmp_path: Path, tiny_dataset: Path
) -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    cache = Path(datasets.config.HF_DATASETS_CACHE)
    prepare_hub_cache(hf_tables(tiny_dataset), cache, "someone/tiny-bgm", commit)
    columns = COLUMNS.replace("split: items", "config: items").replace(
        "split: clips", "config: clips"
    )
    (config,) = load_experiments_text(
        tmp_path, f"dataset: hf://someone/tiny-bgm@{commit}\n" + columns
    )
    assert config.hf_source is not None and config.hf_source.uri.endswith(commit)
    folder = materialize(config.hf_source, config.dataset)
    source = json.loads((folder / "source.json").read_text())
    assert (source["repo"], source["revision"], source["commit"]) == (
        "someone/tiny-bgm",
        commit,
        commit,
    )
    from harness.core.dataset import load_dataset

    assert len(load_dataset(folder).items) == 3


def load_experiments_text(tmp_path: Path, text: str) -> list[Any]:
    path = tmp_path / "exp.yaml"
    path.write_text("name: x\nprovider: {name: random}\n" + text)
    return load_experiments(path)


def test_bad_mappings_and_ids_are_one_line(tmp_path: Path, tiny_dataset: Path) -> None:
    with pytest.raises(HarnessError, match="hf://OWNER/NAME"):
        parse_hub_id("hf://just-a-name")
    with pytest.raises(ConfigError, match="columns: maps the columns"):
        load_experiments_text(tmp_path, f"dataset: {tiny_dataset}\ncolumns: {{}}\n")
    hf_tables(tiny_dataset).save_to_disk(str(tmp_path / "saved"))
    (config,) = load_experiments_text(
        tmp_path, f"dataset: {tmp_path / 'saved'}\ncolumns: {{items: {{split: items}}}}\n"
    )
    with pytest.raises(HarnessError, match=r"columns.items.id: no column 'id' \(columns: thread"):
        materialize(config.hf_source, config.dataset)
    (config,) = load_experiments_text(
        tmp_path, f"dataset: {tmp_path / 'saved'}\ncolumns: {{items: {{split: test}}}}\n"
    )
    with pytest.raises(HarnessError, match="no split 'test' \\(splits: items, clips\\)"):
        materialize(config.hf_source, config.dataset)


def test_evaluate_reads_a_hugging_face_dataset_with_columns(
    tmp_path: Path, tiny_dataset: Path
) -> None:
    hf_tables(tiny_dataset).save_to_disk(str(tmp_path / "saved"))
    predictions = tmp_path / "p.jsonl"
    predictions.write_text(
        "".join(
            json.dumps({"item_id": f"d{i}", "ranking": [f"c{i}_0", f"c{i}_1"]}) + "\n"
            for i in range(3)
        )
    )
    columns = "{items: {split: items, id: thread, dialogue: turns, human_ranking: ranked}, " + (
        "clips: {split: clips, id: clip, audio: wav, caption: text}}"
    )
    outs = {}
    for name, dataset, extra in [
        ("hf", str(tmp_path / "saved"), ["--columns", columns]),
        ("plain", str(tiny_dataset), []),
    ]:
        out = tmp_path / f"{name}.json"
        args = ["evaluate", "--dataset", dataset, "--predictions", str(predictions), *extra]
        result = runner.invoke(app, [*args, "--out", str(out)])
        assert result.exit_code == 0, result.output
        outs[name] = json.loads(out.read_text())
    assert outs["hf"] == outs["plain"]
    assert outs["hf"]["metrics"]["hit@1"]["mean"] == 1.0
    bad = runner.invoke(
        app,
        [
            "evaluate",
            "--dataset",
            str(tmp_path / "saved"),
            "--predictions",
            str(predictions),
            "--columns",
            "{items: {idd: x}}",
        ],
    )
    assert (
        bad.exit_code == 2
        and "--columns: columns.items.idd: Extra inputs are not permitted" in bad.output
    )


def test_a_malformed_hub_id_names_the_experiment_file(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"exp\.yaml: .*hf://no-owner: a Hub dataset is hf://OWNER/NAME"
    ):
        load_experiments_text(tmp_path, "dataset: hf://no-owner\n")


def test_bad_rows_and_audio_name_the_row(tmp_path: Path) -> None:
    rows = {"id": ["a", "b"], "query": ["rain", "sun"], "candidates": [["x", "y"], ["x"]]}
    datasets.Dataset.from_dict(rows).to_parquet(str(tmp_path / "items.parquet"))
    source = HFSource.model_validate({"uri": str(tmp_path / "items.parquet")})
    with pytest.raises(
        HarnessError, match=r"items\.parquet: items row 1: candidates: .*at least 2"
    ):
        materialize(source)
    clips = {"id": ["x", "y"], "audio": [{"bytes": b"not audio", "path": "x.wav"}] * 2}
    table = datasets.DatasetDict(
        {
            "items": datasets.Dataset.from_dict({k: v[:1] for k, v in rows.items()}),
            "clips": datasets.Dataset.from_dict(clips),
        }
    )
    table.save_to_disk(str(tmp_path / "saved"))
    columns = {"items": {"split": "items"}, "clips": {"split": "clips"}}
    source = HFSource.model_validate({"uri": str(tmp_path / "saved"), "columns": columns})
    with pytest.raises(HarnessError, match=r"clips row 0 \(audio\): audio soundfile cannot read"):
        materialize(source)


def test_annotations_split_feedback_and_aspects_are_kept(tmp_path: Path) -> None:
    """Issue 47 #3: the fields beside the relevance (per-annotator rankings and their names,
    the item's split, its feedback, a clip's aspects) reach the dataset folder, read from the
    column of their own name or mapped from another; the human-ceiling row needs them."""
    items = {
        "id": ["d1", "d2"],
        "query": ["rain songs", "sun songs"],
        "candidates": [["a", "b", "c"], ["b", "c"]],
        "human_ranking": [["c", "a", "b"], ["b", "c"]],
        "votes": [[["c", "a", "b"], ["a", "c", "b"]], [["b", "c"], ["c", "b"]]],
        "annotators": [["ann1", "ann2"], ["ann1", "ann2"]],
        "split": ["test", "dev"],
        "feedback": ["too slow", "more drums"],
    }
    clips = {
        "id": ["a", "b", "c"],
        "caption": ["soft piano", "loud drums", "rainy guitar"],
        "tags": [["calm"], ["energetic", "drums"], []],
    }
    tables = {
        "items": datasets.Dataset.from_dict(items),
        "clips": datasets.Dataset.from_dict(clips),
    }
    datasets.DatasetDict(tables).save_to_disk(str(tmp_path / "saved"))
    columns = {
        "items": {"split": "items", "annotations": "votes"},
        "clips": {"split": "clips", "aspects": "tags"},
    }
    source = HFSource.model_validate({"uri": str(tmp_path / "saved"), "columns": columns})
    from harness.core.dataset import load_dataset

    data = load_dataset(materialize(source))
    first, second = data.items
    assert first.annotations == (("c", "a", "b"), ("a", "c", "b"))
    extra = first.model_extra or {}
    assert (extra["annotators"], extra["split"], extra["feedback"]) == (
        ["ann1", "ann2"],
        "test",
        "too slow",
    )
    assert (second.model_extra or {})["split"] == "dev"
    assert data.clips["b"].aspects == ("energetic", "drums")


def test_a_mapping_without_the_new_fields_keeps_its_folder() -> None:
    """Reading annotations, annotators, feedback and aspects did not move the folder of a
    mapping that names none of them (a re-run finds its data and its finished runs)."""
    source = HFSource.model_validate({"uri": "hf://someone/tiny-bgm", "columns": {}})
    assert folder_for(source).name == "someone_tiny-bgm-" + FOLDER_HASH_BEFORE_ISSUE_47


@pytest.mark.slow
@pytest.mark.skipif(
    not any((ROOT / "data" / "sample" / "audio").glob("*.wav")),
    reason="sample audio not built (make sample-audio)",
)
def test_the_documented_round_trip_runs_verbatim_after_the_quickstart(tmp_path: Path) -> None:
    """docs/interop.md's saved-dataset commands, as printed, in a checkout where the
    quickstart ran (its results folder holds runs of the same names on data/sample)."""
    page = (ROOT / "docs" / "interop.md").read_text(encoding="utf-8")
    section = page[page.index("A dataset folder from a saved dataset") : page.index("## TREC")]
    python_code, commands = (
        re.search(rf"```{language}\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
        for language in ("python", "bash")
    )
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sample").symlink_to(ROOT / "data" / "sample")
    (tmp_path / "experiments").symlink_to(ROOT / "experiments")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env |= {"BGM_JUDGE_CACHE": str(tmp_path / "cache"), "HF_HOME": str(tmp_path / "hf")}

    def shell(script: str) -> None:
        done = subprocess.run(
            ["bash", "-ec", script], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr

    shell("harness run experiments/quickstart.yaml --only 'random*' --no-progress")
    shell(f"python - <<'EOF'\n{python_code}EOF")
    shell(commands)
