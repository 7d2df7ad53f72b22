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
# First the wheel alone: the library needs nothing else, and imports no CLI library, no
# Parquet or Dask (issue 26 item 5); the console script says how to get the `cli` extra.
PATH="$work/venv/bin:/usr/bin:/bin" "$work/venv/bin/python" -m pip install --quiet \
    --disable-pip-version-check --only-binary=:all: "$wheel"
(cd "$work" && "$work/venv/bin/python" - <<'EOF'
import sys

import ledgerfold
import ledgerfold.adapters
import ledgerfold.revalidate
import ledgerfold.store
import ledgerfold.summarizers
import ledgerfold.tokens

loaded = sorted({name.split(".")[0] for name in sys.modules} & {"click", "rich", "pyarrow", "dask"})
assert not loaded, f"import ledgerfold loaded {loaded}"
print("wheel-test: the wheel alone imports no click, rich, pyarrow or dask")
EOF
)
set +e
message=$("$work/venv/bin/ledgerfold" list "$work/none.db" 2>&1 >/dev/null)
status=$?
set -e
[ "$status" -eq 2 ] || { echo "wheel-test: the script without click exited $status"; exit 1; }
[ "$(printf '%s\n' "$message" | wc -l)" -eq 1 ] || { echo "wheel-test: not one line: $message"; exit 1; }
case "$message" in *"ledgerfold[cli]"*) ;; *) echo "wheel-test: no install hint: $message"; exit 1;; esac
echo "wheel-test: without the cli extra the script says: $message"

# Then the extras whose examples the README and docs/integrations.md run (the command line,
# OpenAI, Agents SDK, LangChain, tiktoken).
PATH="$work/venv/bin:/usr/bin:/bin" "$work/venv/bin/python" -m pip install --quiet \
    --disable-pip-version-check --only-binary=:all: "$wheel[cli,openai,openai-agents,langgraph,tiktoken]" pytest

# tests/test_readme.py finds README.md (and docs/integrations.md, whose examples it runs too)
# from its own place; its tests of the examples run here (those of the links need the
# checkout's docs/ and run in the suite).
mkdir -p "$work/project/tests" "$work/project/docs"
cp "$checkout/README.md" "$work/project/"
cp "$checkout/docs/integrations.md" "$work/project/docs/"
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
