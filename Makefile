# `make serve`: serving dependencies only, then the service on 127.0.0.1:8000 with the shipped model.
# `make test`: dev extras, then ruff, mypy and the whole pytest suite (what .ci/run calls).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: serve test lint bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.serve-deps: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.dev-deps: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $@ $(VENV)/.serve-deps

serve: $(VENV)/.serve-deps
	$(BIN)/python -m service $(ARGS)

lint: $(VENV)/.dev-deps
	$(BIN)/ruff check .
	$(BIN)/mypy service

test: lint
	$(BIN)/pytest

bench: $(VENV)/.serve-deps
	$(BIN)/python benchmarks/bench_gateway.py $(ARGS)
