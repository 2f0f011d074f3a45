# Set-up is two commands: `make experiment` and `make test`. Each creates .venv and installs
# exactly what requirements/lock.txt pins (every extra included) on first use; `make lock`
# rewrites the lock from pyproject.toml's ranges, `make test-latest` tries the newest releases.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXP ?= quickstart
UV_VERSION := 0.13.9
LOCK := requirements/lock.txt
NO_DEPS := requirements/no-deps.txt
# The CPU build of torch lies on these machines as a file; elsewhere set TORCH_WHEELS to a
# folder (or --find-links page) holding torch-2.13.0+cpu.
TORCH_WHEELS ?= /opt/wheels
UV_SOURCES := $(if $(wildcard $(TORCH_WHEELS)),--find-links $(TORCH_WHEELS))
LOCK_FLAGS := --all-extras --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	--generate-hashes --no-header -c requirements/constraints.txt $(UV_SOURCES)

# Let Python cache the bytecode of what it imports (.venv and the checkout's __pycache__):
# with PYTHONDONTWRITEBYTECODE set, as on these machines, every process (each subprocess of the
# tests) compiles its imports again. Compiling the whole venv at install instead
# (`uv pip sync --compile-bytecode`) compiles every module of the lock, most never imported.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: experiment docs test test-fast test-fuzz test-latest lint report bench sample-audio install install-dev \
	lock clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(BIN)/uv: | $(BIN)/python
	$(BIN)/pip install --quiet uv==$(UV_VERSION)

# One environment for running and developing: the lock names every package of every extra.
$(VENV)/.installed: $(LOCK) $(NO_DEPS) pyproject.toml | $(BIN)/uv
	$(BIN)/uv pip sync --quiet --python $(BIN)/python $(UV_SOURCES) $(LOCK) $(NO_DEPS)
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e .
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed

## Rewrite the lock from pyproject.toml's ranges, keeping the current pins where they still fit
## (UPGRADE=1: the newest versions the ranges allow); torch stays as constrained.
lock: | $(BIN)/uv
	$(BIN)/uv pip compile pyproject.toml $(LOCK_FLAGS) $(if $(UPGRADE),--upgrade) -o $(LOCK)
	$(BIN)/uv pip compile requirements/no-deps.in --no-deps --generate-hashes --no-header -o $(NO_DEPS)

sample-audio: install
	$(BIN)/python data/sample/build_audio.py
	$(BIN)/python data/sample/build_audio.py --dataset data/sample_fewshot

## Run experiments/$(EXP).yaml (default: the offline quickstart on the sample set); ARGS are
## passed on to harness run (ARGS=--dry-run).
experiment: sample-audio
	$(BIN)/harness run experiments/$(EXP).yaml $(ARGS)

## Regenerate the figure blocks of README.md and docs/ (<!-- generated: NAME -->) by running
## the documented commands on the sample set and the fake API; review the diff (a few minutes).
docs: sample-audio
	$(BIN)/python -m tests.support.doc_blocks

# pytest-xdist workers for make test (auto: one per core); a module's tests stay on one worker
# so that its fixtures (tiny models, fake servers) are built once.
WORKERS ?= auto

## Lint, type-check, check the import layers and run the whole offline test suite.
test: install sample-audio lint
	$(BIN)/pytest -n $(WORKERS) --dist loadfile

## The inner loop: the tests not marked slow (no lint, no subprocess-heavy suites).
test-fast: install sample-audio
	$(BIN)/pytest -m "not slow" -n $(WORKERS)

## Nightly: the fuzz suite (every file format the harness reads back) with ten times the
## examples of make test's, drawn afresh each run.
test-fuzz: install
	BGM_JUDGE_FUZZ=nightly $(BIN)/pytest tests/reliability/fuzz -n $(WORKERS) -q

## The newest releases pyproject.toml allows, in a separate venv: run before raising a range.
test-latest: | $(BIN)/uv
	rm -rf .venv-latest
	$(PYTHON) -m venv .venv-latest
	$(BIN)/uv pip install --quiet --python .venv-latest/bin/python $(UV_SOURCES) \
		-c requirements/constraints.txt -e '.[all,dev,bench]' --upgrade
	$(BIN)/uv pip install --quiet --python .venv-latest/bin/python --no-deps -r $(NO_DEPS)
	.venv-latest/bin/python data/sample/build_audio.py
	BGM_JUDGE_ENV=latest .venv-latest/bin/pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## Tables, plots and the HTML report (report.html) of the runs under results/$(EXP).
report: install
	$(BIN)/harness report results/$(EXP) --out results/$(EXP)

bench: install
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .venv-latest .cache results/* .mypy_cache .ruff_cache .pytest_cache
