"""Under pytest-xdist with more than one worker, each worker's torch runs one thread
(tests/conftest.py), so the workers do not fight over the cores."""

from __future__ import annotations

import os

import pytest


@pytest.mark.skipif(
    int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) < 2, reason="not under pytest -n 2+"
)
def test_each_worker_runs_torch_on_one_thread() -> None:
    import torch

    assert os.environ["OMP_NUM_THREADS"] == "1"
    assert torch.get_num_threads() == 1
