# Omni Studio — the two commands: `make studio` and `make test`.
PY := .venv/bin/python
HOST ?= 127.0.0.1
PORT ?= 8501

.PHONY: setup setup-dev studio engine rehearse test test-fast bench clean

setup:
	@bash scripts/setup.sh

setup-dev:
	@bash scripts/setup.sh --dev

## Run the studio (offline engine by default), bound to 127.0.0.1. Any other HOST needs sign-in (docs/team.md):
## scripts/studio.py refuses to start without it, then runs streamlit; STUDIO_ARGS adds streamlit run flags.
studio: setup
	$(PY) scripts/studio.py --server.address $(HOST) --server.port $(PORT) \
	  --server.headless true --browser.gatherUsageStats false $(STUDIO_ARGS)

## The embedded offline vLLM-Omni engine on its own (http://127.0.0.1:8091).
engine: setup
	$(PY) -m offline --host 127.0.0.1 --port 8091

## The dry run of a customer delivery: emulated SageMaker, infra deploy, the studio on it, delete at Ctrl-C.
## With CMD="…": run that command unchanged against the emulated account (python -m emulator exec; EXEC_ARGS
## adds --region R, --config faults.json or --endpoint-urls). `python` in CMD is the project's venv.
rehearse: setup-dev
ifdef CMD
	PATH="$(abspath .venv/bin):$$PATH" $(PY) -m emulator exec $(EXEC_ARGS) -- $(CMD)
else
	$(PY) scripts/rehearse.py --port $(PORT)
endif

## The whole test suite, in TEST_WORKERS parallel pytest-xdist workers (4 on 2 cores: much of a test is waiting on
## a server, a browser or audio paced at real time); worksteal evens out the slow tail. TEST_WORKERS=0 runs it in one
## process. PYTEST_ARGS adds pytest options or picks tests.
## The project's modules are byte-compiled first (under a second): with PYTHONDONTWRITEBYTECODE set, as on this
## machine, every process the tests start (a CLI, an engine, a studio) would otherwise compile them from source.
TEST_WORKERS ?= 4
COMPILE := $(PY) -m compileall -q -j 0 app.py pages ui services offline emulator infra protocol hearing scripts bench tests >/dev/null
test: setup-dev
	@$(COMPILE)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

## The quick loop: everything but the browser tests (tests/test_browser_*.py).
test-fast: setup-dev
	@$(COMPILE)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal --ignore-glob='tests/test_browser_*' $(PYTEST_ARGS)

## Benchmarks (ratios side by side in one run). Files starting with _ are helpers, not benchmarks.
bench: setup-dev
	@for b in bench/[!_]*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf .venv .pytest_cache
