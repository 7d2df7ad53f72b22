# One command per job. `make test` and `make demo` work on a fresh machine: they create
# .venv, build the Rust extension with maturin through pip, and run.
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml Cargo.toml rust/core/Cargo.toml rust/python/Cargo.toml | cksum | cut -d' ' -f1)

.PHONY: help dev test test-rust test-python lint rust-lint-tools wheel wheel-test demo bench bench-check all clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml Cargo.toml Cargo.lock rust/core/Cargo.toml rust/python/Cargo.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[cli,test,lint]'
	rm -f $(VENV)/.installed-* && touch $@

dev: $(STAMP)  ## create .venv and build the extension (editable install)
	$(PY) -m pip install --quiet --no-deps --force-reinstall -e .

test: dev test-rust test-python  ## set up, then run every test (cargo test + pytest)

test-rust:
	cargo test --workspace --exclude ledgerfold-python

test-python:
	$(PY) -m pytest

lint: $(STAMP) rust-lint-tools  ## ruff, mypy --strict, stubtest, rustfmt, clippy -D warnings
	$(VENV)/bin/ruff check python tests benches
	$(VENV)/bin/ruff format --check python tests benches
	$(VENV)/bin/mypy --strict python/ledgerfold
	$(PY) -m mypy.stubtest ledgerfold._native
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings

# rustfmt and clippy are rustup components that a minimal toolchain does not have.
rust-lint-tools:
	@cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
	@cargo clippy --version >/dev/null 2>&1 || rustup component add clippy

# The wheel users install: release profile, stable ABI (one wheel for CPython >= 3.10).
# maturin: the range of pyproject's build-system.requires.
wheel: $(STAMP)  ## build the abi3 release wheel into dist/
	$(PY) -m pip install --quiet 'maturin>=1.9.4,<2'
	rm -f dist/ledgerfold-*.whl
	$(PY) -m maturin build --release --features abi3 --out dist

WHEEL_PYTHON ?= $(PYTHON)

wheel-test: wheel  ## install the wheel into a fresh venv (no Rust, no checkout) and run the README
	tests/wheel_test.sh dist/ledgerfold-*-abi3-*.whl $(WHEEL_PYTHON)

demo: dev  ## set up, then run the main job (ledgerfold demo)
	$(VENV)/bin/ledgerfold demo

BENCH_RUN := $(PY) -m pytest benches --benchmark-enable --benchmark-only

bench: dev  ## run the benchmarks for real, save the run, regenerate benches/RESULTS.md
	mkdir -p .benchmarks
	$(BENCH_RUN) --benchmark-autosave --benchmark-json=.benchmarks/last.json
	$(PY) benches/report.py .benchmarks/last.json -o benches/RESULTS.md

# pytest-benchmark takes a file path as a saved run to compare against.
bench-check: dev  ## run the benchmarks; fail on a median regression > 25% vs benches/baseline.json
	$(BENCH_RUN) --benchmark-compare=benches/baseline.json --benchmark-compare-fail=median:25%

all: lint test  ## lint and test

clean:
	rm -rf $(VENV) target .pytest_cache .hypothesis .benchmarks
