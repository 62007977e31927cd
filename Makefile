# Two entry points, both from a clean clone on a fresh machine:
#   make demo   sets up .venv with what the tour needs (numpy, no torch) and runs a short tour
#   make test   sets up .venv with the test tools, torch and the export-check frameworks, and
#               runs the test suite (what CI runs)
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_STAMP := $(VENV)/.installed-demo
TEST_STAMP := $(VENV)/.installed-test
# torch first, pinned, so that no later package pulls another one
TORCH ?= torch==2.13.0
# torchtitan's job config, read by the export checks (the package without its dependencies)
TORCHTITAN ?= torchtitan==0.2.2

.PHONY: demo test lint bench clean setup

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $(DEMO_STAMP)

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q $(TORCH) || echo "torch not installed: live tests will be skipped"
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q -e '.[export-check]' \
	  || echo "megatron-core / deepspeed not installed: their export checks will be skipped"
	$(BIN)/pip install -q --no-deps $(TORCHTITAN) \
	  || echo "torchtitan not installed: its export checks will be skipped"
	touch $(DEMO_STAMP) $(TEST_STAMP)

setup: $(TEST_STAMP)

demo: $(DEMO_STAMP)
	@$(BIN)/python -m scalemodel.tour

test: $(TEST_STAMP)
	$(BIN)/python -m pytest -m "not gpu"

lint: $(TEST_STAMP)
	$(BIN)/ruff check .

bench: $(TEST_STAMP)
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
