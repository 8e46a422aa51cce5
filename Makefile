# `make run` starts the window, `make test` runs the whole suite: both are lab.py's commands
# (the same set-up on every OS; `lab run` / `lab test` on Windows), which create .venv on
# first use. TORCH_SPEC, when set, says which torch to install first (CI: the CPU build that
# lies on disk); unset, lab.py installs the build for this PC's NVIDIA card, or the CPU one.
PYTHON ?= python3
VENV ?= .venv
# pytest-xdist workers: one per core by default (CI's 2 cores: 2); worksteal evens the tail
# (a few trainer tests take a minute each)
TEST_WORKERS ?= auto
export VENV TEST_WORKERS
ifdef TORCH_SPEC
export TORCH_SPEC
endif

.PHONY: run test setup lint clean

run:
	$(PYTHON) lab.py run

test:
	$(PYTHON) lab.py test

setup:
	$(PYTHON) lab.py setup

lint: setup
	$(VENV)/bin/python -m ruff check .

clean:
	rm -rf $(VENV) build *.egg-info
