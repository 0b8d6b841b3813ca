# Two commands do all set-up on a fresh clone:
#   make run   -> creates .venv, installs mjx_lite, runs a batched rollout of a bundled model
#   make test  -> also installs the test dependencies (mujoco, mujoco-mjx, dm-control, pytest), runs the tests
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
PYTEST_ARGS ?=

.PHONY: run test lint bench clean

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
	$(VENV)/bin/ruff check mjx_lite tests benchmarks
	$(PY) -m pytest -q -n 2 $(PYTEST_ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo 'no tests collected'; exit 0; fi; exit $$rc

bench: $(VENV)/.installed-test
	$(PY) -m mjx_lite.bench

clean:
	rm -rf $(VENV) build *.egg-info
