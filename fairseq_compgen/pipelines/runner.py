"""The local runner of a sweep's runs: one run = its folder's lock, settings.json, `fairseq-compgen train`,
`fairseq-compgen eval`, done.json; several at once on this machine (`fairseq-compgen sweep --jobs`), or one per
submitit job (pipelines/submit.py). It knows a run only by what pipelines/sweep.py's Run offers (name, path,
checkpoint, train_command, eval_command, settings, is_done, metric, subsets), so it imports neither the sweep nor
the submit backends: sweep -> submit -> runner, and sweep -> runner.
"""
from __future__ import annotations

import datetime
import fcntl
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from fairseq_compgen import scoring
from fairseq_compgen.data.io import pid_alive
from fairseq_compgen.errors import ERROR_PREFIX, UsageError, read_json
from fairseq_compgen.pipelines.evaluate import OUTPUTS
from fairseq_compgen.pipelines.train import checkpoint_updates, repair_last
from fairseq_compgen.pipelines.train_log import last_num_updates

COMPGEN = [sys.executable, "-m", "fairseq_compgen.cli"]  # the `fairseq-compgen` command of this Python
DONE = "done.json"
EVAL_EXPECTED = "the JSON object fairseq-compgen eval writes; rerun the run's evaluation (or the sweep) to rewrite it"
DONE_EXPECTED = ("the JSON object a sweep writes when a run has finished; move it away and rerun the sweep to "
                 "redo the run's evaluation")
SETTINGS = "settings.json"
LOCK = ".lock"

# what a run folder records besides its checkpoints, done.json and eval/*.json: the sweep's settings, what
# `fairseq-compgen train` wrote (command, launch, commit, machine, data; each call dated in *.history) and the log;
# what travels with a run to another machine (campaign/carry.py, scripts/gpu_oneshot.sh)
RECORDS = (SETTINGS, "command.txt", "launch.txt", "commit.txt", "machine.txt", "data.json", "options_changed.txt",
           "command.history", "launch.history", "commit.history", "machine.history", "data.history", "train.log")
# what of a finished run's eval/ folder travels with its records (scripts/campaign.sh, scripts/gpu_oneshot.sh,
# campaign/gpu_import.py): each subset's result and the decoded outputs it was scored from (fairseq-compgen eval)
EVAL_KEPT = ("*.json", f"*{OUTPUTS}")


def read_done(folder: Path) -> dict:
    """A run's done.json; a half-written or edited one (not a JSON object) is a UsageError naming it."""
    done = read_json(folder / DONE, DONE_EXPECTED)
    if not isinstance(done, dict):
        raise UsageError(f"{folder / DONE}: a JSON {type(done).__name__}, not an object: expected {DONE_EXPECTED}")
    return done


def kept_eval_files(run: Path) -> List[Path]:
    """The files of `run`/eval/ that EVAL_KEPT names, sorted."""
    return sorted({p for pattern in EVAL_KEPT for p in (Path(run) / "eval").glob(pattern) if p.is_file()})


def misuse(log: Path) -> str:
    """": <message>" when a failed command's log ends with its one-line misuse error (ERROR_PREFIX), so that the
    sweep's FAILED line says why (an unknown flag in the sweep file, data that do not fit); "" otherwise (a
    traceback, a kill: the log says)."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))  # a long run's log: only its end
            lines = f.read().decode("utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    last = lines[-1] if lines else ""
    return f": {last[len(ERROR_PREFIX):]}" if last.startswith(ERROR_PREFIX) else ""


def tool_env(threads: Optional[int] = None, device: Optional[str] = None) -> Dict[str, str]:
    """The environment for `fairseq-compgen train` / `eval`: this Python's bin folder first on PATH (torchrun's
    workers and any tool of the same environment). Checkpoints load under torch >= 2.6 through the plugin
    (fairseq_compgen/checkpoint_loading.py), not through the environment; OMP_WAIT_POLICY is the command's own
    default (cli.py)."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    if threads:
        for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[k] = str(threads)
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(device)
    return env


