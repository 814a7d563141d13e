#!/usr/bin/env bash
# The reproduction campaign: runs campaign/queue.txt's steps in order, resuming, from a clean committed
# checkout outside the working tree, and commits each finished run's raw files into this repository.
#
#   nohup bash scripts/campaign.sh > ../campaign/campaign.log 2>&1 &     (THREADS=1 default; JOBS=1)
#
# campaign/queue.txt: one step per line, "SWEEP_FILE RUN_GLOB" (a sweep file of this repository, the runs to run in
# order), or "prep ARGS... --out DIR" (fairseq-compgen prep, relative to STATE; skipped once it has succeeded with
# the same ARGS: a marker under STATE/.prepared/).
# STATE (default: the folder campaign beside this checkout, ../campaign) holds the checkout (tree-<commit>/, a git
# worktree at this repository's HEAD, which must be clean), the data it prepares itself (data/) and the run folders
# (runs/).
# A run already done (in runs/, or recorded in results/campaign/ when STATE is new, e.g. on a fresh machine) is
# skipped, a run with a checkpoint resumes (fairseq-compgen sweep); a step whose runs are all committed is not walked
# at all (campaign/status.py --steps-left lists the others). A finished run's records (done.json,
# eval/*.json and eval/*.outputs.gz, command.txt, launch.txt, commit.txt, machine.txt, settings.json, train.log, and a resumed run's
# *.history: every commit it trained at) are copied to results/campaign/<sweep>/<run>/ and committed with
# `git commit -- <that folder>` only (and the sweep's sweep.json, results/campaign/<sweep>/sweep.json, when new or
# changed, so that `fairseq-compgen aggregate results/campaign/<sweep>` works from the repository), so work in
# progress in this checkout is never committed.
# A run stopped by the end of a session resumes from its checkpoint in STATE; on a fresh machine (a new STATE) it
# resumes from the checkpoint that `campaign/carry.py save` committed under results/campaign/_carry/ before the
# session ended (restored at the start, below; removed in the commit that records the run), else from scratch.
# Between runs, when this repository's HEAD has moved to a clean commit that changes anything outside results/ (a
# commit of code, a sweep or the queue; the campaign's own result commits do not count), the campaign goes on from a
# worktree of that commit, so a fix or speed-up reaches the runs that start after it, and no run changes commit
# midway for it (FOLLOW=0: stay at the commit it started from until restarted).
set -euo pipefail
REPO=${CAMPAIGN_REPO:-$(cd "$(dirname "$0")/.." && pwd)}
STATE=${STATE:-$(dirname "$REPO")/campaign}
THREADS=${THREADS:-1}
JOBS=${JOBS:-1}
cd "$REPO"
# a git index lock older than 10 minutes was left by a git process stopped mid-commit (a session's end): git holds it
# for seconds, and while it stays every `git add` and `git commit` of the lanes and carry.py fails (the runs' records
# would stay uncommitted, lost on a fresh machine)
lock="$(git rev-parse --git-dir)/index.lock"
if [ -n "$(find "$lock" -maxdepth 0 -mmin +10 2>/dev/null)" ]; then
  echo "campaign: removing $lock, left over 10 minutes ago by a git process that was stopped (every commit would fail)"
  rm -f "$lock"
fi
dirty=$(git status --porcelain --untracked-files=no)
for _ in 1 2 3 4 5 6; do  # changes under results/campaign/ (or campaign_gpu/) alone: another lane, carry.py or
  # gpu_import.py committing a run this second
  if [ -z "$dirty" ] || grep -qv ' results/campaign' <<< "$dirty"; then break; fi
  echo "campaign: results/campaign*/ has uncommitted changes (another lane committing a run?): waiting 5 s"
  sleep 5
  dirty=$(git status --porcelain --untracked-files=no)
done
if [ -n "$dirty" ]; then
  echo "campaign: $REPO has uncommitted changes to tracked files; the campaign trains from a clean commit only" >&2
  exit 1
