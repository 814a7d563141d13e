#!/usr/bin/env bash
# The main job: on a fresh machine, set up, generate SCAN with our own code (no download), train the
# baseline Transformer and the Relative Universal Transformer of Csordás et al. (2021) on the length
# re-split with cutoff 26 for a CPU-sized budget, evaluate both on the IID and generalization sets with
# greedy decoding, and print a table.
#
#   bash scripts/main.sh                    # ~15 minutes on 2 CPU cores after setup
#   MAIN_UPDATES=50000 MAIN_FLAGS="" bash scripts/main.sh   # the paper's full budget (use a GPU)
#
# Environment: MAIN_UPDATES (default 1000), MAIN_OUT (default runs/main), MAIN_SEED (default 1),
# MAIN_FLAGS (extra fairseq-train flags; default "--cpu").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# shellcheck disable=SC1091
. .venv/bin/activate
updates=${MAIN_UPDATES:-1000} out=${MAIN_OUT:-runs/main} seed=${MAIN_SEED:-1}
flags=${MAIN_FLAGS---cpu}
data=data/scan/length_cutoff_26/bin

python data-prep/scan.py --split length_cutoff_26 --out data/scan
archs=(compgen_transformer_scan rel_uni_transformer_scan)
echo "main: training ${archs[*]} for $updates updates each (batch 256, lr 1e-3, Table 4), in parallel"
pids=()
for arch in "${archs[@]}"; do
  mkdir -p "$out/$arch"
  # One thread per run: two small models train faster side by side than one after the other on 2 cores.
  OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 bash scripts/train_csordas.sh scan "$arch" "$data" "$out/$arch" $flags \
    --seed "$seed" --max-update "$updates" --validate-interval-updates "$updates" \
    --save-interval-updates "$updates" --num-workers 0 > "$out/$arch/train.log" 2>&1 &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { echo "main: training ${archs[$i]} failed; see $out/${archs[$i]}/train.log" >&2; tail -20 "$out/${archs[$i]}/train.log" >&2; exit 1; }
done
for arch in "${archs[@]}"; do
  echo "main: evaluating $arch (checkpoint_last.pt: no early stopping)"
  GENERATE_FLAGS="$flags" bash scripts/evaluate.sh "$out/$arch/checkpoint_last.pt" "$data" valid gen 2>/dev/null
done
python - "$out" "$updates" "${archs[@]}" <<'PY'
import json, sys
out, updates, archs = sys.argv[1], sys.argv[2], sys.argv[3:]
paper = {"compgen_transformer_scan": "1.00 / 0.30 ± 0.02", "rel_uni_transformer_scan": "1.00 / 1.00 ± 0.00"}
print(f"\nSCAN length cutoff 26, greedy exact-match accuracy after {updates} updates (seed in {out}):")
print(f"| arch | IID valid | generalization | Csordás et al. 2021 at 50k updates (IID / gen) |")
print(f"|---|---|---|---|")
for a in archs:
    r = {s: json.load(open(f"{out}/{a}/eval/{s}.json")) for s in ("valid", "gen")}
    cells = " | ".join(f"{r[s]['accuracy']:.3f} ({r[s]['correct']}/{r[s]['n']})" for s in ("valid", "gen"))
    print(f"| {a} | {cells} | {paper[a]} |")
PY