class Runner:
    """Runs the runs; stops every child process group it started when interrupted."""

    def __init__(self, jobs: int = 1, devices: Optional[Sequence[str]] = None, threads: Optional[int] = None,
                 echo=print):
        self.jobs = max(1, jobs)
        self.threads = threads
        self.echo = echo
        self.slots: "queue.Queue[Optional[str]]" = queue.Queue()
        for i in range(self.jobs):
            self.slots.put(devices[i % len(devices)] if devices else None)
        self.procs: Dict[int, subprocess.Popen] = {}
        self.lock = threading.Lock()
        self.stopping = False

    def _call(self, cmd: List[str], log: Path, env: Dict[str, str], lock_fd: int) -> int:
        with open(log, "a") as f:
            f.write(f"# {datetime.datetime.now().isoformat(timespec='seconds')} sweep: {shlex.join(cmd)}\n")
            f.flush()
            with self.lock:
                if self.stopping:
                    return -signal.SIGTERM
                # the child inherits the lock's file descriptor: the folder stays locked while it runs, even if
                # this sweep is killed; its process group is recorded for a later sweep to find
                p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                     pass_fds=(lock_fd,))
                _write_holder(lock_fd, p.pid)
                self.procs[p.pid] = p
            try:
                return p.wait()
            finally:
                with self.lock:
                    self.procs.pop(p.pid, None)

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            for pid in list(self.procs):
                try:
                    os.killpg(pid, signal.SIGTERM)  # the run's own process group (start_new_session)
                except ProcessLookupError:
                    pass

    def run_one(self, run) -> dict:
        if self.stopping:  # the sweep was interrupted before this queued run started: it is not a failure
            return {"run": run.name, "status": "stopped"}
        if run.is_done():
            self.echo(f"skip   {run.name} (done)")
            return {"run": run.name, "status": "skipped"}
        device = self.slots.get()
        try:
            run.path.mkdir(parents=True, exist_ok=True)
            lock_fd = self._take_lock(run)
            if lock_fd is None:
                self.echo(f"BUSY   {run.name}: a live sweep or training holds its lock ({run.path / LOCK}); left alone")
                return {"run": run.name, "status": "busy"}  # not done, and not this sweep's failure
            try:
                if run.is_done():  # finished by the process that held the lock
                    self.echo(f"skip   {run.name} (done)")
                    return {"run": run.name, "status": "skipped"}
                return self._run_one(run, tool_env(self.threads, device), lock_fd)
            finally:
                os.close(lock_fd)
        finally:
            self.slots.put(device)

    def _take_lock(self, run, wait_s: float = 60.0) -> Optional[int]:
        """The run folder's lock (a file descriptor to pass to its processes), or None while a live sweep holds
        it. A lock held only by the processes of a sweep that is gone: stop them (SIGTERM to their process
        group), then take it."""
        fd = os.open(run.path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            pass
        holder = _read_holder(fd)
        if holder.get("sweep") is None or pid_alive(holder["sweep"]) or holder.get("pgid") is None:
            os.close(fd)
            return None
        if not _group_has_open(holder["pgid"], run.path / LOCK):
            # the record is stale: the lock is held by another process (a `fairseq-compgen train` started by hand
            # in this folder records no holder) and the recorded group's number may now be anyone's
            os.close(fd)
            return None
        self.echo(f"stop   {run.name}: process group {holder['pgid']} of a sweep that is gone (pid "
                  f"{holder['sweep']}) still runs in this folder")
        try:
            os.killpg(holder["pgid"], signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    return None
                time.sleep(0.5)

    def _run_one(self, run, env: Dict[str, str], lock_fd: int) -> dict:
        settings = run.path / SETTINGS
        if not settings.is_file():
            tmp = settings.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(run.settings(), indent=1))
            tmp.replace(settings)
        # Where the resumed run starts: the checkpoint's update, not the log's last (a run stopped between two
        # saves logged updates that its checkpoint does not hold; those are trained again).
        repaired = repair_last(run.path)  # a checkpoint_last.pt cut off mid-copy by the stop of an earlier call
        if repaired:
            self.echo(f"repair {run.name}: {repaired}")
        start = checkpoint_updates(run.checkpoint) if run.checkpoint.exists() else None
        self.echo(f"train  {run.name}" + (f" (resuming after update {start})" if start else ""))
        rc = self._call(run.train_command(), run.path / "train.log", env, lock_fd)
        if rc != 0 and self.stopping:
            self.echo(f"stopped {run.name}: interrupted during training; rerun the sweep to resume it (from its last "
                      f"saved checkpoint; from the start if it saved none)")
            return {"run": run.name, "status": "stopped", "stage": "train"}
        if rc != 0:
            self.echo(f"FAILED {run.name}: training exited with {rc}{misuse(run.path / 'train.log')}; see "
                      f"{run.path / 'train.log'}")
            return {"run": run.name, "status": "failed", "stage": "train", "rc": rc}
        self.echo(f"eval   {run.name}")
        eval_start = time.monotonic()
        rc = self._call(run.eval_command(), run.path / "eval.log", env, lock_fd)
        eval_s = round(time.monotonic() - eval_start, 1)
        try:  # a stray or half-written JSON in eval/: this run fails with its name, the sweep goes on
            evals = {p.stem: read_json(p, EVAL_EXPECTED) for p in sorted((run.path / "eval").glob("*.json"))}
        except UsageError as e:
            self.echo(f"FAILED {run.name}: {e}")
            return {"run": run.name, "status": "failed", "stage": "eval", "rc": rc}
        missing = [s for s in run.subsets or [] if s not in evals]
        if rc != 0 and self.stopping:  # e.g. a GPU slice's end: the next sweep evaluates the finished training
            self.echo(f"stopped {run.name}: interrupted during evaluation; rerun the sweep to evaluate it")
            return {"run": run.name, "status": "stopped", "stage": "eval"}
        if rc != 0 or not evals or missing:
            self.echo(f"FAILED {run.name}: evaluation exited with {rc}{misuse(run.path / 'eval.log')}; see "
                      f"{run.path / 'eval.log'}")
            return {"run": run.name, "status": "failed", "stage": "eval", "rc": rc}
        commits = trained_at(run.path)
        done = {
            "run": run.name, "dataset": run.dataset, "config": run.config, "seed": run.seed, "arch": run.arch,
            "num_updates": last_num_updates(run.path / "train.log"),
            "commit": commits[0].split()[0] if commits else None,  # the first; a resumed run's every one: "commits"
            "commits": commits, "dirty": any(c.endswith(" dirty") for c in commits),
            "finished": datetime.datetime.now().isoformat(timespec="seconds"),
            "eval_s": eval_s,  # the training clock is in train.log, the machine in machine.txt
            "accuracy": {k: v.get("accuracy") for k, v in evals.items() if "accuracy" in v},
            "metrics": {k: {m: x for m, x in v.items() if isinstance(x, (int, float))} for k, v in evals.items()},
            "settings": run.settings(),
        }
        tmp = run.path / (DONE + ".tmp")
        tmp.write_text(json.dumps(done, indent=1))
        tmp.replace(run.path / DONE)
        key = scoring.get(run.metric).key
        self.echo(f"done   {run.name}: " + ", ".join(f"{k} {key} {v.get(key, float('nan')):.4f}"
                                                  for k, v in done["metrics"].items()))
        return dict(done, status="done")

    def run_all(self, runs: Sequence) -> List[dict]:
        results: List[dict] = []
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            futures = [pool.submit(self.run_one, r) for r in runs]
            try:
                for fut in futures:
                    results.append(fut.result())
            except BaseException:
                self.stop()
                raise
        return results


def trained_at(save: Path) -> List[str]:
    """Every commit the run's kept training ran at, in order and once each ("SHA" or "SHA dirty"): a resumed run may
    have continued at later commits. From SAVE/commit.history (one dated line per `fairseq-compgen train` call,
    train.py), from the first line at SAVE/commit.txt's commit on: `train.record` rewrites commit.txt at every call
    that finds no checkpoint, so it names the commit at which the kept training started, and the calls before a
    restart from scratch (their training discarded) are left out; where one commit started both, what ran between
    them stays in (never fewer commits than trained). Else SAVE/commit.txt alone (runs before commit.history)."""
    history, start = save / "commit.history", save / "commit.txt"
    first = start.read_text().splitlines()[:1] if start.is_file() else []
    if history.is_file():
        lines = [line.split(maxsplit=1)[1].strip() for line in history.read_text().splitlines()
                 if len(line.split()) > 1]
        if first and first[0].strip() in lines:
            lines = lines[lines.index(first[0].strip()):]
    else:
        lines = [line.strip() for line in first]
    return list(dict.fromkeys(lines))


def _write_holder(fd: int, pgid: Optional[int]) -> None:
    """Record in the lock file who holds it: this sweep's pid and the process group of its current command."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"sweep": os.getpid(), "pgid": pgid}).encode(), 0)


def _group_has_open(pgid: int, path: Path) -> bool:
    """Whether a process of process group `pgid` has the file `path` open (Linux /proc/<pid>/fd). False where
    /proc cannot tell (another system, another user's processes): a group is stopped only when it is known to
    hold the run's lock, never on the strength of a recorded number that the system may have given to another."""
    try:
        target = os.stat(path)
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return False
    for pid in pids:
        try:
            if os.getpgid(pid) != pgid:
                continue
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # ended meanwhile, or not ours to read
            continue
        for name in fds:
            try:
                st = os.stat(f"/proc/{pid}/fd/{name}")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
                return True
    return False


def _read_holder(fd: int) -> dict:
    try:
        return json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except ValueError:
        return {}
