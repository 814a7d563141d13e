#!/usr/bin/env bash
# fairseq-train on one GPU, several GPUs (fairseq's own DDP), CPU, or N CPU processes on gloo started rank by rank.
#
#   scripts/train.sh [LAUNCH OPTIONS] ARCH DATA_BIN SAVE_DIR [fairseq-train flags...]
#
#   --preset DATASET  Csordás et al.'s Table 4 hyperparameters, taken from scripts/train_csordas.sh
#                     (scan, cfq, cfq_universal, pcfg, cogs, cogs_noam, math); without it only the structural
#                     flags below are set and the command line gives optimizer, lr, batch and budget
#   --gpus N          N GPUs: --distributed-world-size N, fairseq spawns one process per GPU (NCCL); default 1
#   --cpu             one CPU process
#   --cpu-procs N     N CPU processes (gloo, legacy_ddp, --distributed-no-spawn), started here rank by rank
#                     (fairseq-host notes, item 7); rank 0 writes to stdout, rank R>0 to SAVE_DIR/rankR.log
#   --port P          rendezvous port for --cpu-procs (default: a free port)
#
# Extra flags win over the defaults (fairseq takes the last occurrence); the distributed flags come last.
# A restart on the same SAVE_DIR resumes from SAVE_DIR/checkpoint_last.pt (fairseq-train does this itself); a
# restart of a run whose checkpoint_last.pt is already at --max-update does nothing (scripts/lib/finished.sh).
# Records SAVE_DIR/command.txt (the exact fairseq-train command; for --cpu-procs the one of rank 0),
# SAVE_DIR/launch.txt (this script's command line) and SAVE_DIR/commit.txt (HEAD, then "dirty" if the
# working tree has uncommitted changes to tracked files), as the run's first command made them: later
# invocations (resumes, failures) are appended to SAVE_DIR/*.history instead (scripts/lib/record.sh).
# Generic defaults: --task compgen --criterion cross_entropy --optimizer adam --required-batch-size-multiple 1,
# validation (greedy exact-match `accuracy`) on every subset of DATA_BIN but train, no epoch checkpoints.
# A COGS tagging folder (data-prep/cogs_tagging.py: <subset>.parent files) gets --task cogs_tagging
# --criterion cogs_tagging and --best-checkpoint-metric exact_match instead (ARCH: a compgen_tagger arch).
set -euo pipefail
# OpenMP threads wait passively: with the default busy-waiting, a 2-thread CPU run that shares the cores with
# another process measured 1.6-8x slower per step (README, "Speed on CPU"). A run that has the machine to itself
# is faster with busy-waiting: OMP_WAIT_POLICY=ACTIVE scripts/... sets it back.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
usage() { sed -n '2,24p' "$0"; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
launch=("$0" "$@")
preset="" gpus=1 cpu=0 procs=0 port=""
while [ $# -gt 0 ]; do
  case $1 in
    --preset) preset=$2; shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    --cpu) cpu=1; shift ;;
    --cpu-procs) procs=$2; cpu=1; shift 2 ;;
    --port) port=$2; shift 2 ;;
    -h|--help) usage ;;
    --*) echo "train.sh: unknown launch option $1 (put fairseq-train flags after SAVE_DIR)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -ge 3 ] || usage
arch=$1 data=$2 save=$3; shift 3
[ -f "$data/dict.src.txt" ] || { echo "train.sh: $data has no dict.src.txt: is it a fairseq-preprocess folder?" >&2; exit 2; }
if ls "$data"/*.parent > /dev/null 2>&1; then  # COGS as sequence tagging
  task=(--task cogs_tagging --criterion cogs_tagging --best-checkpoint-metric exact_match) pattern='*.parent'
else
  task=(--task compgen --criterion cross_entropy --best-checkpoint-metric accuracy) pattern='*.idx'
fi
[ "$pattern" = '*.parent' ] || ls "$data"/train.*.idx > /dev/null 2>&1 || {
  echo "train.sh: $data has dictionaries but no binarized train subset (train.*.idx): re-run the data-prep command" >&2; exit 2; }
mkdir -p "$save"

if [ -n "$preset" ]; then
  # Ask train_csordas.sh for its command without running it: a stub fairseq-train first on PATH records the arguments.
  stub=$(mktemp -d)
  trap 'rm -rf "$stub"' EXIT
  printf '#!/usr/bin/env bash\nprintf "%%s\\0" "$@" > "%s/args"\n' "$stub" > "$stub/fairseq-train"
  chmod +x "$stub/fairseq-train"
  PATH="$stub:$PATH" "$root/scripts/train_csordas.sh" "$preset" "$arch" "$data" "$save" "$@" > /dev/null
  [ -f "$stub/args" ] || exit 0  # train_csordas.sh found the run finished (and said so)
  mapfile -d '' args < "$stub/args"
  cmd=(fairseq-train "${args[@]}")
else
  if [ -z "${VALID_SUBSETS:-}" ]; then
    subsets=$(cd "$data" && ls $pattern | sed 's/\..*//' | sort -u | grep -vx train | sort -r | paste -sd, -)
    VALID_SUBSETS=${subsets:-valid}
  fi
  cmd=(fairseq-train "$data" --user-dir "$root/fairseq_compgen" "${task[@]}" --arch "$arch"
    --optimizer adam --required-batch-size-multiple 1
    --valid-subset "$VALID_SUBSETS" --no-epoch-checkpoints --maximize-best-checkpoint-metric
    --log-format simple --save-dir "$save" "$@")
fi

if [ "$procs" -gt 0 ]; then
  [ -n "$port" ] || port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  dist() { echo --cpu --distributed-world-size "$procs" --distributed-rank "$1" \
    --distributed-init-method "tcp://127.0.0.1:$port" --distributed-no-spawn --distributed-backend gloo \
    --ddp-backend legacy_ddp; }
  read -ra rank0 <<< "$(dist 0)"
  record=("${cmd[@]}" "${rank0[@]}")
elif [ "$cpu" = 1 ]; then
  cmd+=(--cpu); record=("${cmd[@]}")
elif [ "$gpus" -gt 1 ]; then
  cmd+=(--distributed-world-size "$gpus"); record=("${cmd[@]}")
else
  record=("${cmd[@]}")
fi
# shellcheck source=lib/finished.sh
. "$root/scripts/lib/finished.sh"
exit_if_finished train.sh "$save" "${cmd[@]}"
# shellcheck source=lib/record.sh
. "$root/scripts/lib/record.sh"
commit=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
[ -z "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ] || commit="$commit dirty"
record "$save" command.txt "${record[@]}"
record "$save" launch.txt "${launch[@]}"
# shellcheck disable=SC2086  # "HASH dirty" is two words, as commit.txt has always held them
record "$save" commit.txt $commit

[ "$procs" -gt 0 ] || exec "${cmd[@]}"

# N CPU ranks, started one by one; if one fails or this script is stopped, the others are stopped too.
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap 'stop; rm -rf "${stub:-}"; exit 143' TERM INT
for ((r = procs - 1; r >= 0; r--)); do
  read -ra flags <<< "$(dist "$r")"
  if [ "$r" = 0 ]; then "${cmd[@]}" "${flags[@]}" & else "${cmd[@]}" "${flags[@]}" > "$save/rank$r.log" 2>&1 & fi
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do
  if ! wait "$p"; then rc=1; stop; fi
done
exit $rc
