#!/usr/bin/env bash
# fairseq-train with the training hyperparameters of Csordás et al. (2021), Table 4 and spec_000 §3/§5:
# Adam (PyTorch defaults), no label smoothing, no early stopping, fixed step budget, dropout 0.1 (in the arch).
#
#   scripts/train_csordas.sh DATASET ARCH DATA_BIN SAVE_DIR [extra fairseq-train flags...]
#   DATASET: scan | cfq | cfq_universal | pcfg | cogs | cogs_noam | math
#   e.g. scripts/train_csordas.sh scan rel_uni_transformer_scan data/scan/length_cutoff_26/bin runs/rel_uni_s1 --seed 1
#
# Extra flags win over the defaults (fairseq takes the last occurrence), e.g. --max-update 2000 for a short run,
# --cpu on a machine without GPU, --fp16 where the authors used AMP (CFQ, PCFG, Math).
# Validation logs greedy exact-match `accuracy` (computed from one teacher-forced pass) on every subset given by
# VALID_SUBSETS (default: every subset in DATA_BIN other than train, IID first); report the last checkpoint (no
# early stopping).
set -euo pipefail
# OpenMP threads wait passively: with the default busy-waiting, a 2-thread CPU run that shares the cores with
# another process measured 1.6-8x slower per step (README, "Speed on CPU"). A run that has the machine to itself
# is faster with busy-waiting: OMP_WAIT_POLICY=ACTIVE scripts/... sets it back.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
[ $# -ge 4 ] || { sed -n '2,13p' "$0"; exit 2; }
dataset=$1 arch=$2 data=$3 save=$4; shift 4
[ -f "$data/dict.src.txt" ] || { echo "train_csordas.sh: $data has no dict.src.txt: is it a fairseq-preprocess folder?" >&2; exit 2; }
ls "$data"/train.*.idx > /dev/null 2>&1 || { echo "train_csordas.sh: $data has dictionaries but no binarized train subset (train.*.idx): re-run the data-prep command" >&2; exit 2; }

# Noam as the authors define it: lr_base * d^-0.5 * min(step^-0.5, step * warmup^-1.5) peaks at
# lr_base / sqrt(d * warmup), which is fairseq's inverse_sqrt schedule with that peak.
noam() { python3 -c "import math,sys; print(float(sys.argv[1]) / math.sqrt(float(sys.argv[2]) * float(sys.argv[3])))" "$@"; }
case $dataset in
  #           batch  lr-flags                                                                   updates clip  eval
  scan)          b=256;  lr=(--lr 1e-3 --lr-scheduler fixed);                                       n=50000;  c=5;   e=1000 ;;
  cfq)           b=4096; lr=(--lr "$(noam 0.9 128 4000)" --lr-scheduler inverse_sqrt --warmup-updates 4000 --warmup-init-lr 0); n=50000; c=1; e=1000 ;;
  cfq_universal) b=2048; lr=(--lr "$(noam 2.24 256 8000)" --lr-scheduler inverse_sqrt --warmup-updates 8000 --warmup-init-lr 0); n=50000; c=1; e=1000 ;;
  pcfg)          b=64;   lr=(--lr 1e-4 --lr-scheduler fixed);                                       n=300000; c=1;   e=1000 ;;
  cogs)          b=128;  lr=(--lr 1e-4 --lr-scheduler fixed);                                       n=50000;  c=1;   e=500 ;;
  cogs_noam)     b=128;  lr=(--lr "$(noam 2 512 4000)" --lr-scheduler inverse_sqrt --warmup-updates 4000 --warmup-init-lr 0); n=50000; c=0; e=500 ;;
  math)          b=256;  lr=(--lr 1e-4 --lr-scheduler fixed);                                       n=50000;  c=0.1; e=1000 ;;
  *) echo "train_csordas.sh: unknown dataset '$dataset' (scan, cfq, cfq_universal, pcfg, cogs, cogs_noam, math)" >&2; exit 2 ;;
esac
if [ -z "${VALID_SUBSETS:-}" ]; then
  subsets=$(cd "$data" && ls *.idx | sed 's/\..*//' | sort -u | grep -vx train | sort -r | paste -sd, -)  # valid before test before gen
  VALID_SUBSETS=${subsets:-valid}
fi
cmd=(fairseq-train "$data" --user-dir "$(cd "$(dirname "$0")/.." && pwd)/fairseq_compgen"
  --task compgen --arch "$arch" --criterion cross_entropy
  --optimizer adam --adam-betas '(0.9, 0.999)' --adam-eps 1e-8 --weight-decay 0 "${lr[@]}"
  --batch-size "$b" --max-update "$n" --clip-norm "$c" --required-batch-size-multiple 1
  --valid-subset "$VALID_SUBSETS" --validate-interval 1000000 --validate-interval-updates "$e"
  --save-interval 1000000 --save-interval-updates "$e" --keep-interval-updates 1 --no-epoch-checkpoints
  --best-checkpoint-metric accuracy --maximize-best-checkpoint-metric
  --log-format simple --log-interval 100 --save-dir "$save" "$@")
# shellcheck source=lib/finished.sh
. "$(dirname "$0")/lib/finished.sh"
exit_if_finished train_csordas.sh "$save" "${cmd[@]}"
# shellcheck source=lib/record.sh
. "$(dirname "$0")/lib/record.sh"
record "$save" command.txt "${cmd[@]}"
record "$save" commit.txt "$(git -C "$(dirname "$0")/.." rev-parse HEAD 2>/dev/null || echo unknown)"
exec "${cmd[@]}"
