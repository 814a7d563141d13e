#!/usr/bin/env bash
# campaign/search_errors.py on the decodes of run3.sh (no length limit from the references)
set -euo pipefail
cd /work/main
. .venv/bin/activate
R=/work/campaign/runs
D=/work/campaign/data/scan/length_cutoff_26/bin
mkdir -p /tmp/rerun/se
one() {  # name run tag subset
  OMP_NUM_THREADS=1 python campaign/search_errors.py $R/$2/checkpoint_last.pt $D /tmp/rerun/$1/$3/$4.outputs.gz \
    --json /tmp/rerun/se/$1_$3_$4.json > /tmp/rerun/se/$1_$3_$4.log 2>&1
  echo "$1 $3 $4: $(head -n 1 /tmp/rerun/se/$1_$3_$4.log)"
}
for cfg in lt lt_l2_orth; do for s in 1 2 3; do for tag in greedy beam4_bound; do
  one random_batches_5k_${cfg}_seed$s scan26_5k_random_batches/scan/$cfg/seed$s $tag gen
done; done; done
for pair in rel_uni_5k_random_batches_seed2:scan26_5k_random_batches/scan/rel_uni_trafo/seed2 \
            rel_uni_5k_random_batches_seed3:scan26_5k_random_batches/scan/rel_uni_trafo/seed3 \
            park_kim_50k_lt_l2_orth_seed2:park_kim_scan26_50k/scan/lt_l2_orth/seed2; do
  for tag in greedy beam4_bound; do for subset in gen valid; do one ${pair%%:*} ${pair#*:} $tag $subset; done; done
done
echo all classified
