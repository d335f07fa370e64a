# `make serve`: serving dependencies only, then the service on 127.0.0.1:8000 with the shipped model.
# `make test`: dev extras, then ruff, mypy and the whole pytest suite (what .ci/run calls).
# `make model`: retrain on SUGAR, re-export the shipped model directory, evaluate on the test split.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: serve test lint bench model

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

SUGAR ?= ../shared/data/sugar/sugar.jsonl
RUN ?= runs/sugar
MODEL_DIR ?= models/sugar-minilm-l6

model: $(VENV)/.dev-deps
	HF_HUB_OFFLINE=1 $(BIN)/python -m training.train --data $(SUGAR) --out $(RUN)
	HF_HUB_OFFLINE=1 $(BIN)/python -m export --run $(RUN) --out $(MODEL_DIR)
	$(BIN)/python -m training.evaluate --model $(MODEL_DIR) --data $(SUGAR) \
		--split test --record
