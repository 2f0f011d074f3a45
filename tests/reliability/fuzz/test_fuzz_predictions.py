"""Fuzz of a predictions JSONL (`harness evaluate`, `harness report`): any lines read back as
predictions or as one HarnessError line naming the file and line. `repeat` is kept small here:
a huge one (D8) is issue 27's other half."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harness.core.dataset import load_dataset
from harness.core.predictions import read_predictions
from tests.conftest import write_tiny_dataset
from tests.reliability.fuzz._contract import SETTINGS, json_lines, within_contract

KEYS = ["item_id", "scores", "ranking", "repeat"]


def _valid() -> st.SearchStrategy[dict[str, Any]]:
    cands = st.sampled_from(["c0_0", "c0_1", "c0_2", "c0_3", "x"])
    return st.fixed_dictionaries(
        {"item_id": st.sampled_from(["d0", "d1", "zz"])},
        optional={
            "scores": st.dictionaries(cands, st.floats(allow_nan=True) | st.none()),
            "ranking": st.lists(cands, max_size=5),
            "repeat": st.integers(-2, 5),
        },
    )


def test_any_predictions_file_reads_back_or_is_one_line(tmp_path: Path) -> None:
    items = list(load_dataset(write_tiny_dataset(tmp_path / "data", 2), check_audio=False).items)
    path = tmp_path / "predictions.jsonl"

    @SETTINGS
    @given(lines=json_lines(KEYS, _valid), raw=st.binary(max_size=30))
    def check(lines: list[str], raw: bytes) -> None:
        for data in ("\n".join(lines).encode("utf-8", "surrogatepass") + b"\n", raw):
            path.write_bytes(data)
            got = within_contract(lambda: read_predictions(path, items))
            if not isinstance(got, dict):
                assert str(path) in str(got)

    check()
