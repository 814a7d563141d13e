# Sourced by scripts/train.sh and scripts/train_csordas.sh.
#
# exit_if_finished SCRIPT SAVE_DIR FAIRSEQ_TRAIN_ARGS...
# A rerun of a finished run is a no-op: fairseq-train, resumed from a checkpoint_last.pt that already holds
# --max-update updates, trains one more update before it checks the budget and overwrites the checkpoint (so a
# sweep rerun after an interrupted evaluation used to add an update each time). Exits 0 with one line on stderr
# when SAVE_DIR/checkpoint_last.pt is at or past the last --max-update given; returns otherwise (also when there
# is no checkpoint or it cannot be read: fairseq-train then reports that itself).
exit_if_finished() {
  local script=$1 save=$2 max="" prev="" arg done
  shift 2
  for arg in "$@"; do
    case $arg in --max-update=*) max=${arg#*=} ;; esac
    [ "$prev" = --max-update ] && max=$arg
    prev=$arg
  done
  { [ -n "$max" ] && [ "$max" != 0 ] && [ -f "$save/checkpoint_last.pt" ]; } || return 0
  done=$(python3 - "$save/checkpoint_last.pt" 2>/dev/null <<'PY'
import sys

import torch

state = torch.load(sys.argv[1], map_location="cpu", weights_only=False)  # fairseq's own checkpoint
print(state["optimizer_history"][-1]["num_updates"])
PY
) || return 0
  if [ "$done" -ge "$max" ]; then
    echo "$script: $save/checkpoint_last.pt is at $done updates and --max-update is $max: already finished, nothing to train" >&2
    exit 0
  fi
}
