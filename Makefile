# Two commands do all set-up on a fresh clone:
#   make run   -> creates .venv, installs mjx_lite, runs a batched rollout of a bundled model
#   make test  -> also installs the test dependencies (mujoco, mujoco-mjx, dm-control, pytest), runs the tests
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
# CI runs the default selection; `make test PYTEST_ARGS="-m ''"` (or `make test-all`) also runs the slow cases
PYTEST_ARGS ?= -m "not slow"

.PHONY: run test test-all lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(PIP) install -q -e '.[test]'
	touch $@

run: $(VENV)/.installed
	$(PY) -m mjx_lite.run

test: $(VENV)/.installed-test
	$(VENV)/bin/ruff check mjx_lite tests
	$(PY) -m pytest -q -n 2 --durations=15 $(PYTEST_ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo 'no tests collected'; exit 0; fi; exit $$rc

test-all: $(VENV)/.installed-test
	$(MAKE) test PYTEST_ARGS="-m ''"

bench: $(VENV)/.installed-test
	$(PY) -m mjx_lite.bench

clean:
	rm -rf $(VENV) build *.egg-info
