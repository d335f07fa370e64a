# `make serve`: serving dependencies only, then `ranker serve` on 127.0.0.1:8000 with the shipped model.
# `make test`: dev extras, then ruff, mypy, the import contracts, the docs build and the whole pytest
# suite (what .ci/run calls).
# `make docs`: the documentation site (mkdocs, --strict) into site/.
# `make model`: a training recipe, stage by stage (RECIPE=recipes/<file>.toml; resumes where it stopped).
# `make report`: the benchmark report (CrossEncoder in PyTorch vs raw ONNX Runtime vs the service).
# `make loadtest`: the Locust suite, headless, against a running service (see below).
# `make loadtest-gate`: the service with the load tests' bank, the default mix at 8 users, the SLO gate.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: serve test lint docs bench model

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.serve-deps: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.dev-deps: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $@ $(VENV)/.serve-deps

# `auto`'s choice of runtime is kept in runs/cache, so a restart on this machine skips the trial.
serve: $(VENV)/.serve-deps
	RANKER_AUTO__CACHE_DIR=$${RANKER_AUTO__CACHE_DIR:-runs/cache} $(BIN)/ranker serve $(ARGS)

lint: $(VENV)/.dev-deps
	$(BIN)/ruff check .
	$(BIN)/mypy src/dialogue_ranker/serving
	$(BIN)/lint-imports

# The generated reference pages are checked against the code by the suite (tests/unit/test_docs.py);
# --strict fails on a broken link or a page missing from the navigation.
docs: $(VENV)/.dev-deps
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

# Two pytest workers (pytest-xdist), a test file to each at a time so that module fixtures are built
# once: 1,006 s -> 600 s on a 2-core Zen 3. Each worker keeps torch to one thread (OMP_NUM_THREADS=1):
# with two workers on two cores, torch's default thread per core doubles up and the waiting threads
# spin. TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 2
test: lint docs
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

bench: $(VENV)/.serve-deps
	$(BIN)/python benchmarks/bench_gateway.py $(ARGS)

# Writes benchmarks/results/report.md and report.png; ARGS=--triton adds the Triton rows,
# ARGS=--quick is a one-minute smoke run.
.PHONY: report
report: $(VENV)/.dev-deps
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/report.py $(ARGS)

# A recipe names its stages (data conversion, training, export, evaluation, the card), where each
# can run, and its data; each stage writes its output under runs/<recipe>/ and a rerun skips the
# finished ones. The default fits an hour on 2 CPU cores; the shipped model's recipe needs a GPU
# for two stages and says so (docs/guides/training.md).
RECIPE ?= recipes/dialogue-minilm-l6-cpu.toml
model: $(VENV)/.dev-deps
	HF_HUB_OFFLINE=1 $(BIN)/ranker recipe run $(RECIPE) $(ARGS)

# `make loadtest`: Locust, headless, against a service that is already running: start it first,
# with the load tests' bank, in another shell (`.venv/bin/python -m loadtests.bank`, then
# `make serve ARGS="--bank loadtest=runs/loadtest/bank/loadtest.jsonl"`), or set HOST. SHAPE is step,
# constant (needs RPS > 0) or none (plain USERS at SPAWN_RATE). Reports: $(LOADTEST_OUT)/loadtest_*.csv
# and report.html. Scenario weights, SLO limits and the rest:
# LOADTEST_ARGS="--weight-bank 0 --slo-p95-ms-socialbot 500" or the LOADTEST_* environment variables
# (see loadtests/locustfile.py).
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

# `make loadtest-gate`: the SLO gate in one command (benchmarks/loadtest_gate.py): starts the service
# with the load tests' bank (made from ../shared/data when missing), times each scenario alone, runs
# the default mix with USERS (8) users for GATE_RUN_TIME and applies the gate (the exit code). Results
# in benchmarks/results/loadtest_gate/ (summary.md), logs and the HTML report in runs/loadtest-gate/.
# Run it on a quiet machine; ARGS="--serve-arg=--ranking.logit-cache-entries=0" measures compute alone.
GATE_RUN_TIME ?= 90s
.PHONY: loadtest-gate
loadtest-gate: $(VENV)/.dev-deps
	HF_HUB_OFFLINE=1 $(BIN)/python -m benchmarks.loadtest_gate --users $(USERS) --run-time $(GATE_RUN_TIME) $(ARGS)
