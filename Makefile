# WARP-K: `make run` and `make test` work on a fresh clone with nothing installed.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install run test lint clean

install: $(STAMP)

# torch goes first: a plain `torch` requirement pulls a multi-GB CUDA build on a CPU box.
# If a torch is already importable (e.g. a GPU user's CUDA build), keep it.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m warpk $(ARGS)

test: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m pytest -q $(PYTEST_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check warpk tests

clean:
	rm -rf $(VENV) outputs multirun .pytest_cache
