# Every target installs what it needs into .venv from the project's own files first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install regen check-regen lint test demo bench docs dist
.DEFAULT_GOAL := test

# The editable install's import hook is invisible to type checkers (mypy, pyright): a plain path entry
# (.pth) for the checkout lets them resolve the package too.
$(BIN)/.installed: pyproject.toml setup.py Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_path("purelib"), "completion_clients_checkout.pth").write_text("$(CURDIR)\n")'
	touch $@

node_modules/.installed: package-lock.json  # Prism, the contract tests' spec-driven mock server
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

install: $(BIN)/.installed

regen: install  ## regenerate generated/ from specs/ and print what changed in the public surface
	$(BIN)/python scripts/regen.py

check-regen: install  ## fail if generated/ differs from what specs/ produce
	$(BIN)/python scripts/regen.py --check

lint: install  ## ruff (lint and format) and mypy --strict on the hand-written code (wrapper/, scripts/templates/)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict wrapper
	$(BIN)/mypy --strict scripts/templates

test: check-regen lint node_modules/.installed  ## everything CI runs
	$(BIN)/python -m pytest -q

demo: install  ## the main job: the sandbox and both clients, end to end
	$(BIN)/python examples/demo.py

bench: install  ## speed and memory against raw httpx and aiohttp (not part of `make test`)
	$(BIN)/python scripts/bench/run.py

docs: install  ## the documentation site (mkdocs-material + mkdocstrings) into site/; any warning fails it
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

dist: install  ## the sdist and wheel users install, into dist/, checked with twine
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*
