#!/usr/bin/env bash
# The main job: on a fresh machine, set up, generate SCAN with our own code (no download), train the baseline
# Transformer and the Relative Universal Transformer of Csordás et al. (2021) side by side on the length re-split
# with cutoff 26 (Table 4's hyperparameters, one CPU thread each), record their learning curves (in-loop exact
# match on the IID and generalization sets every MAIN_EVAL_EVERY updates), evaluate the last checkpoints with
# greedy fairseq-generate, print a table (and the generalization set's accuracy per output length) and write the
# curves as a PNG.
#
#   bash scripts/main.sh                        # ~13 minutes on 2 idle CPU cores after setup (2,000 updates each)
#   MAIN_UPDATES=6000 MAIN_OUT=runs/main6000 bash scripts/main.sh   # longer: rel-uni's gen keeps rising (docs/results.md)
#   MAIN_OUT=runs/main_random bash scripts/main.sh -- --random-batches   # after --: fairseq-train flags for both models
#
# MAIN_OUT must be new or empty: an earlier run's folder is never written over (choose another MAIN_OUT, or remove it).
#
# Environment: MAIN_UPDATES (default 2000), MAIN_EVAL_EVERY (default 250), MAIN_OUT (default runs/main),
# MAIN_SEED (default 1). The curve: MAIN_OUT/curve.png and MAIN_OUT/curve.json (benchmarks/time_to_accuracy.py).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  echo "main: unexpected argument '$1': expected none, or -- and fairseq-train flags for both models (e.g. -- --random-batches); settings are MAIN_* variables (this script's header)" >&2
  exit 2
fi
extra=("${@:2}")  # the fairseq-train flags after --, passed to both trainers (benchmarks/time_to_accuracy.py)
bash scripts/setup.sh
# shellcheck disable=SC1091
. .venv/bin/activate
updates=${MAIN_UPDATES:-2000} every=${MAIN_EVAL_EVERY:-250} out=${MAIN_OUT:-runs/main} seed=${MAIN_SEED:-1}
data=data/scan/length_cutoff_26/bin
if [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "main: $out holds an earlier run (checkpoints, curve.json): expected a new or empty MAIN_OUT; set MAIN_OUT to another folder, or remove $out to start again" >&2
  exit 1
fi
archs=(compgen_transformer_scan rel_uni_transformer_scan)

fairseq-compgen prep scan --split length_cutoff_26 --out data/scan
echo "main: training ${archs[*]} for $updates updates each, side by side, one thread each (batch 256, lr 1e-3, Table 4)${extra[*]:+; with ${extra[*]}}"
python benchmarks/time_to_accuracy.py "$data" --archs "${archs[@]}" --seeds "$seed" --updates "$updates" \
  --eval-every "$every" --threads 1 --runs "$out" --out "$out/curve" \
  --title "SCAN length cutoff 26 (Csordás et al. 2021, Table 3): exact match during training" \
  -- ${extra[@]+"${extra[@]}"}
for arch in "${archs[@]}"; do
  echo "main: evaluating $arch (checkpoint_last.pt: no early stopping) with greedy fairseq-generate"
  # fairseq's log lines go to the run's eval.log; on failure its end is shown, so no error is hidden
  log="$out/${arch}_s$seed/eval.log"
  if ! fairseq-compgen eval "$out/${arch}_s$seed/checkpoint_last.pt" "$data" valid gen --cpu 2>"$log"; then
    echo "main: evaluation of $arch failed; the end of $log:" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
done
python - "$out" "$updates" "$seed" "${archs[@]}" <<'PY'
import json, sys
out, updates, seed, archs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
paper = {"compgen_transformer_scan": "1.00 / 0.30 ± 0.02", "rel_uni_transformer_scan": "1.00 / 1.00 ± 0.00"}
curve = {(r["arch"]): r for r in json.load(open(f"{out}/curve.json"))["runs"]}
print(f"\nSCAN length cutoff 26, greedy exact-match accuracy after {updates} updates (seed {seed}; fairseq-generate):")
print("| arch | IID valid | generalization | in-loop accuracy at the last update (valid / gen) | Csordás et al. 2021, 50k updates (IID / gen) |")
print("|---|---|---|---|---|")
for a in archs:
    r = {s: json.load(open(f"{out}/{a}_s{seed}/eval/{s}.json")) for s in ("valid", "gen")}
    cells = " | ".join(f"{r[s]['accuracy']:.3f} ({r[s]['correct']}/{r[s]['n']})" for s in ("valid", "gen"))
    last = curve[a]["points"][-1] if curve[a]["points"] else None
    loop = f"{last['valid']['accuracy']:.3f} / {last['gen']['accuracy']:.3f} ({last['updates']})" if last else "-"
    print(f"| {a} | {cells} | {loop} | {paper[a]} |")
# where the generalization set is lost: its outputs are 27-48 actions long, training's at most 26
gen = {a: json.load(open(f"{out}/{a}_s{seed}/eval/gen.json"))["per_length"] for a in archs}
print("\ngeneralization set by output length (actions): exact match (right / examples)")
print("| output length | " + " | ".join(archs) + " |")
print("|---|" + "---|" * len(archs))
for length in sorted(gen[archs[0]], key=int):
    print(f"| {length} | " + " | ".join(f"{gen[a][length]['accuracy']:.3f} ({gen[a][length]['correct']}/"
                                         f"{gen[a][length]['n']})" for a in archs) + " |")
print(f"\nlearning curves: {out}/curve.png (data: {out}/curve.json)")
PY
