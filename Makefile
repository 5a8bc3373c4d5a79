# Two commands for a newcomer: `make demo` (set up + run the main job) and `make test`.
# Both create the virtual environment .venv on first use and reinstall when pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-slow lint docs notebooks clean

# The packages go in with uv (itself from PyPI, into the environment): it resolves the same
# versions as pip and installs them in about 10 s where pip takes a minute. pip is the fallback
# wherever uv cannot be installed or cannot reach an index that pip is configured for.
# The test and docs environments get their byte-code compiled once (pip does this at install,
# uv does not): where PYTHONDONTWRITEBYTECODE is set, as on the project's machines, nothing
# writes the .pyc files later, and each new Python process (test workers, notebook kernels, CLI
# calls) would compile JAX and its peers from source again: 8 s to import the package instead
# of 3 s. compileall over the whole environment, so that packages installed earlier by
# `make demo` are compiled too (20 s); the demo's one process would not win back its cost.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv || echo "note: uv could not be installed; using pip"

INSTALL = bk_install() { $(BIN)/uv pip install --quiet --python $(BIN)/python -e "$$1" || \
	{ $(BIN)/python -m pip install --quiet --upgrade pip && $(BIN)/python -m pip install --quiet -e "$$1"; }; }; bk_install
COMPILE = $(BIN)/python -m compileall -q -j 0 "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(INSTALL) .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(INSTALL) ".[test]"
	$(COMPILE)
	touch $(VENV)/.installed $@

$(VENV)/.installed-docs: pyproject.toml | $(BIN)/python
	$(INSTALL) ".[docs]"
	$(COMPILE)
	touch $(VENV)/.installed $@

demo: $(VENV)/.installed
	$(BIN)/bayeskern demo --out bayeskern-demo

# the report's browser test needs Debian's chromium; install it when absent (root, apt)
CHROMIUM_SETUP = command -v chromium >/dev/null 2>&1 || \
	{ command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
	  apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	echo "note: chromium could not be installed; the report browser test will be skipped"

# two pytest workers (the machines have 2 cores); a test file stays on one worker so that its
# module-scoped fitted fixtures are built once. A worker that dies (a crash in native code)
# ends the run with its test named: pytest-xdist 3.8 replaces a crashed worker under
# --dist loadfile with one that can wait forever for a second work unit (its issue #1327)
# Then the kernel tests once more in float32 (BAYESKERN_X64=0, as a user who keeps JAX in
# float32 runs them), with tolerances written for float64 and raised to float32's floor by
# tests/conftest.py (assert_close, f32_floor).
KERNEL_TESTS = tests/test_kernels.py tests/test_spectral_density.py tests/test_kernel_pytrees.py \
	tests/test_kernel_properties.py
test: lint
	@$(CHROMIUM_SETUP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --max-worker-restart 0
	BAYESKERN_X64=0 $(BIN)/python -m pytest -q -n 2 --dist loadfile $(KERNEL_TESTS)

test-slow: $(VENV)/.installed-test
	HYPOTHESIS_PROFILE=thorough $(BIN)/python -m pytest -q tests/test_kernel_properties.py && $(BIN)/python -m pytest -q -m slow
	BAYESKERN_FUZZ_EXAMPLES=1000 $(BIN)/python -m pytest -q tests/test_cli_fuzz.py -m 'slow or not slow' -k 'test_fuzz_ or real_process'

# ruff (in the test extra, one minor version: its formatting style is versioned): pycodestyle,
# pyflakes, isort, bugbear, pyupgrade and the numpydoc docstring rules (D, numpy convention) on
# the public API, and the code formatted as `ruff format` writes it (run `ruff format` to fix);
# configured in pyproject.toml. `make test` runs it first.
LINTED = bayeskern models tests benchmarks docs/conf.py docs/execute_notebooks.py
lint: $(VENV)/.installed-test
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

# API reference + notebooks (stored outputs, not executed) + results pages into docs/_build/html;
# -E rebuilds everything so that no warning hides in a cached page, -W makes warnings errors
docs: $(VENV)/.installed-docs
	rm -rf docs/generated
	$(BIN)/python -m sphinx -E -W --keep-going -q -b html docs docs/_build/html

# run every notebook in full mode (long MCMC runs) and store its outputs, which the docs show and
# tests/test_notebooks.py checks against a quick re-run; one name runs one: make notebooks NB=vsk
notebooks: $(VENV)/.installed-test
	$(BIN)/python docs/execute_notebooks.py $(NB)

clean:
	rm -rf $(VENV) bayeskern-demo .pytest_cache docs/_build docs/generated docs/_generated docs/notebooks
