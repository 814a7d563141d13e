#!/usr/bin/env bash
set -euo pipefail
cd /work/main
. .venv/bin/activate
R=/work/campaign/runs/scan26_5k_random_batches/scan
for cfg in lt lt_l2_orth; do for s in 1 2 3; do
  OMP_NUM_THREADS=1 fairseq-compgen eval $R/$cfg/seed$s/checkpoint_last.pt /work/campaign/data/scan/length_cutoff_26/bin gen --cpu \
    --generate-flags "--beam 4 --beam-stop bound" --out /tmp/bsm/out2/random_batches_5k_${cfg}_seed$s/beam4_bound > /tmp/bsm/out2.$cfg.$s.log 2>&1
  echo "$cfg $s done"
done; done
