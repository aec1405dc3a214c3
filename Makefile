# The two entry points README.md documents: `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test check setup compile system-deps bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(MAKE) --no-print-directory compile
	touch $(STAMP)

# Quire's own modules compiled ahead: an editable install leaves them as sources, and where
# PYTHONDONTWRITEBYTECODE is set every `quire` process compiles them again, a worker the modules
# it imports late in the middle of its first claims (bench/peers.py: slower in each of five
# interleaved pairs; docs/BENCHMARKS.md). Sources changed since are compiled again here, or by
# Python in memory (a stale .pyc is never used).
compile:
	$(BIN)/python -m compileall -q app worker schema agents >/dev/null

setup: $(STAMP)

# Chromium, Tesseract and its languages, poppler-utils: installed when missing (as root), or the
# exact apt-get command is printed and make stops.
system-deps:
	./.ci/system-deps

run: system-deps $(STAMP) compile
	$(BIN)/quire up --samples

# The checks come first, and the first to fail stops the run: ruff (lint) and mypy (types), both
# configured in pyproject.toml, then the tests.
check: $(STAMP)
	$(BIN)/ruff check app worker schema agents bench tests
	$(BIN)/mypy

# Four pytest processes, each with its own embedded Postgres; a test file runs whole in one of them
# (its module fixtures: one app, one Chromium). Most tests wait on processes, pages and Postgres
# rather than compute, so four keep two cores busy.
TEST_PROCESSES ?= 4

test: system-deps check
	$(BIN)/python -m pytest -q -n $(TEST_PROCESSES) --dist loadfile

bench: $(STAMP)
	$(BIN)/python bench/claim.py --quick
	$(BIN)/python bench/dashboard.py --quick

clean:
	rm -rf $(VENV) .quire
