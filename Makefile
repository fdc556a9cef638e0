# Two entry points: `make demo` and `make test`. Both create .venv if it is missing and are idempotent.
# `make docs` builds the documentation site (docs/, mkdocs.yml) into site/.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export HF_EVALUATE_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: demo test docs install lint bench gpu evidence clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch 2.14.1 + torchvision 0.29.1 are the pair that works with timm here (the 2.13 CPU wheel breaks torchvision).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q "torch==2.14.1" "torchvision==0.29.1" || $(BIN)/python -m pip install -q torch torchvision
	$(BIN)/python -m pip install -q -e ".[test,docs]"
	touch $(STAMP)

install: $(STAMP)

# east-compare's defaults on the demo recipe, one seed: EAST, cross-entropy, logit-adjusted cross-entropy, focal loss
# and LDAM-DRW, each also with a decision rule tuned on validation, against tuned cross-entropy. Writes
# runs/compare-demo/results.md (east-train demo's own run goes to runs/demo).
demo: $(STAMP)
	$(BIN)/east-compare demo --seeds 1

test: $(STAMP)
	$(BIN)/python -m pytest -q tests east_hf

# Strict: a broken link or anchor, a missing page or an API reference that does not resolve fails the build.
docs: $(STAMP)
	$(BIN)/python -m mkdocs build --strict --site-dir site

lint: $(STAMP)
	$(BIN)/ruff check east_hf tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/loss_speed.py

# The CUDA paths on one GPU: tests/test_gpu.py on the device, then the speed tables (runs/gpu_check/); without CUDA one
# line and exit 0.
gpu: $(STAMP)
	bash benchmarks/gpu_check.sh

# The quality evidence: one mode of benchmarks/run_evidence.sh (`make evidence MODE=ce_decay`; none: every mode the
# main tables and the default need). Hours on 2 cores; the tables land in benchmarks/results/<mode>.md.
evidence: $(STAMP)
	bash benchmarks/run_evidence.sh $(MODE)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache site
