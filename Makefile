# Two commands do all set-up on a fresh clone:
#   make run   -> creates .venv, installs mjx_lite, runs a batched rollout of a bundled model
#   make test  -> also installs the test dependencies (mujoco, mujoco-mjx, dm-control, pytest) and, when missing,
#                 Mesa's EGL (Debian packages, for mujoco.Renderer, the renderer's oracle), runs the tests
#   make notebooks -> installs the `notebook` extra (jupyter) and opens notebooks/ in JupyterLab
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
# CI runs the default selection; `make test PYTEST_ARGS="-m ''"` (or `make test-all`) also runs the slow cases
PYTEST_ARGS ?= -m "not slow"

.PHONY: run test test-all lint bench clean notebooks gl-deps

# -qq: pip's errors still print, setuptools' informational note on editable installs does not
# Packages go in through uv (pip installs it into the venv first), which downloads in parallel: a fresh `make test`
# environment took 2 min 45 s with uv and 15 min 13 s with pip alone on the 2-core machine (same packages and versions,
# cold caches). pip does the install itself when uv cannot be installed or fails.
define install
	($(PIP) install -qq uv && $(VENV)/bin/uv pip install -q --python $(PY) $(1)) || $(PIP) install -qq $(1)
endef

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(call install,-e .)
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(call install,-e '.[test]')
	touch $@

$(VENV)/.installed-notebook: $(VENV)/.installed pyproject.toml
	$(call install,-e '.[notebook]')
	touch $@

# mujoco.Renderer (the oracle of tests/test_render.py) renders headless through EGL with Mesa's software driver.
# Installed only when missing (idempotent, quiet); a failure here fails `make test` rather than skipping tests.
gl-deps:
	@if ! ldconfig -p | grep -q 'libEGL_mesa.so.0' || ! ls /usr/lib/*/dri/swrast_dri.so >/dev/null 2>&1; then \
	  echo 'installing Mesa EGL (libegl1 libegl-mesa0 libgl1-mesa-dri) for mujoco.Renderer'; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    libegl1 libegl-mesa0 libgl1-mesa-dri libgl1 >/dev/null; \
	fi

notebooks: $(VENV)/.installed-notebook
	$(VENV)/bin/jupyter lab notebooks/

run: $(VENV)/.installed
	$(PY) -m mjx_lite run --model cartpole
	@echo
	@echo 'Next:'
	@echo '  $(VENV)/bin/mjx_lite run --model humanoid --batch 64       # any bundled model: $(VENV)/bin/mjx_lite run --help'
	@echo '  $(PIP) install -e ".[render]" && $(VENV)/bin/mjx_lite render cartpole -o cartpole.mp4'
	@echo '  $(VENV)/bin/mjx_lite train cartpole_balance                # PPO, a few minutes on a CPU'
	@echo '  make notebooks                                          # quickstart, RL, trajectory optimisation'
	@echo '  README.md: a rollout, a picture, gradients; docs/performance.md: what sets speed and compile time'

test: $(VENV)/.installed-test gl-deps
	$(VENV)/bin/ruff check .
	MUJOCO_GL=egl $(PY) -m pytest -q -n 2 --dist loadgroup --durations=30 $(PYTEST_ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo 'no tests collected'; exit 0; fi; exit $$rc

test-all: $(VENV)/.installed-test
	$(MAKE) test PYTEST_ARGS="-m ''"

bench: $(VENV)/.installed-test
	$(PY) -m mjx_lite bench --model humanoid --batch 256

clean:
	rm -rf $(VENV) build *.egg-info
