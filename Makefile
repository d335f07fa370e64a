# `make serve`: serving dependencies only, then the service on 127.0.0.1:8000 with the shipped model.
# `make test`: dev extras, then ruff, mypy and the whole pytest suite (what .ci/run calls).
# `make model`: convert the shared data, train on the mix, export the shipped model directory, evaluate.
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

SHARED ?= ../shared/data
DATA ?= runs/data
TUNED ?= runs/ranker-tuned
RUN ?= runs/ranker
MODEL_DIR ?= models/dialogue-minilm-l6
# Training mixes (FILE:WEIGHT = passes over its train lists per epoch): see README "Training".
# Stage 1: same-conversation negatives; stage 2, from stage 1: on-topic statements (wiki lead
# sentences), other conversations' turns and SUGAR lists with a distractor statement said as a
# wrong reply, 300 steps at a lower learning rate, in bf16 where the CPU or GPU has native bf16
# (--precision auto; fp32 elsewhere, about twice the time). Stage 1 stays fp32: the shipped
# model's first stage was trained so, and `make model` rebuilds the shipped bundle.
MIX ?= --data $(DATA)/sugar.jsonl:2 --data $(DATA)/topical-chat.jsonl:0.08
MIX2 ?= --data $(DATA)/sugar.jsonl:2 --data $(DATA)/topical-chat-entity-fact.jsonl:0.04 \
	--data $(DATA)/topical-chat-fact-only.jsonl:0.04 --data $(DATA)/sugar-statement.jsonl:1 \
	--seed 14 --lr 2e-5 --max-steps 300 --precision auto
# The open-domain branch: a stage 1 on two passes over the Topical-Chat train lists (25 times the
# first mix's share, 7,927 steps: about 6 minutes on an H200, hours on 2 CPU cores), then the same
# stage 2. The even soup of the two branches' stage-2 runs (README "Training": the open-domain run
# alone loses DailyDialog++'s adversarial replies and the customer-service requests; the soup keeps
# most of both) is where the shipped ranker's distillation starts (DISTILL, below).
OPEN_TUNED ?= runs/ranker-open-tuned
OPEN_RUN ?= runs/ranker-open
SOUP ?= runs/ranker-soup
OPEN_MIX ?= --data $(DATA)/sugar.jsonl:2 --data $(DATA)/topical-chat.jsonl:2 --precision auto
SOUP_ARGS ?= --with $(RUN):0.5 --alpha 1 --alphas 1
# The shipped ranker (models 2.7.0 and 2.8.0) is the soup trained further toward the two branches'
# output ensemble (their logits at 0.5 each, per view) beside the labels (training.train --teacher; README
# "Training", "Distilling the output ensemble"): 461 steps of 16 lists, the schedule planned for
# the mix's 527 (a lent H200's time ended it there; --stop-at replays it). DISTILL=no exports the
# soup itself, as model 2.6.0 did (without the reply's prior, which was chosen for the student).
DISTILL ?= yes
STUDENT ?= runs/ranker-distilled
DISTILL_ARGS ?= --teacher $(OPEN_RUN):0.5 --teacher $(RUN):0.5 --distill-weight 0.7
DISTILL_MIX ?= --data $(DATA)/sugar.jsonl:1 --data $(DATA)/sugar-statement.jsonl:0.5 \
	--data $(DATA)/topical-chat.jsonl:0.05 --data $(DATA)/topical-chat-entity-fact.jsonl:0.05 \
	--data $(DATA)/topical-chat-fact-only.jsonl:0.025 --data $(DATA)/topical-chat-distill.jsonl:0.1 \
	--batch-lists 16 --lr 4e-5 --seed 14 --precision auto --dev-lists 100 --stop-at 461
ifeq ($(DISTILL),yes)
BUNDLE_RUN := $(STUDENT)
# The student scored 100 dev lists a file (the lease's time); the export checks and calibrates on 400.
BUNDLE_EXPORT_ARGS := --dev-lists 400
define DISTILL_STEP
	HF_HUB_OFFLINE=1 $(BIN)/python -m training.train --init $(SOUP) $(DISTILL_ARGS) $(DISTILL_MIX) --out $(STUDENT)
