# Arbiter. `make run` and `make test` are all a newcomer needs.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
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
	DEBUG=$${DEBUG:-1} HOST=$(HOST) PORT=$(PORT) $(PY) scripts/run_local.py

test: install
	$(PY) -m pytest $(PYTEST_ARGS)

test-postgres: install
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/arbiter} $(PY) -m pytest $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .

bench: install
	DEBUG=1 $(PY) bench/run.py

clean:
	rm -rf $(VENV) var staticfiles
