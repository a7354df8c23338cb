# Each target creates .venv when needed, installs crossfhe into it, and runs.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export CROSSFHE_JAX_CACHE ?= $(CURDIR)/.jax_cache

.PHONY: demo test test-slow lint bench bench-quick clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/crossfhe demo

lint: $(STAMP)
	$(BIN)/ruff check crossfhe tests benchmarks
	$(BIN)/lint-imports

test: lint
	$(BIN)/python -m pytest -m "not slow" -q

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow -q

BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[dev,bench]"
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/crossfhe bench ntt
	$(BIN)/crossfhe bench ckks
	$(BIN)/crossfhe bench hmvp
	$(BIN)/crossfhe bench tfhe
	$(BIN)/crossfhe bench kernels

bench-quick: $(BENCH_STAMP)
	$(BIN)/crossfhe bench ntt --quick
	$(BIN)/crossfhe bench ckks --quick
	$(BIN)/crossfhe bench hmvp --quick
	$(BIN)/crossfhe bench tfhe --quick
	$(BIN)/crossfhe bench kernels --quick

clean:
	rm -rf $(VENV) .jax_cache .pytest_cache .ruff_cache benchmarks/results benchmarks/ntt_peer/target