endef
else
BUNDLE_RUN := $(SOUP)
BUNDLE_EXPORT_ARGS :=
DISTILL_STEP :=
PRIOR_WEIGHT ?= 0
endif
# ENSEMBLE_SHARE=0.4 (not shipped): export the two runs' output ensemble instead of their soup, each
# logit (1 - share) x the open-domain run's + share x the first branch's, two encoders in one graph
# (README "Training": DailyDialog++ 0.802 against adversarial replies and 17 hand-made requests, at
# 0.40x the soup's speed, under the 3x-the-CrossEncoder target). Blockwise int8 only beside fp32:
# two encoders double the export's time for each graph measured.
ENSEMBLE_SHARE ?=
ifeq ($(ENSEMBLE_SHARE),)
define BUNDLE_STEPS
	HF_HUB_OFFLINE=1 $(BIN)/python -m training.interpolate --run $(OPEN_RUN) $(SOUP_ARGS) --out $(SOUP)
	$(DISTILL_STEP)
	HF_HUB_OFFLINE=1 $(BIN)/python -m export --run $(BUNDLE_RUN) --out $(MODEL_DIR) --threshold-on $(THRESHOLD_ON) \
		--calibrate-on $(CALIBRATE_ON) --last-turn-weight $(LAST_TURN_WEIGHT) --prior-weight $(PRIOR_WEIGHT) \
		$(BUNDLE_EXPORT_ARGS) $(EXPORT_ARGS)
endef
else
define BUNDLE_STEPS
	HF_HUB_OFFLINE=1 $(BIN)/python -m export --run $(OPEN_RUN) --ensemble-with $(RUN):$(ENSEMBLE_SHARE) \
		--out $(MODEL_DIR) --threshold-on $(THRESHOLD_ON) --calibrate-on $(CALIBRATE_ON) \
		--last-turn-weight $(LAST_TURN_WEIGHT) --variants int8_blockwise --version 2.7.0-ensemble $(EXPORT_ARGS)
endef
endif
# OPEN=recover, on a machine without a GPU: instead of training the open-domain stages, take that
# run from models 2.5.0 / 2.6.0's graphs (the even soup of it and the first branch, quantized two
# ways) and the first branch trained here (training.recover; README "Where it runs"). The soup of
# the two is then the point of each shipped weight's quantization cell nearest the first branch's.
OPEN ?= train
SOUP_BUNDLE ?= build/soup-2.6.0
SOUP_COMMIT ?= 8308a93
SOUP_COMMIT_DYNAMIC ?= 77d7c2c
ifeq ($(OPEN),recover)
define OPEN_STEPS
	mkdir -p $(SOUP_BUNDLE)
	for f in model.onnx metadata.json tokenizer.json; do \
		git show $(SOUP_COMMIT):models/dialogue-minilm-l6/$$f > $(SOUP_BUNDLE)/$$f; done
	git show $(SOUP_COMMIT_DYNAMIC):models/dialogue-minilm-l6/model.onnx > $(SOUP_BUNDLE)/dynamic.onnx
	HF_HUB_OFFLINE=1 $(BIN)/python -m training.recover --bundle $(SOUP_BUNDLE) \
		--same-weights $(SOUP_BUNDLE)/dynamic.onnx --other $(RUN) --out $(OPEN_RUN)
endef
else
define OPEN_STEPS
	HF_HUB_OFFLINE=1 $(BIN)/python -m training.train $(OPEN_MIX) --out $(OPEN_TUNED)
	HF_HUB_OFFLINE=1 $(BIN)/python -m training.train --init $(OPEN_TUNED) $(MIX2) --out $(OPEN_RUN)
