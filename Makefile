# Arbiter. `make run` and `make test` are all a newcomer needs.
#
#   make run            venv + deps, migrate, demo data, web + Celery worker + beat (Ctrl-C stops all)
#   make test           the whole suite on SQLite
#   make test-postgres  the whole suite on PostgreSQL (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/arbiter)
#   make bench          a few performance figures on a throwaway database, then the step benchmark
#   make bench-ledger   audit_verify and case_replay --all over a generated 1,000,000-event ledger
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

.PHONY: install run test test-postgres lint bench worker clean bench-venv bench-ledger

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

bench: install bench-venv
	DEBUG=$${DEBUG:-1} $(PY) bench/run.py $(BENCH_ARGS)
	$(PY) bench/steps.py --database-url $(BENCH_DATABASE_URL) --langgraph-python $(BENCH_VENV)/bin/python $(STEP_BENCH_ARGS)

# --- Step and ledger benchmarks (ADR 0010) ------------------
# The step benchmark compares Arbiter's executor with LangGraph's PostgresSaver and a plain-psycopg
# floor on its own PostgreSQL database (dropped and recreated each time). LangGraph is installed
# only into the benchmark's own virtualenv, never as a project dependency.
BENCH_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/arbiter_bench
BENCH_VENV := var/bench-venv
BENCH_VENV_STAMP := $(BENCH_VENV)/.installed-langgraph-1.2.24

bench-venv: $(BENCH_VENV_STAMP)

$(BENCH_VENV_STAMP):
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --quiet --disable-pip-version-check langgraph==1.2.24 \
		langgraph-checkpoint-postgres==3.2.0 'psycopg[binary]'
	touch $(BENCH_VENV_STAMP)

# audit_verify (full and --since) and case_replay --all over a generated ledger (LEDGER_EVENTS events).
bench-ledger: install
	$(PY) bench/ledger.py --database-url $(BENCH_DATABASE_URL)_ledger $(LEDGER_BENCH_ARGS)

worker: install
	$(VENV)/bin/celery -A config worker --loglevel=$${LOG_LEVEL:-INFO}

# --- Production server: gunicorn + worker + beat; stops them all when it is stopped ---
.PHONY: serve
serve: install
	HOST=$(HOST) PORT=$(PORT) exec $(PY) scripts/run_local.py --serve

clean:
	rm -rf $(VENV) var staticfiles *.egg-info
