#!/usr/bin/env bash
# The GPU one-shot: on a GPU machine lent for short slices, one slice of at most 10 minutes that
# installs, prepares data, and trains a paper table's cells at the paper's budget as concurrent processes on the one
# GPU, then brings back the raw files. Call it again in the next slice: finished runs are skipped, the others resume
# from their checkpoints (kept in runs/ while the machine stays warm, and carried back in $OUT/carry otherwise).
#
#   bash scripts/gpu_oneshot.sh [SWEEP] [ONLY]        default: csordas_table3 'scan/*' (Csordás Table 3, SCAN column)
#
# A machine without network installs from wheels put into .whl/ beforehand (`pip wheel --no-build-isolation -w .whl
# fairseq-fixed==0.12.3.1` and its dependencies, built for the GPU machine's Python and torch).
# Environment: JOBS (concurrent training processes, default 8: on the lent H100 machine, 16 cores, 2026-11-26, 20
# SCAN processes ran 109 updates/s in all, 5.5 each, and 8 about 117, 14.7 each), SLICE_S (seconds of training in
# this call, default 480, so that evaluation and copying fit in the 10 minutes), OUT (where raw files go; the
# device tool sets it),
# PREP (the `fairseq-compgen prep` arguments to run first, ';'-separated, each skipped when its folder exists;
# default: SCAN length cutoff 26, the data of the default sweep's SCAN column and of positions_length's SCAN
# rows), RUNS (run folders, default runs/oneshot), CARRY (folder of runs carried
# back, default gpu_carry), CPU=1 (train on CPU: how the test suite runs this script, with a tiny budget), THREADS
# (CPU threads per process on the GPU machine, default 1), MPS=1 (the processes share the GPU through NVIDIA MPS:
# see step 3), DECODE (where the finished runs are evaluated: cpu, the
# default, on the machine's cores, THREADS threads each; gpu), PACK=1 (bring back a few flat files, as the device tool
# does: at most 8, 16 MiB each, 64 MiB together: see below), CARRY_MIB (with PACK=1, the most checkpoints to carry,
# default 56), RESULTS_MIB (with PACK=1, the largest results.tar.gz, default 15: past it, it is packed again without
# the runs' decoded outputs, and the log names them).
#
# The device tool's copy of the working tree carried a .git that was not at our HEAD (2026-11-26: runs recorded the
# commit before ours, "dirty"): write `git rev-parse HEAD > commit.manifest && git ls-tree -r HEAD >> commit.manifest`
# on a clean checkout first and carry it; each run then records that commit, checked there file by file
# (fairseq_compgen/pipelines/train.py: manifest_commit), not what git says there. The manifest lists what is sent: a
# tree sent without results/ (2026-11-28: the tracked files passed the device tool's 64 MiB) needs one without it
# (campaign/device_tree.sh slim writes it), else every run records "dirty" and
# campaign/gpu_import.py refuses it. So the script checks the tree against the manifest before anything trains and
# stops, naming the first file that is missing or differs, unless DIRTY_OK=1.
#
# What comes back under $OUT: runs/<sweep>/<dataset>/<config>/seedK/ with each run's records (command, launch,
# commit, machine, settings), train.log, done.json, eval/*.json and eval/*.outputs.gz when finished; steps_per_s.json (each running
# process's last logged updates/s, and their sum); nvidia-smi.txt; oneshot.log; and carry/ with each unfinished
# run's folder (carry/<sweep>/<dataset>/<config>/seedK: records and checkpoint_last.pt). To resume on a fresh machine, copy $OUT/carry here as gpu_carry/
# and pass carry=["gpu_carry"] to the device tool (64 MiB in all): the next call restores those runs first.
# With PACK=1, $OUT holds instead oneshot.log, nvidia-smi.txt, steps_per_s.json, results.tar.gz (everything but the
# carry) and carry.tar.part00.. (15 MiB each; runs in sweep order while CARRY_MIB holds them, the log names the
# others): put the parts into gpu_carry/ as they are, the next call unpacks them.
set -uo pipefail
cd "$(dirname "$0")/.."
SWEEP=${1:-csordas_table3}
ONLY=${2:-scan/*}
JOBS=${JOBS:-8}
SLICE_S=${SLICE_S:-480}
OUT=${OUT:-runs/gpu_oneshot_out}
PREP=${PREP-scan --split length_cutoff_26 --out data/scan}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/oneshot.log") 2>&1
TEE_PID=$!
# at exit: stop the MPS daemon if this call started one (below), then close our output and wait for tee, so that
# oneshot.log holds every line before the device tool collects $OUT
finish() {
  [ "$ONESHOT_MPS" = 1 ] && { mps_stop; echo "oneshot: MPS daemon stopped"; }
  exec >&- 2>&-
  # tee ends when every writer has closed the pipe: a process still holding it (a daemon started with our output)
  # must not keep the call running until the device tool's timeout, so 10 s at most
  for _ in $(seq 100); do kill -0 "$TEE_PID" 2>/dev/null || break; sleep 0.1; done
}
ONESHOT_MPS=0
trap finish EXIT
echo "oneshot: $(date -Is) sweep=$SWEEP only=$ONLY jobs=$JOBS slice=${SLICE_S}s commit=$(head -n 1 commit.manifest 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo none)"

# 1. install: fairseq as it is here (the repository's .venv, or an environment that already has it), else the
#    wheels brought in .whl/ (the GPU machine: torch is there, fairseq is not)
if [ -x .venv/bin/python ]; then
  PY=.venv/bin/python
elif python3 -c "import fairseq" 2>/dev/null; then
  PY=python3
elif ls .whl/*.whl >/dev/null 2>&1; then
  [ -d .site/fairseq ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target .site .whl/*.whl ||
    { echo "oneshot: installing .whl/*.whl failed"; exit 1; }
  PY=python3
  export PYTHONPATH="$PWD/.site${PYTHONPATH:+:$PYTHONPATH}"
else
  echo "oneshot: no fairseq here: run scripts/setup.sh, or bring the wheels (.whl/, see the top of this script)"; exit 1
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ -f commit.manifest ]; then
  export FAIRSEQ_COMPGEN_COMMIT_MANIFEST="$PWD/commit.manifest"
  mismatch=$("$PY" -c "from fairseq_compgen.pipelines.train import manifest_mismatch; print(manifest_mismatch('.') or '')") ||
    { echo "oneshot: commit.manifest could not be read (above)"; exit 1; }
  if [ -n "$mismatch" ] && [ "${DIRTY_OK:-0}" != 1 ]; then
    echo "oneshot: this tree is not the commit that commit.manifest names ($mismatch): its runs would record" \
      "\"$(head -n 1 commit.manifest) dirty\" and campaign/gpu_import.py would refuse them; write the manifest of" \
      "what is sent (the top of this script), or DIRTY_OK=1 to train anyway"
    exit 1
  fi
fi
fcg() { "$PY" -m fairseq_compgen.cli "$@"; }  # not `compgen`: bash has a builtin of that name
[ "${CPU:-0}" = 1 ] || nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true

# 2. data: our own generators, no download
IFS=';' read -ra preps <<< "$PREP"
for p in "${preps[@]}"; do
  [ -n "${p// }" ] || continue
  read -ra args <<< "$p"
  out=""; for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[i]}" = --out ] && out=${args[i+1]}; done
  if [ -n "$out" ] && [ -d "$out" ]; then echo "oneshot: $out exists, prep skipped"; continue; fi
  fcg prep "${args[@]}" || { echo "oneshot: prep $p failed"; exit 1; }
done

runs=${RUNS:-runs/oneshot}/$(basename "$SWEEP" .yaml)
CARRY=${CARRY:-gpu_carry}
# carried back from an earlier slice on another machine (the device tool's carry=["gpu_carry"]): unfinished runs'
# folders with their checkpoints, restored where this machine has none
if [ -d "$CARRY" ]; then
  # packed (PACK=1): the parts of one tar, unpacked in place first
  if ls "$CARRY"/carry.tar.part* >/dev/null 2>&1; then
    cat "$CARRY"/carry.tar.part* | tar -x -C "$CARRY" || { echo "oneshot: unpacking $CARRY/carry.tar.part* failed"; exit 1; }
  fi
  # this sweep's runs only (carry/<sweep>/<dataset>/<config>/seedK): another sweep's run of the same name is not it
  mine="$CARRY/$(basename "$runs")"
  [ ! -d "$mine" ] || (cd "$mine" && find . -name checkpoint_last.pt) | while read -r ck; do
    d=$(dirname "$ck"); d=${d#./}
    # the records first, the checkpoint last through a temporary name: a restore cut short leaves no checkpoint
    [ -f "$runs/$d/checkpoint_last.pt" ] || { mkdir -p "$runs/$d" &&
      find "$mine/$d" -maxdepth 1 -type f ! -name checkpoint_last.pt -exec cp -n {} "$runs/$d"/ \; &&
      cp "$mine/$d/checkpoint_last.pt" "$runs/$d/checkpoint_last.pt.tmp" &&
      mv "$runs/$d/checkpoint_last.pt.tmp" "$runs/$d/checkpoint_last.pt" && echo "oneshot: restored $d"; }
  done
fi

# 3. train: every matching run as its own process on the one GPU (or CPU), for at most SLICE_S seconds; the sweep
#    resumes each run from its checkpoint next time (a run stopped mid-way is not a failure)
# one CPU thread per process: 20 processes each taking all 16 cores would fight over them
# (--gpu: also a sweep file whose launch says cpu, e.g. a campaign step, trains on the GPU)
# evaluation on the CPU cores unless DECODE=gpu: on 2026-11-27 ten evaluations taking turns on the H100 had not
# finished their second subset after about 140 s, where one CPU thread takes 14-19 s (results/gpu_oneshot_h100_20261127)
case "${DECODE:-cpu}" in cpu|gpu) ;; *) echo "oneshot: DECODE=$DECODE: expected cpu or gpu"; exit 1 ;; esac
device=(--devices 0 --gpu --threads "${THREADS:-1}"); [ "${DECODE:-cpu}" = gpu ] || device+=(--decode-cpu)
[ "${CPU:-0}" = 1 ] && device=(--cpu --threads 1)
# MPS=1: NVIDIA's Multi-Process Service, a daemon of this call's own (its pipe under /tmp, short enough for a
# socket path; its log's tail printed; stopped at the end), so that the processes' kernels share the GPU instead of
# taking turns; the GPU's settings are untouched. Not yet tried on a lent GPU: unless a CUDA process starts through
# the daemon within 60 s, the slice runs without it and says so.
export ONESHOT_MPS=0
if [ "${MPS:-0}" = 1 ] && [ "${CPU:-0}" != 1 ]; then
  if command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
    export CUDA_MPS_PIPE_DIRECTORY="/tmp/oneshot-mps.$$/pipe" CUDA_MPS_LOG_DIRECTORY="/tmp/oneshot-mps.$$/log"
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    mps_stop() {  # its log's tail into oneshot.log (PACK=1 leaves no room in $OUT for more files)
      echo quit | nvidia-cuda-mps-control; tail -n 20 "$CUDA_MPS_LOG_DIRECTORY"/*.log 2>/dev/null | sed 's/^/mps: /'; }
    if nvidia-cuda-mps-control -d && timeout 60 "$PY" -c "import torch; torch.zeros(1).cuda(); torch.cuda.synchronize()"; then
      ONESHOT_MPS=1; echo "oneshot: MPS daemon started, a CUDA process ran through it"  # finish() stops it
    else
      mps_stop; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
      echo "oneshot: MPS daemon did not serve a CUDA process; without MPS"
    fi
  else
    echo "oneshot: MPS=1 but no nvidia-cuda-mps-control on this machine; without MPS"
  fi
fi
slice_start=$(date +%s)
timeout --signal=TERM --kill-after=30 "$SLICE_S" \
  "$PY" -m fairseq_compgen.cli sweep "$SWEEP" --out "$runs" --jobs "$JOBS" "${device[@]}" --only "$ONLY"
status=$?
echo "oneshot: $(date -Is) sweep stopped with status $status (124: the slice ended; the next call resumes)"
# a sweep killed after its 30 s of grace (status 137) leaves its trainers running: once on CPU (2026-11-26), a
# Chaabouni trainer outlived its sweep. Every trainer and evaluator names its run folder on its command line; stop
# what still does, so that nothing writes a checkpoint while step 4 copies it, or holds the GPU after the slice.
left=$(pgrep -f -- "$(realpath -m "$runs")/" || true)
if [ -n "$left" ]; then
  echo "oneshot: stopping $(wc -w <<< "$left") process(es) the sweep left running"
  kill -TERM $left 2>/dev/null; sleep 5
  left=$(pgrep -f -- "$(realpath -m "$runs")/" || true)
  if [ -n "$left" ]; then kill -KILL $left 2>/dev/null; sleep 1; fi
fi

# 4. bring back: records and results of every run, checkpoints of the unfinished ones, steps/s per process
"$PY" - "$runs" "$OUT" "${PACK:-0}" "${CARRY_MIB:-56}" "$slice_start" <<'EOF'
import datetime, hashlib, json, os, re, shlex, shutil, sys, tarfile, tempfile
from pathlib import Path

from fairseq_compgen.pipelines.runner import RECORDS, kept_eval_files
from fairseq_compgen.pipelines.train import fairseq_train_words, repair_last

runs, final_out, pack, carry_mib = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "1", float(sys.argv[4])
# PACK=1: the device tool brings back at most 8 files, 2 folders down, 16 MiB each, 64 MiB together; so the tree
# is written to a staging folder and packed into results.tar.gz and carry.tar.part00.. (15 MiB each, CARRY_MIB in all)
out = Path(tempfile.mkdtemp(prefix="oneshot-")) if pack else final_out
keep = RECORDS + ("done.json", "eval.log")  # eval.log: why an evaluation failed or stopped
rates, n_done, n_all = {}, 0, 0
for run in sorted(p.parent for p in runs.glob("**/settings.json")):
    rel = run.relative_to(runs.parent)  # <sweep>/<dataset>/<config>/seedK
    dest = out / rel
    dest.mkdir(parents=True, exist_ok=True)
    for name in keep:
        if (run / name).is_file():
            shutil.copy2(run / name, dest / name)
    for j in kept_eval_files(run):  # results and the outputs they were scored from
        (dest / "eval").mkdir(exist_ok=True)
        shutil.copy2(j, dest / "eval" / j.name)
    if (run.parents[2] / "sweep.json").is_file():  # the sweep's plan, for aggregate and campaign/gpu_import.py
        shutil.copy2(run.parents[2] / "sweep.json", out / rel.parents[2] / "sweep.json")
    if (run / "command.txt").is_file():  # the data it trained on, every file hashed (as scripts/campaign.sh)
        data = Path(fairseq_train_words(shlex.split((run / "command.txt").read_text().splitlines()[0]))[1])
        if data.is_dir():
            (dest / "data.sha256").write_text("".join(
                f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {f.name}\n"
                for f in sorted(data.iterdir(), key=lambda f: f.name) if f.is_file()))
    n_all += 1
    if (run / "done.json").is_file():
        n_done += 1
    elif (run / "checkpoint_last.pt").is_file():  # records and checkpoint, to resume on a fresh machine
        repaired = repair_last(run)  # the slice's end may have cut off fairseq's copy to checkpoint_last.pt
        if repaired:
            print(f"oneshot: {repaired}")
        carry = out / "carry" / rel  # <sweep>/<dataset>/<config>/seedK
        carry.mkdir(parents=True, exist_ok=True)
        for f in [run / "checkpoint_last.pt"] + [run / name for name in keep if (run / name).is_file()]:
            shutil.copy2(f, carry / f.name)
    log = (run / "train.log").read_text(errors="replace") if (run / "train.log").is_file() else ""
    # this slice's records only: a run that did not train in this slice (JOBS fewer than runs) has none
    since = datetime.datetime.fromtimestamp(int(sys.argv[5]))
    log = "\n".join(line for line in log.splitlines() if line[:19] >= since.strftime("%Y-%m-%d %H:%M:%S"))
    ups = re.findall(r'"ups": "([0-9.]+)"', log)
    updates = re.findall(r'"num_updates": "([0-9]+)"', log)
    if ups:
        rates[str(rel)] = {"ups": float(ups[-1]), "num_updates": int(updates[-1]) if updates else None}
summary = {"runs": n_all, "done": n_done, "mps": os.environ.get("ONESHOT_MPS") == "1", "processes_logging": len(rates),
           "sum_ups": round(sum(r["ups"] for r in rates.values()), 2), "per_run": rates}
(out / "steps_per_s.json").write_text(json.dumps(summary, indent=1) + "\n")
print(f"oneshot: {n_done}/{n_all} runs done; {len(rates)} logging, {summary['sum_ups']} updates/s in all")
if pack:
    def pack_results(outputs: bool) -> int:
        """results.tar.gz.tmp: every run's records, logs and results (and the decoded outputs, unless not
        `outputs`); its size in bytes."""
        with tarfile.open(final_out / "results.tar.gz.tmp", "w:gz") as tar:
            for p in sorted(out.iterdir()):
                if p.name != "carry":
                    tar.add(p, arcname=p.name,
                            filter=None if outputs else lambda t: None if t.name.endswith(".outputs.gz") else t)
        return (final_out / "results.tar.gz.tmp").stat().st_size

    size, limit = pack_results(outputs=True), float(os.environ.get("RESULTS_MIB", "15"))
    if size > limit * 2**20:  # the device tool drops a file over 16 MiB, and every record of the slice with it
        dropped = sorted(str(p.relative_to(out)) for p in out.glob("*/*/*/seed*/eval/*.outputs.gz"))
        size_without = pack_results(outputs=False)
        print(f"oneshot: results.tar.gz would be {size / 2**20:.1f} MiB with the decoded outputs (over RESULTS_MIB="
              f"{limit:g}): packed without them ({size_without / 2**20:.1f} MiB); left out: {', '.join(dropped)}")
    (final_out / "results.tar.gz.tmp").rename(final_out / "results.tar.gz")
    shutil.copy2(out / "steps_per_s.json", final_out / "steps_per_s.json")
    carried = sorted(ck.parent for ck in (out / "carry").glob("**/checkpoint_last.pt"))
    budget, used, kept, left = carry_mib * 2**20, 0, [], []
    for run in carried:  # in sweep order, as many runs as the budget holds
        size = sum(f.stat().st_size for f in run.iterdir()) + 4096
        (kept if used + size <= budget else left).append(run)
        used += size if used + size <= budget else 0
    if kept:
        whole = out / "carry.tar"
        with tarfile.open(whole, "w") as tar:
            for run in kept:
                tar.add(run, arcname=str(run.relative_to(out / "carry")))
        with whole.open("rb") as packed:
            part = 0
            while chunk := packed.read(15 * 2**20):
                (final_out / f"carry.tar.part{part:02d}.tmp").write_bytes(chunk)
                (final_out / f"carry.tar.part{part:02d}.tmp").rename(final_out / f"carry.tar.part{part:02d}")
                part += 1
    for run in kept:
        print(f"oneshot: carried {run.relative_to(out / 'carry')}")
    for run in left:
        print(f"oneshot: not carried (over CARRY_MIB={carry_mib:g}): {run.relative_to(out / 'carry')}")
    shutil.rmtree(out)
EOF
