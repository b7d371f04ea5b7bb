# tqaforge: `make run` (install, demo workspace, Label Studio with the demo's tasks, and the app) and `make test` (install, whole suite).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO ?= demo-workspace
HOST ?= 127.0.0.1
# Binding anywhere but loopback exposes both servers (and the demo login): ALLOW_REMOTE=1 says you mean it,
# and the app then requires a sign-in (first: .venv/bin/tqaforge -w demo-workspace app users add NAME).
ALLOW_REMOTE ?=
APP_PORT ?= 8501
LS_PORT ?= 8080
LS_VENV ?= .venv-ls
# Label Studio pins old shared libraries (openai<2): it gets its own virtualenv.
LABEL_STUDIO_VERSION ?= 1.23.2
PYTEST_ARGS ?= --durations=30  # the slowest tests in every run's log (the CI must stay under 30 minutes)
# The suite runs on two pytest-xdist workers (one per core; tests/conftest.py keeps a test file on one
# worker and every test of the shared Label Studio servers on one, in order). XDIST= runs it in one process.
XDIST ?= -n 2

.PHONY: install labelstudio venvs check test demo run app bench clean screenshots browser-stress

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "tqaforge needs Python >= 3.11; set PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q --no-deps 'tabmemcheck==0.1.6'
	@touch $@

install: $(STAMP)

$(LS_VENV)/.installed:
	$(PYTHON) -m venv $(LS_VENV)
	$(LS_VENV)/bin/pip install -q --upgrade pip
	$(LS_VENV)/bin/pip install -q 'label-studio==$(LABEL_STUDIO_VERSION)'
	@touch $@

labelstudio: $(LS_VENV)/.installed

# Both virtualenvs at once: each install is mostly one core's work (a few minutes each on a fresh machine).
venvs:
	@$(MAKE) --no-print-directory -j2 install labelstudio

# The checks DESIGN.md asks for: import contracts (the layers), lint, types; then the whole suite.
check: install
	$(BIN)/lint-imports
	$(BIN)/ruff check tqaforge tests benchmarks
	$(BIN)/mypy

# Bytecode compiled first: with PYTHONDONTWRITEBYTECODE set (as on some hosts) every CLI child, app server
# and worker of the suite would otherwise compile the package from source again (about 0.5 s each).
test: venvs check
	$(BIN)/python -m compileall -q tqaforge tests > /dev/null
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

# The demo workspace, built without a model (a few seconds; a second run adds nothing): data/ imported,
# probes answered by rule, example reviews, variants, a release and two scored predictions files.
demo: install
	$(BIN)/tqaforge demo $(DEMO) --data data
	$(BIN)/tqaforge --workspace $(DEMO) status

run: venvs demo
	$(BIN)/tqaforge serve --workspace $(DEMO) --host $(HOST) --app-port $(APP_PORT) --ls-port $(LS_PORT) --demo-login --push-pending \
		$(if $(filter 1 yes true,$(ALLOW_REMOTE)),--allow-remote)

# The README's screenshots, one per app page, of a fresh demo workspace (headless Chromium).
screenshots: install
	PYTHONPATH=. $(BIN)/python tests/app_screenshots.py

# Every browser test file three times in a row under one busy process per core (issue 29).
browser-stress: install labelstudio
	TQAFORGE_LABEL_STUDIO_VENV=$(abspath $(LS_VENV)) $(BIN)/python benchmarks/browser_stress.py

bench: install
	$(BIN)/python benchmarks/cli_startup.py
	$(BIN)/python benchmarks/import_memory.py
	$(BIN)/python benchmarks/import_tables.py
	$(BIN)/python benchmarks/tokens.py
	$(BIN)/python benchmarks/agreement.py
	$(BIN)/python benchmarks/gateway.py
	$(BIN)/python benchmarks/batch.py
	$(BIN)/python benchmarks/sandbox.py
	$(BIN)/python benchmarks/release.py
	$(BIN)/python benchmarks/app.py
	@if [ -d ../shared/data/freb-tqa ]; then $(BIN)/python benchmarks/question_typing.py; \
	else echo "question typing benchmark skipped: ../shared/data/freb-tqa not found"; fi
	@if [ -x .venv-bench/bin/python ]; then $(BIN)/python benchmarks/variants.py; \
	else echo "variants benchmark skipped: python3 -m venv .venv-bench && .venv-bench/bin/pip install unitxt pandas"; fi
	@if [ -f $(LS_VENV)/.installed ]; then $(BIN)/python benchmarks/labelstudio.py; \
	else echo "Label Studio benchmark skipped: make labelstudio"; fi

clean:
	rm -rf $(DEMO) .pytest_cache .hypothesis
