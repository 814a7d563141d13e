#!/usr/bin/env bash
# beam-stop measurement: greedy, fairseq's beam 4, --beam-stop bound beam 4 (normalized, and --unnormalized)
set -euo pipefail
cd /work/main
. .venv/bin/activate
R=/work/campaign/runs
OUT=/tmp/bsm/out
for pair in rel_uni_5k_random_batches_seed2:scan26_5k_random_batches/scan/rel_uni_trafo/seed2 \
            rel_uni_5k_random_batches_seed3:scan26_5k_random_batches/scan/rel_uni_trafo/seed3 \
            park_kim_50k_lt_l2_orth_seed2:park_kim_scan26_50k/scan/lt_l2_orth/seed2; do
  name=${pair%%:*}; run=${pair#*:}
  for v in "greedy:" "beam4:--beam 4" "beam4_bound:--beam 4 --beam-stop bound" "beam4_bound_unnormalized:--beam 4 --beam-stop bound --unnormalized"; do
    tag=${v%%:*}; flags=${v#*:}
    start=$(date +%s)
    OMP_NUM_THREADS=1 fairseq-compgen eval $R/$run/checkpoint_last.pt /work/campaign/data/scan/length_cutoff_26/bin gen valid --cpu \
      --generate-flags "$flags" --out $OUT/$name/$tag > $OUT.$name.$tag.log 2>&1
    echo "$name $tag $(( $(date +%s) - start )) s"
  done
done
