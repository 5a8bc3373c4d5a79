# Two commands for a newcomer: `make demo` (set up + run the main job) and `make test`.
# Both create the virtual environment .venv on first use and reinstall when pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-slow lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(VENV)/.installed $@

demo: $(VENV)/.installed
	$(BIN)/bayeskern demo --out bayeskern-demo

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q

test-slow: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q -m slow

lint: $(VENV)/.installed-test
	$(BIN)/python -m pip install --quiet ruff && $(BIN)/ruff check bayeskern models tests benchmarks

clean:
	rm -rf $(VENV) bayeskern-demo .pytest_cache
