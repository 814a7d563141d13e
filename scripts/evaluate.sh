#!/usr/bin/env bash
# Greedy fairseq-generate on each subset, then exact-match scoring (per category where DATA_BIN/<subset>.cat exists).
#
#   scripts/evaluate.sh CHECKPOINT DATA_BIN [SUBSET ...]      (default subsets: every one in DATA_BIN but train)
#
# For COGS tagging data (a data-prep/cogs_tagging.py folder, with <subset>.parent files), the compgen_tagger
# checkpoint is decoded by fairseq_compgen.tasks.cogs_tagging_generate instead, which prints the same format.
# Writes, beside the checkpoint, eval/<subset>.generate.txt (fairseq-generate's output) and eval/<subset>.json
# ({"n", "correct", "accuracy", "per_category"}), and prints one line per subset. Extra fairseq-generate flags
# can be passed in GENERATE_FLAGS (e.g. GENERATE_FLAGS="--cpu --batch-size 128"). The scorer checks that every
# example of the subset received exactly one hypothesis.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,11p' "$0"; exit 2; }
ckpt=$1 data=$2; shift 2
[ -f "$ckpt" ] || { echo "evaluate.sh: no checkpoint at $ckpt" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
subsets=("$@")
tagging=0
ls "$data"/*.parent > /dev/null 2>&1 && tagging=1
if [ ${#subsets[@]} -eq 0 ]; then
  pattern='*.src-*.idx'
  [ $tagging = 1 ] && pattern='*.parent'
  mapfile -t subsets < <(cd "$data" && ls $pattern 2>/dev/null | sed 's/\..*//' | sort -u | grep -vx train)
  [ ${#subsets[@]} -gt 0 ] || { echo "evaluate.sh: $data has no binarized subset other than train ($pattern): nothing to evaluate" >&2; exit 2; }
fi
out=$(dirname "$ckpt")/eval
mkdir -p "$out"
for subset in "${subsets[@]}"; do
  if [ $tagging = 1 ]; then
    [ -f "$data/$subset.src" ] || { echo "evaluate.sh: no tagging subset $subset in $data" >&2; exit 2; }
    n=$(wc -l < "$data/$subset.src")
    python -m fairseq_compgen.tasks.cogs_tagging_generate "$ckpt" "$data" --gen-subset "$subset" \
      ${GENERATE_FLAGS:-} > "$out/$subset.generate.txt.tmp"
  else
    # examples in the subset, and its longest reference (tokens + EOS): decoding longer cannot produce an exact
    # match (Csordás et al. decode at most the longest target + 1), and an untrained model that never emits EOS
    # would otherwise decode to --max-len-b for every batch; --max-len-from-target caps each batch at its own
    # longest reference the same way.
    read -r n maxlen < <(python - "$data" "$subset" <<'PY'
import glob, sys
from fairseq.data import data_utils
data, subset = sys.argv[1:]
src = glob.glob(f"{data}/{subset}.*-*.src.idx") or sys.exit(f"evaluate.sh: no binarized subset {subset!r} in {data}")
tgt = data_utils.load_indexed_dataset(src[0][: -len("src.idx")] + "tgt", None)
print(len(tgt), int(tgt.sizes.max()))
PY
)
    [ -n "${maxlen:-}" ] || { echo "evaluate.sh: could not read subset $subset of $data" >&2; exit 2; }
    # --min-len 0: fairseq forbids EOS at the first step by default, which would give an empty prediction a second
    # chance; Csordás et al.'s greedy decoding (and the task's validation `accuracy`) has no minimum length.
    fairseq-generate "$data" --user-dir "$root/fairseq_compgen" --task compgen --path "$ckpt" --gen-subset "$subset" \
      --beam 1 --nbest 1 --min-len 0 --max-len-a 0 --max-len-b "$maxlen" --max-len-from-target \
      --batch-size 256 --required-batch-size-multiple 1 \
      ${GENERATE_FLAGS:-} > "$out/$subset.generate.txt.tmp"
  fi
  mv "$out/$subset.generate.txt.tmp" "$out/$subset.generate.txt"
  cats=()
  [ -f "$data/$subset.cat" ] && cats=(--categories "$data/$subset.cat")
  python -m fairseq_compgen.scoring.exact_match "$out/$subset.generate.txt" --expected-count "$n" \
    --json "$out/$subset.json" "${cats[@]}" > "$out/$subset.table.txt"
  python -c "import json,sys; r=json.load(open(sys.argv[1])); print(f'{sys.argv[2]:8s} n={r[\"n\"]:6d} exact-match accuracy={r[\"accuracy\"]:.4f}')" \
    "$out/$subset.json" "$subset"
done