fi
HEAD=$(git rev-parse HEAD)
mkdir -p "$STATE"
STATE=$(cd "$STATE" && pwd)  # absolute, no trailing slash: the re-exec below compares paths as strings
TREE="$STATE/tree-${HEAD:0:12}"
# two lanes started together would race to add the same worktree: one lock file in STATE serializes it. Under the
# same lock, the worktrees of earlier commits that no running process names are removed (every process of a lane
# names its worktree on its command line: the script, the sweep file, --user-dir), or following commits would
# leave one behind per commit.
named_by_a_process() {  # a running process has "$1/" on its command line (read by tr, whose own line lacks it)
  local f
  for f in /proc/[0-9]*/cmdline; do
    case "$(tr '\0' ' ' < "$f" 2>/dev/null)" in *"$1/"*) return 0 ;; esac
  done
  return 1
}
(
  flock 9
  [ -d "$TREE" ] || git worktree add --detach "$TREE" "$HEAD" >/dev/null
  for old in "$STATE"/tree-*; do
    if [ -d "$old" ] && [ "$old" != "$TREE" ] && ! named_by_a_process "$old"; then
      if git worktree remove --force "$old"; then echo "campaign: removed the unused worktree $old"
      else echo "campaign: could not remove the old worktree $old; left as it is" >&2; fi
    fi
  done
) 9>"$STATE/.worktree.lock"
# bash reads a script as it runs: go on from the worktree's copy, which no edit in this checkout can change
if [ "$(cd "$(dirname "$0")" && pwd)" != "$TREE/scripts" ]; then
  CAMPAIGN_REPO=$REPO exec bash "$TREE/scripts/campaign.sh" "$@"
fi
PY=${PY:-$REPO/.venv/bin/python}
QUEUE=${QUEUE:-campaign/queue.txt}  # relative to the checkout
export PYTHONPATH="$TREE" OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS
cd "$STATE"
"$PY" -c "import fairseq_compgen, sys; p = fairseq_compgen.__file__; sys.exit(0 if p.startswith('$TREE/') else
  f'campaign: fairseq_compgen imports from {p}, not from $TREE')"
fcg() { "$PY" -m fairseq_compgen.cli "$@"; }  # not `compgen`: bash has a builtin of that name
RECORDS=$("$PY" -c "from fairseq_compgen.pipelines.runner import RECORDS; print(*RECORDS)")
kept=$("$PY" -c "from fairseq_compgen.pipelines.runner import EVAL_KEPT; print(*EVAL_KEPT)")  # an assignment: errexit
read -r -a EVAL_KEPT <<< "$kept"  # patterns (not expanded here)
# a queue line "prep ARGS... --out DIR" prepares DIR (relative to STATE) unless it exists
prep_once() {  # a queue's prep line runs once per state folder: a marker per command line, written when it succeeded
  # (an output folder alone does not say that: prep makes it before its files, and a session may end in between);
  # under a lock, so that two lanes never prepare one folder at once (the second waits, then skips). prep replaces
  # its output whole, so a line without a marker (a state folder older than the markers) simply prepares again.
  local marker
  marker="$STATE/.prepared/$(printf '%s\n' "$*" | sha1sum | cut -c1-16)"
  [ -e "$marker" ] && return 0
  (
    flock 8
    [ -e "$marker" ] && exit 0
    fcg prep "$@" && mkdir -p "$STATE/.prepared" && printf '%s\n' "$*" > "$marker"
  ) 8>"$STATE/.prep.lock"
}

committed() {  # run folder (sweep/dataset/config/seedK) whose done.json is committed (in HEAD, not only staged)
  # under results/campaign, or under results/campaign_gpu (finished on a lent GPU: campaign/gpu_import.py)
  git -C "$REPO" cat-file -e "HEAD:results/campaign/$1/done.json" 2>/dev/null ||
    git -C "$REPO" cat-file -e "HEAD:results/campaign_gpu/$1/done.json" 2>/dev/null
}

