# aetnaweb: two commands.
#   make run   set everything up and start the dashboard on SQLite with demo data
#   make test  set everything up and run the whole test suite (ruff, mypy, then pytest)
#
# Both create .venv with Python 3.12+ and install from this checkout's own files.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=

.PHONY: run test setup lint format bench clean check-python browser

check-python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else "aetnaweb needs Python 3.12+; found " + sys.version.split()[0])'

$(STAMP): pyproject.toml | check-python
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP)

run: setup
	$(PY) manage.py migrate --noinput
	$(PY) manage.py demo
	@echo ""
	@echo "  aetnaweb dashboard: http://$(HOST):$(PORT)/"
	@echo ""
	@# Approvals need a key: use the configured one, else the demo's data/approval_key.
	@# Checkpoints are signed with the configured key, else the demo's data/checkpoint_key.
	AETNAWEB_APPROVAL_KEY_FILE="$${AETNAWEB_APPROVAL_KEY_FILE:-$${AETNAWEB_DATA_DIR:-data}/approval_key}" \
	AETNAWEB_CHECKPOINT_KEY_FILE="$${AETNAWEB_CHECKPOINT_KEY_FILE:-$${AETNAWEB_DATA_DIR:-data}/checkpoint_key}" \
	  $(PY) manage.py runserver $(HOST):$(PORT)

# Debian's Chromium for the browser tests (Playwright's own download cannot work offline).
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	    (apt-get install -y -qq chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)); \
	  else echo "note: /usr/bin/chromium is missing; browser tests will be skipped (install Debian's chromium)"; fi; \
	fi

test: setup browser
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy aetnaweb audit memory actions
	$(VENV)/bin/lint-imports
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy aetnaweb audit memory actions
	$(VENV)/bin/lint-imports

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: setup
	$(PY) bench/audit_append.py
	$(PY) bench/audit_verify.py
	$(PY) bench/memory_scale.py

clean:
	rm -rf $(VENV) data/test_aetnaweb_*.sqlite3*
