# Two entry points: `make demo` and `make test`. Both create .venv from the pinned lock files if missing
# (runtime: requirements.lock.txt, what the worker image installs; tests: requirements-dev.lock.txt).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_OUT ?= demo_output
export HF_HUB_OFFLINE := 1
export GX_ANALYTICS_ENABLED := false
# pytest worker processes (pytest-xdist); a test file runs whole on one worker, so its module fixtures are built once
TEST_WORKERS ?= 2

.PHONY: demo test test-all lint venv clean

venv: $(STAMP)

$(STAMP): requirements.lock.txt requirements-dev.lock.txt setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.lock.txt -r requirements-dev.lock.txt
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

demo: $(STAMP)
	bash scripts/demo.sh $(DEMO_OUT)

# Fast suite plus the real-data tests that fit CI; `make test-all` adds the slow benchmark-data tests.
test: $(STAMP)
	$(PY) -m pytest -q -m "not slow" -n $(TEST_WORKERS) --dist loadfile

test-all: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# ruff as ruff.toml says (the formatter's style; pyflakes and pycodestyle's error classes); mypy as mypy.ini says
lint: $(STAMP)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

clean:
	rm -rf $(DEMO_OUT) .pytest_cache
