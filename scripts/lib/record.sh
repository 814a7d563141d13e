# Sourced by scripts/train.sh, train_csordas.sh and train_russin.sh.
#
# record SAVE_DIR FILE ARGS...
# Writes ARGS (shell-quoted) to SAVE_DIR/FILE (command.txt, launch.txt, commit.txt) only while the run has no
# checkpoint yet, so FILE keeps the command that made the run: a later failing or mistyped command used to
# overwrite it. Every invocation is appended, dated, to SAVE_DIR/FILE with .txt replaced by .history.
record() {
  local save=$1 file=$2 line
  shift 2
  mkdir -p "$save"
  line=$(printf '%q ' "$@")
  printf '%s %s\n' "$(date -Iseconds)" "$line" >> "$save/${file%.txt}.history"
  if [ ! -f "$save/checkpoint_last.pt" ] || [ ! -f "$save/$file" ]; then
    printf '%s\n' "$line" > "$save/$file"
  fi
}
