# Every target installs what it needs into .venv from the project's own files first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# pytest-xdist processes for the parallel part of the suite: two per CPU. Much of that part waits
# (on subprocesses, on servers holding their answers), and a second process per CPU runs meanwhile:
# on 2 CPUs, 4 processes took 323 s where 3 took 346 s, on a machine another job kept busy.
WORKERS ?= $(shell $(PYTHON) -c 'import os; print(2 * (os.cpu_count() or 1))')
PYTEST := $(BIN)/python -m pytest -q
# Python caches compiled modules (__pycache__, ignored by git) even where the environment says not to:
# the checkout's modules, and the test modules whose asserts pytest rewrites, which it keeps only where
# bytecode may be written. Without it each pytest process, and each Python a test starts, compiles them
# all again (with no rewrite cached, a pytest process collected the suite in 9.2 s rather than 7.8 s).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install regen check-regen lint test test-parallel test-serial demo bench docs dist
.DEFAULT_GOAL := test

# Two install levels, one stamp each, in the same .venv: `make demo` needs only the package and its
# sandbox extra (about 30 distributions, seconds); everything else needs the dev extra (ray, the vendor
# SDKs, mkdocs, ...: minutes). The dev level includes the sandbox one, so it stamps both, and a `make
# test` after a `make demo` installs the rest on top. The editable install's import hook is invisible
# to type checkers (mypy, pyright): a plain path entry (.pth) for the checkout lets them resolve the
# package too.
define install_extra
	test -x $(BIN)/python || { $(PYTHON) -m venv $(VENV) && $(BIN)/python -m pip install --quiet --upgrade pip; }
	$(BIN)/python -m pip install --quiet -e '.[$(1)]'
	$(BIN)/python -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_path("purelib"), "completion_clients_checkout.pth").write_text("$(CURDIR)\n")'
endef

$(BIN)/.installed-sandbox: pyproject.toml setup.py Makefile
	$(call install_extra,sandbox)
	touch $@

$(BIN)/.installed-dev: pyproject.toml setup.py Makefile
	$(call install_extra,dev)
	touch $@ $(BIN)/.installed-sandbox

node_modules/.installed: package-lock.json  # Prism, the contract tests' spec-driven mock server
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

install: $(BIN)/.installed-dev  ## .venv with the project editable and its dev extra

regen: install  ## regenerate generated/ from specs/ and print what changed in the public surface
	$(BIN)/python scripts/regen.py

check-regen: install  ## fail if generated/ differs from what specs/ produce
	$(BIN)/python scripts/regen.py --check

lint: install  ## ruff (lint and format) and mypy --strict on the hand-written code (wrapper/, scripts/templates/, examples/service/)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict wrapper
	$(BIN)/mypy --strict scripts/templates
	$(BIN)/mypy --strict examples/service

# The suite in two parts (CONTRIBUTING.md, "The test suite"). The tests marked `serial` measure rates,
# in-flight peaks or wall-clock time: they run first, among themselves only, on SERIAL_WORKERS
# processes (they wait on servers and clocks far more than they compute: 37 s of CPU in 237 s when
# run one at a time; three at once took 86-97 s in eight runs on 2 CPUs, two at once 124 s, and
# seldom want a CPU at the same moment). Then the checks run beside the rest of the suite on WORKERS
# processes (nothing there measures time, and mypy's caches are apart); by then the serial part has
# written pytest's rewritten modules to their caches, which the WORKERS reuse. Each `-m` replaces
# pyproject.toml's `-m "not dist"`, so it says it again.
SERIAL_WORKERS ?= 3
PARALLEL_PART := $(PYTEST) -n $(WORKERS) -m "not serial and not dist"
SERIAL_PART := $(PYTEST) -n $(SERIAL_WORKERS) -m "serial and not dist"
# Each job's output in one piece where make can (GNU make 4+; 3.81, macOS's, interleaves it).
SYNC_OUTPUT := $(if $(filter output-sync,$(.FEATURES)),--output-sync=target)

# npm's install (Prism, for the parallel part only) runs beside the checks, not before the serial part.
test: install  ## everything CI runs: the suite's serial part, then the checks beside the rest
	$(SERIAL_PART)
	$(MAKE) --no-print-directory --jobs=3 $(SYNC_OUTPUT) check-regen lint test-parallel

test-parallel: install node_modules/.installed  ## the suite but its serial tests, on WORKERS processes
	$(PARALLEL_PART)

test-serial: install  ## the serial tests, among themselves only: rates, in-flight peaks and timing
	$(SERIAL_PART)

demo: $(BIN)/.installed-sandbox  ## the main job: the sandbox and both clients, end to end
	$(BIN)/python examples/demo.py

bench: install  ## speed and memory against raw httpx and aiohttp (not part of `make test`)
	$(BIN)/python scripts/bench/run.py

docs: install  ## the documentation site (mkdocs-material + mkdocstrings) into site/; any warning fails it
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

dist: install  ## the sdist and wheel users install, into dist/, checked with twine
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*
