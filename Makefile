# The two commands a contributor needs: `make build` (set up + build), `make test`.
SHELL := /bin/bash
export UV_PYTHON_DOWNLOADS := never
UV ?= uv
PYTEST_ARGS ?=
FORK_PY := .venv/bin/python
STOCK_PY := envs/stock/.venv/bin/python
PY_SOURCES := tools tests benchmarks examples
# tests written for upstream's tests/ folder, checked with upstream's ruff settings
UPSTREAM_TESTS := $(wildcard livekit-agents/patches/upstream/*/*.py livekit-plugins/*/patches/upstream/*/*.py)
# The parity set: every test that claims nothing about a fork fix, i.e. not marked
# upstream_bug (red on stock by design), fork_api (API stock lacks) or tooling, and outside:
#   tests/tooling   the patch-queue tool and packaging (needs lkfork, absent from envs/stock)
#   tests/stress    random handoff schedules, which violate invariants on stock by design
#                   (docs/stress.md); its unit tests check the harness, not livekit
#   tests/examples  the examples demonstrate fork fixes (#5150, #5936): red on stock by design
PARITY_ARGS := -m "not upstream_bug and not fork_api and not tooling" \
	--ignore=tests/tooling --ignore=tests/stress --ignore=tests/examples tests

.PHONY: setup build check lint types test test-fork prove parity parity-stock parity-fork stress stress-stock stress-ci bench clean

setup:  ## the fork's dev env (builds the patched packages) and the stock env
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --locked
	$(UV) sync --locked --project envs/stock

build: setup  ## patched wheels + sdists into dist/, with a PEP 503 index
	$(FORK_PY) -m lkfork build
	$(FORK_PY) -m lkfork index

check:  ## the patch series: listed files, trailers, exact application, export round trip
	$(FORK_PY) -m lkfork check

lint:
	$(FORK_PY) -m ruff check $(PY_SOURCES)
	$(FORK_PY) -m ruff format --check $(PY_SOURCES)
	$(FORK_PY) -m ruff check --config tools/upstream-ruff.toml $(UPSTREAM_TESTS)
	$(FORK_PY) -m ruff format --check --config tools/upstream-ruff.toml $(UPSTREAM_TESTS)

types:
	$(FORK_PY) -m mypy

test-fork:  ## every test, on the patched build
	$(FORK_PY) -m pytest --lk-env fork $(PYTEST_ARGS)

prove:  ## every upstream_bug test must FAIL on stock upstream, for its bug (tests/proof.py)
	$(STOCK_PY) -m pytest --lk-env stock --prove tests/regression $(PYTEST_ARGS)

parity: parity-stock parity-fork  ## every parity test must pass on stock upstream AND on the fork

parity-stock:
	$(STOCK_PY) -m pytest --lk-env stock -q $(PARITY_ARGS) $(PYTEST_ARGS)

parity-fork:
	$(FORK_PY) -m pytest --lk-env fork -q $(PARITY_ARGS) $(PYTEST_ARGS)

# parity-fork repeats ~30 s of test-fork; it stays so `make parity` means the same everywhere
test: lint types check test-fork prove parity  ## what CI runs

stress:  ## random handoff schedules: make stress SEEDS=0:10000 [JOBS=4] [MODE=nova|audio] (replay: python -m tests.stress --replay N)
	$(FORK_PY) -m tests.stress --seeds $(or $(SEEDS),0:1000) --jobs $(or $(JOBS),1) --mode $(or $(MODE),text)

stress-stock:  ## the same schedules on stock upstream, for the comparison in docs/stress.md
	$(STOCK_PY) -m tests.stress --seeds $(or $(SEEDS),0:1000) --no-shrink --jobs $(or $(JOBS),1) --mode $(or $(MODE),text)

stress-ci:  ## the 200 CI seeds and the 50 Nova and 50 audio ones as tests (also part of `make test`)
	$(FORK_PY) -m pytest --lk-env fork tests/stress -q

bench:  ## every fork-vs-stock benchmark; writes docs/benchmarks.md
	$(FORK_PY) -m benchmarks

clean:
	rm -rf build dist
