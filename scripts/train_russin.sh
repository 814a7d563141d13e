#!/usr/bin/env bash
# fairseq-train for Syntactic Attention on SCAN add-jump as Russin et al. (2019) ran it (spec_002_004 B2.2-B3):
# arch syntactic_attention_scan (m 120, syntactic 200, h and decoder 400, dropout 0.5 on both embeddings),
# Adam lr 1e-3 (PyTorch betas/eps), no weight decay, gradient-norm clipping 5.0 (authors' code), cross-entropy.
#
#   scripts/train_russin.sh MODE SPLIT_DIR SAVE_DIR [extra fairseq-train flags...]
#   MODE: paper   batch size 1, 200,000 updates (about 17 epochs of 11,736 examples), validation every 5 epochs
#         batched batch size 32, 25,000 updates (about 68 epochs), validation every 1,000 updates (our choice;
#                 not the paper's protocol and not tuned: same lr and clipping, much faster per epoch)
#   SPLIT_DIR: data/scan/addprim_jump, made by  python data-prep/scan.py --split addprim_jump --out data/scan
#   e.g. scripts/train_russin.sh paper data/scan/addprim_jump runs/russin_s1 --seed 1
#   then scripts/evaluate.sh runs/russin_s1/checkpoint_best.pt data/scan/addprim_jump/russin/bin test
#
# Validation: the paper holds out 20% of the training file (Bastings et al.) and keeps the checkpoint with the best
# validation score (early stopping). The authors' cut is the last 20% in file order; our generated train file is in
# grammar order (all 'jump' copies at its end), so we shuffle it once with a fixed seed (0) and hold out the last
# 20%: SPLIT_DIR/russin/{train,valid,test}.{src,tgt}, binarized once into SPLIT_DIR/russin/bin with the split's
# dictionaries. checkpoint_best.pt is selected by greedy exact-match `accuracy` on valid (first --valid-subset).
#
# Metric: `accuracy` (greedy to the first EOS; every token and the length must match) is the paper's number: the
# decoder never reads its own outputs, so it equals the authors' check_accuracy (decode the gold length incl.
# <EOS>, compare every token). `oracle_accuracy` (EOS forbidden, gold length) is logged beside it and is more
# lenient. Paper: median 91.0%, mean 78.4% over 25 seeds; runs whose training accuracy never exceeded 10% were
# excluded there (check train accuracy with scripts/evaluate.sh ... train). Report per-seed values and the median.
#
# paper vs batched: at batch 1 the loss is each sequence's mean token NLL, as in the authors' code; batched,
# fairseq averages over all target tokens of the batch (long outputs weigh more) and takes 32x fewer Adam steps
# per epoch. Padding is handled exactly in the model (packed LSTMs, masked attention), so batching changes the
# optimisation, not the function computed. Extra flags win (fairseq takes the last occurrence), e.g. --cpu.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,13p' "$0"; exit 2; }
mode=$1 split=$2 save=$3; shift 3
[ -f "$split/train.src" ] && [ -f "$split/bin/dict.src.txt" ] || {
  echo "train_russin.sh: $split lacks train.src or bin/dict.src.txt: run data-prep/scan.py --split addprim_jump" >&2; exit 2; }
case $mode in
  paper)   flags=(--batch-size 1 --max-update 200000 --validate-interval 5 --save-interval 5) ;;
  batched) flags=(--batch-size 32 --max-update 25000 --validate-interval 1000000 --validate-interval-updates 1000
                  --save-interval 1000000 --save-interval-updates 1000 --keep-interval-updates 1) ;;
  *) echo "train_russin.sh: MODE must be paper or batched, got '$mode'" >&2; exit 2 ;;
esac

russin=$split/russin
if [ ! -f "$russin/bin/valid.src-tgt.src.idx" ]; then
  tmp=$(mktemp -d "$split/.russin.XXXXXX")
  python - "$split" "$tmp" <<'PY'
import random, shutil, sys
split, out = sys.argv[1:]
src = open(f"{split}/train.src", encoding="utf-8").read().splitlines()
tgt = open(f"{split}/train.tgt", encoding="utf-8").read().splitlines()
assert len(src) == len(tgt), "train.src and train.tgt differ in length"
order = list(range(len(src)))
random.Random(0).shuffle(order)
cut = int(0.8 * len(order))  # the authors' split_id = int(0.8 * len)
for name, idx in (("train", order[:cut]), ("valid", order[cut:])):
    for side, lines in (("src", src), ("tgt", tgt)):
        with open(f"{out}/{name}.{side}", "w", encoding="utf-8") as f:
            f.writelines(lines[i] + "\n" for i in idx)
for side in ("src", "tgt"):
    shutil.copy(f"{split}/test.{side}", f"{out}/test.{side}")
print(f"train_russin.sh: {cut} train / {len(order) - cut} valid lines (seed-0 shuffle of {split}/train)")
PY
  python -m fairseq_cli.preprocess --source-lang src --target-lang tgt --trainpref "$tmp/train" \
    --validpref "$tmp/valid" --testpref "$tmp/test" --srcdict "$split/bin/dict.src.txt" \
    --tgtdict "$split/bin/dict.tgt.txt" --destdir "$tmp/bin" --workers 1 > "$tmp/preprocess.log" 2>&1 \
    || { cat "$tmp/preprocess.log" >&2; exit 1; }
  rm -rf "$russin"; mv "$tmp" "$russin"
fi

cmd=(fairseq-train "$russin/bin" --user-dir "$(cd "$(dirname "$0")/.." && pwd)/fairseq_compgen"
  --task compgen --arch syntactic_attention_scan --criterion cross_entropy
  --optimizer adam --adam-betas '(0.9, 0.999)' --adam-eps 1e-8 --weight-decay 0 --lr 1e-3 --lr-scheduler fixed
  --clip-norm 5 --required-batch-size-multiple 1 "${flags[@]}" --batch-size-valid 256
  --valid-subset valid,test --eval-oracle-length --no-epoch-checkpoints
  --best-checkpoint-metric accuracy --maximize-best-checkpoint-metric
  --log-format simple --log-interval 1000 --save-dir "$save" "$@")
# shellcheck source=lib/record.sh
. "$(dirname "$0")/lib/record.sh"
record "$save" command.txt "${cmd[@]}"
record "$save" commit.txt "$(git -C "$(dirname "$0")/.." rev-parse HEAD 2>/dev/null || echo unknown)"
exec "${cmd[@]}"
