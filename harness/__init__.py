"""bgm-judge: an evaluation harness for music recommendation from conversation.

The Python API (documented in README.md, section "Python API"):

    import harness
    results = harness.run("experiments/quickstart.yaml", limit=5)   # one RunResult per run
    aggregate = harness.evaluate("data/sample", "my_model/predictions.jsonl")
    records = harness.load_run("results/quickstart/random_uniform_full_caption")  # DataFrame
    table = harness.report("results/quickstart").runs  # DataFrames of `harness report`
    steps = harness.compare(run_a, run_b, sequential=True).steps  # `harness compare`

These are the functions of `harness.runs.api` and `harness.runs.reporting` (the command line
calls them too), imported on first use (PEP 562), so that `import harness` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness._version import __version__

if TYPE_CHECKING:
    from harness.runs.api import evaluate, load_run, run
    from harness.runs.reporting import compare, report

__all__ = ["__version__", "compare", "evaluate", "load_run", "report", "run"]
_API = {
    "evaluate": "api",
    "load_run": "api",
    "run": "api",
    "compare": "reporting",
    "report": "reporting",
}  # function -> its module in harness.runs


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    from importlib import import_module

    function = getattr(import_module(f"harness.runs.{_API[name]}"), name)
    globals()[name] = function
    return function


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
