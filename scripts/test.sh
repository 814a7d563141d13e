#!/usr/bin/env bash
# The test command: set up (idempotent, fast the second time), then the whole pytest suite on CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# -n 2 --dist loadfile: two worker processes (pytest-xdist), each taking whole test files, so that a file's module-scoped
# fixtures (a trained run, a prepared dataset) are built once; the tests' subprocesses run on one thread each
# (tests/conftest.py), so two workers keep both cores of a 2-core CI machine busy. -rs: every skip and its reason;
# --durations=15: the 15 slowest tests.
exec .venv/bin/python -m pytest -q -rs --durations=15 -p no:cacheprovider -n 2 --dist loadfile tests "$@"
