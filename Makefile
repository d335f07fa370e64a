# `make serve`: serving dependencies only, then the service on 127.0.0.1:8000 with the shipped model.
# `make test`: dev extras, then ruff, mypy and the whole pytest suite (what .ci/run calls).
# `make model`: retrain on SUGAR, re-export the shipped model directory, evaluate on the test split.
# `make report`: the benchmark report (CrossEncoder in PyTorch vs raw ONNX Runtime vs the service).
# `make loadtest`: the Locust suite, headless, against a running service (see below).
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

# Writes benchmarks/results/report.md and report.png; ARGS=--triton adds the Triton rows,
# ARGS=--quick is a one-minute smoke run.
.PHONY: report
report: $(VENV)/.dev-deps
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/report.py $(ARGS)

SUGAR ?= ../shared/data/sugar/sugar.jsonl
RUN ?= runs/sugar
MODEL_DIR ?= models/sugar-minilm-l6

model: $(VENV)/.dev-deps
	HF_HUB_OFFLINE=1 $(BIN)/python -m training.train --data $(SUGAR) --out $(RUN)
	HF_HUB_OFFLINE=1 $(BIN)/python -m export --run $(RUN) --out $(MODEL_DIR)
	$(BIN)/python -m training.evaluate --model $(MODEL_DIR) --data $(SUGAR) \
		--split test --record

# `make loadtest`: Locust, headless, against a service that is already running: start it first
# with `make serve` in another shell (or set HOST). SHAPE is step, constant (needs RPS > 0) or
# none (plain USERS at SPAWN_RATE). Reports: $(LOADTEST_OUT)/loadtest_*.csv and report.html.
# Scenario weights, SLO limits and the rest: LOADTEST_ARGS="--weight-large-pool 0 --slo-p95-ms 500"
# or the LOADTEST_* environment variables (see loadtests/locustfile.py).
HOST ?= http://127.0.0.1:8000
USERS ?= 8
SPAWN_RATE ?= 2
RUN_TIME ?= 2m
SHAPE ?= step
RPS ?=
LOADTEST_OUT ?= runs/loadtest
LOADTEST_ARGS ?=
comma := ,
LOCUSTFILES := loadtests/locustfile.py$(if $(filter-out none,$(SHAPE)),$(comma)loadtests/shapes/$(SHAPE).py)

.PHONY: loadtest
loadtest: $(VENV)/.dev-deps
	mkdir -p $(LOADTEST_OUT)
	$(BIN)/locust -f $(LOCUSTFILES) --headless --host $(HOST) --users $(USERS) \
		--spawn-rate $(SPAWN_RATE) --run-time $(RUN_TIME) $(if $(RPS),--target-rps $(RPS)) \
		--csv $(LOADTEST_OUT)/loadtest --csv-full-history --html $(LOADTEST_OUT)/report.html \
		$(LOADTEST_ARGS)
