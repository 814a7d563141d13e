#!/usr/bin/env bash
# beam-stop and search-error measurements again, after 3c185b4: no decoding here has a length limit read from the
# references (eval's greedy exact-match limit is avoided by giving fairseq's own --max-len-b 200 explicitly; a beam gets it by default)
set -euo pipefail
cd /work/main
. .venv/bin/activate
R=/work/campaign/runs
D=/work/campaign/data/scan/length_cutoff_26/bin
OUT=/tmp/rerun
ev() {  # name run tag flags subsets...
  local name=$1 run=$2 tag=$3 flags=$4; shift 4
  [ -f $OUT/$name/$tag/gen.json ] && { echo "$name $tag already"; return; }
  local start=$(date +%s)
  OMP_NUM_THREADS=1 fairseq-compgen eval $R/$run/checkpoint_last.pt $D "$@" --cpu --generate-flags "$flags" \
    --out $OUT/$name/$tag > $OUT/$name.$tag.log 2>&1
  echo "$name $tag $(( $(date +%s) - start )) s"
}
for cfg in lt lt_l2_orth; do for s in 1 2 3; do
  ev random_batches_5k_${cfg}_seed$s scan26_5k_random_batches/scan/$cfg/seed$s beam4_bound "--beam 4 --beam-stop bound" gen
  ev random_batches_5k_${cfg}_seed$s scan26_5k_random_batches/scan/$cfg/seed$s greedy "--max-len-b 200" gen
done; done
for pair in rel_uni_5k_random_batches_seed2:scan26_5k_random_batches/scan/rel_uni_trafo/seed2 \
            rel_uni_5k_random_batches_seed3:scan26_5k_random_batches/scan/rel_uni_trafo/seed3 \
            park_kim_50k_lt_l2_orth_seed2:park_kim_scan26_50k/scan/lt_l2_orth/seed2; do
  name=${pair%%:*}; run=${pair#*:}
  ev $name $run greedy "--max-len-b 200" gen valid
  ev $name $run beam4 "--beam 4" gen valid
  ev $name $run beam4_bound "--beam 4 --beam-stop bound" gen valid
  ev $name $run beam4_bound_unnormalized "--beam 4 --beam-stop bound --unnormalized" gen valid
done
echo all decoded
