# `make run` starts the window, `make test` runs the whole suite. Both create .venv on
# first use. TORCH_SPEC says which torch to install first: a home PC gets the normal
# (CUDA) build from PyPI; CI sets it to the CPU build that lies on disk.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch>=2.4
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# pytest-xdist workers: one per core by default (CI's 2 cores: 2); worksteal evens the tail
# (a few trainer tests take a minute each)
TEST_WORKERS ?= auto

.PHONY: run test lint clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/ternit-lab

test: $(STAMP)
	$(VENV)/bin/ruff check .
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info
