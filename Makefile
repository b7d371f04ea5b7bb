# tqaforge: `make run` (install, demo workspace, app) and `make test` (install, whole suite).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO ?= demo-workspace
HOST ?= 127.0.0.1
APP_PORT ?= 8501
PYTEST_ARGS ?=

.PHONY: install test demo run app bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "tqaforge needs Python >= 3.11; set PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

install: $(STAMP)

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

demo: install
	$(BIN)/tqaforge init $(DEMO) --name demo
	$(BIN)/tqaforge --workspace $(DEMO) tables import data/tables data/sample
	$(BIN)/tqaforge --workspace $(DEMO) status

run: demo
	@echo ""
	@echo "  tqaforge app:  http://$(HOST):$(APP_PORT)   (workspace: $(DEMO); no login needed)"
	@echo "  stop with Ctrl-C"
	@echo ""
	TQAFORGE_WORKSPACE=$(abspath $(DEMO)) $(BIN)/streamlit run tqaforge/app/Home.py \
		--server.address $(HOST) --server.port $(APP_PORT) --server.headless true \
		--browser.gatherUsageStats false

bench: install
	$(BIN)/python benchmarks/import_tables.py
	@if [ -x .venv-bench/bin/python ]; then $(BIN)/python benchmarks/variants.py; \
	else echo "variants benchmark skipped: python3 -m venv .venv-bench && .venv-bench/bin/pip install unitxt pandas"; fi

clean:
	rm -rf $(DEMO) .pytest_cache .hypothesis
