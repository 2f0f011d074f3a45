"""Fuzz of a run folder's config.yaml and run.json (issue 27: D6/D7 closed as a class): any
bytes read back as a checked mapping or as one HarnessError line naming the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from harness.core.run_files import read_or_empty, read_run_config, read_run_json
from tests.reliability.fuzz._contract import SETTINGS, json_values, within_contract

CONFIG_KEYS = ["name", "dataset", "limit", "repeats", "missing", "n_bootstrap", "seed",
               "prompt", "provider", "inputs", "metrics", "at", "merge_groups"]  # fmt: skip
STATS_KEYS = ["provenance", "endpoints", "cost", "usd", "batch", "calls", "errors"]

yaml_texts = st.one_of(
    st.dictionaries(st.sampled_from(CONFIG_KEYS), json_values(CONFIG_KEYS)).map(
        lambda d: yaml.safe_dump(d, allow_unicode=True)
    ),
    st.sampled_from(
        [
            "a: &a [x, x]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b, *b]\n",
            "p: &p {q: *p}\n",
            "- 1\n- 2\n",
            "[" * 300 + "]" * 300,
            "name: !!python/object/apply:os.system [ls]\n",
            "name: x\nname: y\n",
            "limit: " + "9" * 5000 + "\n",
        ]
    ),
    st.text(max_size=60),
)


def _check(path: Path, read: Any) -> None:
    got = within_contract(lambda: read(path))
    if isinstance(got, dict):
        return
    assert str(path) in str(got)


@SETTINGS
@given(text=yaml_texts, raw=st.binary(max_size=40))
def test_any_config_yaml_is_a_mapping_or_one_line(
    tmp_path_factory: Any, text: str, raw: bytes
) -> None:
    folder: Path = tmp_path_factory.mktemp("run")
    for data in (text.encode("utf-8", "surrogatepass"), raw):
        path = folder / "config.yaml"
        path.write_bytes(data)
        _check(path, read_run_config)
        assert isinstance(within_contract(lambda p=path: read_or_empty(p)), dict)


@SETTINGS
@given(value=json_values(STATS_KEYS), raw=st.binary(max_size=40))
def test_any_run_json_is_a_mapping_or_one_line(
    tmp_path_factory: Any, value: Any, raw: bytes
) -> None:
    import json

    folder: Path = tmp_path_factory.mktemp("run")
    for data in (json.dumps(value).encode(), raw, b"[" * 200_000):
        path = folder / "run.json"
        path.write_bytes(data)
        _check(path, read_run_json)
