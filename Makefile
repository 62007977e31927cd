# Two entry points, both from a clean clone on a fresh machine:
#   make demo   sets up .venv and runs a short tour on the bundled defaults
#   make test   sets up .venv and runs the test suite (what CI runs)
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean setup

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q torch==2.13.0 || echo "torch not installed: live tests will be skipped"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	@$(BIN)/python -m scalemodel.tour

test: $(STAMP)
	$(BIN)/python -m pytest -m "not gpu"

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