endef
endif
# Training files whose dev lists choose the abstention threshold: the requests it is for, not
# stage 2's lead-sentence lists (see README "Training").
THRESHOLD_ON ?= sugar,topical-chat
# The calibration map is fitted on SUGAR dev only: its labels are human ratings of appropriateness,
# where a Topical-Chat list's are "the true next turn" (its fitting nearby turns count as wrong).
CALIBRATE_ON ?= sugar
# Multi-turn requests are also scored with their last turn alone, that view's logit averaged in at
# this weight (service/context_views.py; chosen on dev, README "Training"; 0: one view).
LAST_TURN_WEIGHT ?= 0.5
# ... and with no context (the reply's prior), that logit's difference from its dev mean added at
# this weight (model 2.8.0; chosen on dev, README "Training", the reply's prior; 0: no such view;
# DISTILL=no: 0).
PRIOR_WEIGHT ?= 0.2
# More export options, e.g. EXPORT_ARGS=--similarity (the untrained encoder's cosine beside the
# ranker: better against off-topic replies, two thirds of the throughput; README "Training").
EXPORT_ARGS ?=

# Convert the shared data to ranking lists, train the shared-prefix ranker on the first mix, then
# on the second from there; the same two stages with the open-domain first mix (or, OPEN=recover,
# that run from the shipped soups); the even soup of the two (training.interpolate toward the fresh
# model did not pay, see README "Training"), trained on toward the two runs' output ensemble
# (DISTILL=no: the soup as it is; ENSEMBLE_SHARE: the output ensemble itself, two encoders), export
# the graphs (fp32, dynamic, blockwise and static int8, measured side by side; the fastest that
# holds dev P@1 and fits 60 MB ships), then evaluate per domain on held-out lists (DailyDialog++:
# evaluation only), writing the tables into the model card, and on SUGAR by the paper's protocol
# (eval-sugar-settings.md: the test groups under each statement setting; eval-dev.md: the dev groups).
model: $(VENV)/.dev-deps
	mkdir -p $(DATA)
	$(BIN)/python -m training.convert sugar $(SHARED)/sugar/sugar.jsonl $(DATA)/sugar.jsonl
	$(BIN)/python -m training.convert topical-chat $(SHARED)/topical_chat $(DATA)/topical-chat.jsonl
	$(BIN)/python -m training.convert topical-chat $(SHARED)/topical_chat \
		$(DATA)/topical-chat-entity-fact.jsonl --negatives same-entity:4,fact:2,random:3
	$(BIN)/python -m training.convert topical-chat $(SHARED)/topical_chat \
		$(DATA)/topical-chat-fact-only.jsonl --negatives fact:3
	$(BIN)/python -m training.convert sugar $(SHARED)/sugar/sugar.jsonl $(DATA)/sugar-statement.jsonl \
		--negatives statement:2
	$(BIN)/python -m training.convert topical-chat $(SHARED)/topical_chat \
		$(DATA)/topical-chat-distill.jsonl --negatives shared-word:2,short:2,random:2,nearby:1,same-entity:1,fact:1
	$(BIN)/python -m training.convert dailydialog-pp $(SHARED)/dailydialog_pp/dev.jsonl $(DATA)/dailydialog-pp.jsonl
	HF_HUB_OFFLINE=1 $(BIN)/python -m training.train $(MIX) --out $(TUNED)
	HF_HUB_OFFLINE=1 $(BIN)/python -m training.train --init $(TUNED) $(MIX2) --out $(RUN)
	$(OPEN_STEPS)
	$(BUNDLE_STEPS)
	$(BIN)/python -m training.domain_eval --model $(MODEL_DIR) --split test \
		--lists sugar=$(DATA)/sugar.jsonl --lists topical-chat=$(DATA)/topical-chat.jsonl \
		--max-lists 600 --out $(MODEL_DIR)/eval-test.json --card $(MODEL_DIR)/MODEL_CARD.md
	$(BIN)/python -m training.domain_eval --model $(MODEL_DIR) --split all \
		--lists dailydialog-pp=$(DATA)/dailydialog-pp.jsonl --out $(MODEL_DIR)/eval-ddpp.json \
		--card $(MODEL_DIR)/MODEL_CARD.md
	$(BIN)/python -m training.evaluate --model $(MODEL_DIR) --data $(SHARED)/sugar/sugar.jsonl --split test \
		--out-md $(MODEL_DIR)/eval-sugar-settings.md
	$(BIN)/python -m training.evaluate --model $(MODEL_DIR) --data $(SHARED)/sugar/sugar.jsonl --split dev

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
