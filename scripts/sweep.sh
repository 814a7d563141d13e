#!/usr/bin/env bash
# Run a sweep, then aggregate it into tables and plots (see fairseq_compgen/pipelines/sweep.py and aggregate.py).
#
#   scripts/sweep.sh SWEEP.yaml [sweep options: --out DIR --jobs N --devices 0,1 --cpu --threads N --only GLOB]
#
# Rerunning the same command resumes: finished runs are skipped, interrupted ones continue from checkpoint_last.pt.
# The table is written to OUT/table.md and OUT/table.csv, plots to OUT/plots/ (aggregate with --best).
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,7p' "$0"; exit 2; }
py=${PYTHON:-python}
out=""
args=("$@")
for ((i = 1; i < $#; i++)); do [ "${args[$i]}" = --out ] && out=${args[$((i + 1))]}; done
rc=0
"$py" -m fairseq_compgen.pipelines.sweep "$@" || rc=$?
[ "$rc" -ne 130 ] || exit "$rc"
[ -n "$out" ] || out=$("$py" -c 'import sys, yaml; from pathlib import Path; s = yaml.safe_load(open(sys.argv[1])); print(s.get("output") or Path("runs") / s.get("name", Path(sys.argv[1]).stem))' "$1")
"$py" -m fairseq_compgen.pipelines.aggregate "$out" --best
exit "$rc"
