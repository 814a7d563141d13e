#!/usr/bin/env bash
# The test command: set up (idempotent, fast the second time), then the whole pytest suite on CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q -rs --durations=15 -p no:cacheprovider tests "$@"  # -rs: every skip and its reason; the 15 slowest tests
