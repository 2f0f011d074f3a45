# Set-up is two commands: `make experiment` and `make test`. Each creates .venv and
# installs what it needs on first use (torch pinned to the CPU build these machines carry).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXP ?= quickstart
TORCH ?= torch==2.13.0
# Modules are compiled when first imported, not all at install (halves a cold install).
PIP := $(BIN)/pip install --quiet --no-compile

.PHONY: experiment test lint report bench sample-audio install install-dev clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-run: pyproject.toml | $(BIN)/python
	$(PIP) $(TORCH)
	$(PIP) -e '.[all]'
	$(PIP) --no-deps musicnn==0.1.0
	$(PIP) --no-deps msclap==1.3.4 torchlibrosa==0.1.0
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(VENV)/.installed-run
	$(PIP) -e '.[dev,bench]'
	touch $@

install: $(VENV)/.installed-run
install-dev: $(VENV)/.installed-dev

sample-audio: install
	$(BIN)/python data/sample/build_audio.py
	$(BIN)/python data/sample/build_audio.py --dataset data/sample_fewshot

## Run experiments/$(EXP).yaml (default: the offline quickstart on the sample set).
experiment: sample-audio
	$(BIN)/harness run experiments/$(EXP).yaml

## Lint, type-check, check the import layers and run the offline test suite.
test: install-dev sample-audio
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pytest

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## Tables, plots and the HTML report (report.html) of the runs under results/$(EXP).
report: install
	$(BIN)/harness report results/$(EXP) --out results/$(EXP)

bench: install-dev
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .cache results/* .mypy_cache .ruff_cache .pytest_cache
