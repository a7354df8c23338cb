# Each target creates .venv when needed, installs crossfhe into it, and runs.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export CROSSFHE_JAX_CACHE ?= $(CURDIR)/.jax_cache
export CROSSFHE_NATIVE_CACHE ?= $(CURDIR)/.native_cache

.PHONY: demo test test-slow test-min lint docs bench bench-quick clean openfhe-peer

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/crossfhe demo

lint: $(STAMP)
	$(BIN)/ruff check crossfhe tests benchmarks examples
	$(BIN)/lint-imports

# Two test processes, each test file whole in one (its module fixtures made once): XLA:CPU keeps to about one core
# per process (the default run's first 766 tests took 30.3 min in one, 2026-11-29). The heaviest tests and docs pages
# are marked slow, each with its cold time and what the default run keeps of it (the default run then took 39.1 min
# of pytest from a fresh clone on a 2-core AMD EPYC without AVX-512, 2026-11-29; 54.3 before, in a run that shared
# the machine with other tests for about half its time; 13.5 min on a 2-core AMD EPYC with AVX-512, 2026-11-29).
# 2026-12-03, on a faster 2-core AMD EPYC without AVX-512: 41.2 min cold, 37.2 after six more tests and pages became
# slow; with JAX_DISABLE_MOST_OPTIMIZATIONS=1, 0.92x (compiles shorter, TFHE runs 1.5-1.7x longer): not used
# (benchmarks/README.md, "The default test run: optimizations off against on"). Compiles are 62% of the run's worker
# time (benchmarks/README.md, "Where the default test run's time goes"; 54.8 min on 2026-12-03 on the same machine
# running 1.26x slower). 34.7 min cold on a 2-core AMD EPYC Zen 4 with AVX-512 IFMA, 2026-12-03 (c634648).
test: lint
	$(BIN)/python -m pytest -m "not slow" -q -n 2 --dist loadfile --durations=30

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow -q

# The oldest Python, jax, numpy and tqdm that pyproject.toml allows, installed exactly, against the built wheel.
test-min:
	.ci/min-versions

# The API reference and tutorials (docs/, mkdocs.yml) into site/, in their own environment. Their code examples run
# as tests in `make test` (tests/test_docs.py).
DOCS_VENV  ?= .venv-docs
DOCS_STAMP := $(DOCS_VENV)/.installed

$(DOCS_STAMP): pyproject.toml
	test -x $(DOCS_VENV)/bin/python || $(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(DOCS_VENV)/bin/python -m pip install --quiet -e ".[docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict

BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[dev,bench]"
	touch $(BENCH_STAMP)

# The OpenFHE peer of `crossfhe bench ckks`: its wheels are built for CPython 3.10 only, so it gets its own
# environment (benchmarks/openfhe_peer.py runs in it). Optional: without it the OpenFHE columns are empty.
OPENFHE_PYTHON ?= python3.10
OPENFHE_WHEEL  ?= openfhe==1.6.1.0.22.4

openfhe-peer:
	@py=$(OPENFHE_PYTHON); $$py -c "" 2>/dev/null || py=$$(ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.10*/bin/python 2>/dev/null | tail -n 1); \
	test -n "$$py" || { echo "no $(OPENFHE_PYTHON): OpenFHE's wheels need CPython 3.10 (set OPENFHE_PYTHON=...)"; exit 1; }; \
	test -x .venv-openfhe/bin/python || $$py -m venv .venv-openfhe
	.venv-openfhe/bin/python -m pip install --quiet "$(OPENFHE_WHEEL)"

bench: $(BENCH_STAMP)
	$(BIN)/crossfhe bench ntt
	$(BIN)/crossfhe bench ckks
	$(BIN)/crossfhe bench hmvp
	$(BIN)/crossfhe bench tfhe
	$(BIN)/crossfhe bench kernels
	$(BIN)/crossfhe bench circuits
	$(BIN)/crossfhe bench bootstrap

bench-quick: $(BENCH_STAMP)
	$(BIN)/crossfhe bench ntt --quick
	$(BIN)/crossfhe bench ckks --quick
	$(BIN)/crossfhe bench hmvp --quick
	$(BIN)/crossfhe bench tfhe --quick
	$(BIN)/crossfhe bench kernels --quick
	$(BIN)/crossfhe bench circuits --quick
	$(BIN)/crossfhe bench bootstrap --quick
	$(BIN)/crossfhe bench profile --quick

clean:
	rm -rf $(VENV) .jax_cache .native_cache .pytest_cache .ruff_cache benchmarks/results benchmarks/ntt_peer/target site $(DOCS_VENV) .venv-min
