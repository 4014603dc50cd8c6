# Arbiter. `make run` and `make test` are all a newcomer needs.
#
#   make run            venv + deps, migrate, demo data, web + Celery worker + beat (Ctrl-C stops all)
#   make test           the whole suite on SQLite
#   make test-postgres  the whole suite on PostgreSQL (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/arbiter)
#   make bench          a few performance figures on a throwaway database
#   make lint           ruff
#   make worker         a Celery worker alone (for deployments with their own web server)
#   make serve          production: gunicorn + Celery worker + beat on the configured services (README)
#
# Everything else is configured by environment variables (see .env.example).

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
# The stamp is named after pyproject.toml's content: `make install` is a no-op until it changes.
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-16)
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run test test-postgres lint bench worker clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

run: install
	DEBUG=$${DEBUG:-1} HOST=$(HOST) PORT=$(PORT) exec $(PY) scripts/run_local.py

test: install
	$(PY) -m pytest $(PYTEST_ARGS)

test-postgres: install
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/arbiter} $(PY) -m pytest $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .

bench: install
	DEBUG=$${DEBUG:-1} $(PY) bench/run.py $(BENCH_ARGS)

worker: install
	$(VENV)/bin/celery -A config worker --loglevel=$${LOG_LEVEL:-INFO}

# --- Production server (issue 13): gunicorn + worker + beat; stops them all when it is stopped ---
.PHONY: serve
serve: install
	HOST=$(HOST) PORT=$(PORT) exec $(PY) scripts/run_local.py --serve

clean:
	rm -rf $(VENV) var staticfiles *.egg-info