collect() {  # copy and commit every finished run of a sweep not yet in results/campaign
  local sweep=$1 name=$2 d rel dest
  for d in runs/"$name"/*/*/seed*/; do
    [ -f "$d/done.json" ] || continue
    rel=${d#runs/}; rel=${rel%/}; dest="$REPO/results/campaign/$rel"
    if committed "$rel"; then
      continue
    fi
    if [ ! -f "$dest/done.json" ]; then  # else copied by a campaign stopped before its commit: commit it now
      # this lane's own (the other lane's collect may copy the same run at the same moment), hidden so that no
      # seed* glob of the campaign's scripts takes it for a run
      tmp="$(dirname "$dest")/.$(basename "$dest").tmp-$$"
      rm -rf "$tmp"; mkdir -p "$tmp/eval"
      cp "$d"/done.json "$tmp/"
      # its results and the outputs they were scored from (runner.EVAL_KEPT; runs evaluated before 2026-11-27 have
      # no outputs file)
      for g in "${EVAL_KEPT[@]}"; do  # patterns, matched in the run's eval/ only
        for f in "$d"/eval/$g; do
          if [ -f "$f" ]; then cp "$f" "$tmp/eval/"; fi
        done
      done
      if ! compgen -G "$tmp/eval/*.json" > /dev/null; then  # bash's builtin: a finished run has its results
        echo "campaign: $rel has done.json but no eval/*.json: not recorded" >&2
        rm -rf "$tmp"
        continue
      fi
      # the run's records (runner.RECORDS: settings, command, launch, commit, machine, data, train.log, and every
      # invocation of a resumed run in the *.history files), those it has
      for f in $RECORDS; do
        if [ -f "$d/$f" ]; then cp "$d/$f" "$tmp/"; fi
      done
      # the run's data folder here, every file hashed: done.json's settings (this sweep's; settings.json keeps the
      # folder of the machine the run began on, e.g. a lent GPU's: campaign/gpu_import.py --carried), else
      # settings.json (command.txt's second word is no data folder under torchrun)
      data=$("$PY" -c "import json, sys; print((json.load(open(sys.argv[1])).get('settings') or
json.load(open(sys.argv[2])))['data'])" "$d/done.json" "$d/settings.json")
      (cd "$data" && find . -maxdepth 1 -type f -printf '%P\n' | sort | xargs sha256sum) > "$tmp/data.sha256"
      # one rename: a lane never removes what the other installed (mv -T onto a folder that holds files fails)
      mv -T "$tmp" "$dest" 2>/dev/null || rm -rf "$tmp"  # failed: the other lane's copy got there first, ours goes
    fi
    if [ ! -f "$dest/done.json" ]; then  # a folder there that no collect installed: left alone, not committed
      echo "campaign: results/campaign/$rel holds no done.json (not a copy of this campaign's): not recorded" >&2
      continue
    fi
    acc=$("$PY" -c "import json, sys; a = json.load(open(sys.argv[1])).get('accuracy') or {}
print(', '.join(f'{k} {v:.4f}' for k, v in sorted(a.items()) if isinstance(v, (int, float))))" "$dest/done.json" || true)
    # the sweep's plan (labels, paper values, settings) beside its runs, so that `fairseq-compgen aggregate
    # results/campaign/<sweep>` works from the repository alone
    sweep_json=""
    if [ -f "runs/$name/sweep.json" ] && ! cmp -s "runs/$name/sweep.json" "$REPO/results/campaign/$name/sweep.json"; then
      cp "runs/$name/sweep.json" "$REPO/results/campaign/$name/sweep.json.tmp-$$"  # this lane's own: both may
      mv "$REPO/results/campaign/$name/sweep.json.tmp-$$" "$REPO/results/campaign/$name/sweep.json"  # copy it at once
    fi
    if [ -f "$REPO/results/campaign/$name/sweep.json" ] &&
       [ -n "$(git -C "$REPO" status --porcelain -- "results/campaign/$name/sweep.json")" ]; then
      sweep_json="results/campaign/$name/sweep.json"
    fi
    # every commit the run trained at (done.json "commits": a resumed run's calls), as the tables join them
    at=$("$PY" -c "import json, sys; d = json.load(open(sys.argv[1]))
print('+'.join(c[:12] for c in (d.get('commits') or [d.get('commit')]) if c))" "$dest/done.json" || true)
    msg="Campaign: $rel finished (accuracy: ${acc:-see done.json}; trained at ${at:-an unrecorded commit})"
    # the run's carried checkpoint (campaign/carry.py), if any, goes in the same commit
    # (in HEAD, not the index: a failed commit after its `git rm` leaves the removal staged, and the next collect
    # must still commit it)
    carried=""
    if git -C "$REPO" cat-file -e "HEAD:results/campaign/_carry/$rel" 2>/dev/null; then
      carried="results/campaign/_carry/$rel"
    fi
    ok=""
    for i in 1 2 3 4 5; do  # retried: the other lane or carry.py may hold git's index lock for a moment
      { [ -z "$carried" ] || git -C "$REPO" rm -r -q --ignore-unmatch -- "$carried"; } &&
        git -C "$REPO" add -- "results/campaign/$rel" $sweep_json &&
        git -C "$REPO" commit -q -m "$msg" -- "results/campaign/$rel" $sweep_json $carried && { ok=1; break; }
      sleep 5
    done
    if [ -n "$ok" ]; then
      echo "campaign: committed $rel"
    else
      echo "campaign: could not commit $rel (git failed 5 times); its files are in results/campaign/$rel and the" \
        "next collect commits them" >&2
    fi
  done
}

code_moved() {  # REPO's HEAD is a clean commit whose code (anything outside results/) differs from this worktree's
  [ "${FOLLOW:-1}" = 1 ] || return 1
  local now
  now=$(git -C "$REPO" rev-parse HEAD)
  [ "$now" != "$HEAD" ] || return 1
  [ -z "$(git -C "$REPO" status --porcelain --untracked-files=no)" ] || return 1
  ! git -C "$REPO" diff --quiet "$HEAD" "$now" -- . ':(exclude)results'
}

# runs carried from another machine (campaign/carry.py save, committed under results/campaign/_carry/): back into
# this state folder where it has no checkpoint of theirs, so that they resume instead of starting again
"$PY" "$TREE/campaign/carry.py" restore --repo "$REPO" --state "$STATE" --queue "$TREE/$QUEUE" ||
  echo "campaign: carry restore failed" >&2
moved="$STATE/.code-moved.$$"  # written between runs when code_moved (the step it was in): the rest of the queue is
rm -f "$moved"                 # left to that commit
# CAMPAIGN_FROM (set when the campaign goes on from a new commit, below): the step it was in; the steps before it were
# walked already, so they are not walked again (each step's dry run costs seconds: the whole queue several minutes,
# after every commit), unless the new commit's queue no longer has that step. Prep lines are always read.
one_line() { awk '{$1 = $1; print}'; }  # a step as the lanes compare steps: its words, one space apart
from=${CAMPAIGN_FROM:-}
unset CAMPAIGN_FROM
if [ -n "$from" ] && ! grep -v '^#' "$TREE/$QUEUE" | one_line | grep -qxF "$from"; then
  echo "campaign: step $from is not in $QUEUE at this commit: walking the queue from its top"
  from=""
fi
[ -z "$from" ] || echo "campaign: going on from step $from (the steps before it were walked before the commit)"
# the steps with a run not committed, in one process (seconds): the others are not walked (a dry run each, several
# seconds of fairseq's imports: the whole queue took ten minutes at each lane's start). Should it fail, all are walked.
if left=$("$PY" "$TREE/campaign/status.py" --steps-left --queue "$TREE/$QUEUE" --repo "$REPO" --state "$STATE" \
          </dev/null); then
  walk_all=""
  echo "campaign: $(grep -c . <<< "$left" || true) steps of $QUEUE have runs not recorded (campaign/status.py" \
    "--steps-left); only those are walked"
else
  echo "campaign: campaign/status.py --steps-left failed (above): walking every step" >&2
  walk_all=1
fi
{ grep -v '^#' "$TREE/$QUEUE" || true; } | while read -r sweep glob; do  # (a queue of comments alone: grep fails)
  [ -n "$sweep" ] || continue
  if [ -e "$moved" ]; then continue; fi
  if [ "$sweep" = prep ]; then
    read -ra args <<< "$glob"
    prep_once "${args[@]}" </dev/null || { echo "campaign: prep $glob failed" >&2; exit 1; }
    continue
  fi
  step=$(one_line <<< "$sweep $glob")
  if [ -n "$from" ]; then
    [ "$step" = "$from" ] || continue
    from=""
  fi
  if [ -z "$walk_all" ] && ! grep -qxF "$step" <<< "$left"; then continue; fi  # every run recorded
  name=$(basename "$sweep" .yaml)
  echo "campaign: $(date -Is) step $sweep $glob"
  # one run at a time, so that each run's files are committed as soon as it finishes
  if ! plan=$(fcg sweep "$TREE/$sweep" --out "runs/$name" --cpu --dry-run --only "$glob" </dev/null); then
    echo "campaign: step $sweep $glob: the sweep's dry run failed (above); step skipped" >&2
    continue
  fi
  runs=$(grep -v '^ ' <<< "$plan" | cut -d' ' -f1) || true  # never empty: the sweep refuses a glob matching no run
  while read -r run; do
    if [ -e "$moved" ]; then continue; fi
    # recorded in this repository already (its state folder may be gone: a fresh machine keeps only the repository)
    if committed "$name/$run"; then
      continue
    fi
    fcg sweep "$TREE/$sweep" --out "runs/$name" --cpu --jobs "$JOBS" --threads "$THREADS" --only "$run" </dev/null || true
    collect "$sweep" "$name"
    if code_moved; then echo "$step" > "$moved"; fi  # between runs only: no run trains at
    # two commits because of this
  done <<< "$runs"
done
if [ -e "$moved" ]; then
  CAMPAIGN_FROM=$(cat "$moved")
  export CAMPAIGN_FROM
  rm -f "$moved"
  echo "campaign: $(date -Is) HEAD moved to $(git -C "$REPO" rev-parse --short=12 HEAD), which changes code;" \
    "going on from there"
  cd "$REPO"
  exec bash "$REPO/scripts/campaign.sh" "$@"
fi
echo "campaign: $(date -Is) queue finished"
