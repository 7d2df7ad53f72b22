#!/usr/bin/env bash
# Installs a built wheel the way a user does and runs the README's examples against it:
# a fresh virtualenv in a temporary directory, binaries only (nothing is compiled, so no
# Rust toolchain), and the checkout nowhere on the path.
# Usage: tests/wheel_test.sh WHEEL [PYTHON]   (`make wheel-test` builds the wheel first)
set -euo pipefail
wheel=$(realpath "$1")
python=${2:-python3}
checkout=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" -m venv "$work/venv"
# cargo lives in ~/.cargo/bin: leave it off PATH so that nothing could build from source.
# With the extras whose examples the README runs (OpenAI, Agents SDK, LangChain, tiktoken).
PATH="$work/venv/bin:/usr/bin:/bin" "$work/venv/bin/python" -m pip install --quiet \
    --disable-pip-version-check --only-binary=:all: "$wheel[openai,openai-agents,langgraph,tiktoken]" pytest

# tests/test_readme.py finds README.md from its own place; its tests of the examples run here
# (the one of the README's links needs the checkout's docs/ and runs in the suite).
mkdir -p "$work/project/tests"
cp "$checkout/README.md" "$work/project/"
cp "$checkout/tests/test_readme.py" "$work/project/tests/"

cd "$work/project"
# One interpreter for the check and the tests: the ledgerfold the README's examples import
# is the one checked here.
"$work/venv/bin/python" - <<'EOF'
import sys
from pathlib import Path

import ledgerfold
import ledgerfold._native

venv = Path(sys.prefix).resolve()
package = Path(ledgerfold.__file__).resolve()
native = Path(ledgerfold._native.__file__).resolve()
assert package.is_relative_to(venv), f"ledgerfold came from {package}, not from {venv}"
assert native.name.endswith(".abi3.so"), f"not a stable-ABI build: {native.name}"
print(f"wheel-test: Python {sys.version.split()[0]}, ledgerfold from {package.parent}")

import pytest

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-k", "examples", "tests/test_readme.py"]))
EOF
