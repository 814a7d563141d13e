"""Run a sweep: configurations x seeds x datasets, each run in its own folder, resumable, several at a time.

    python -m fairseq_compgen.pipelines.sweep SWEEP.yaml [--out DIR] [--jobs N] [--devices 0,1] [--cpu]
        [--only PATTERN] [--dry-run] [--threads N]

A sweep file (YAML)::

    name: csordas_table3
    output: runs/csordas_table3          # default --out (relative to the current directory)
    seeds: [1, 2, 3, 4, 5]
    launch: {gpus: 1}                    # scripts/train.sh launch options: gpus: N | cpu: true | cpu_procs: N
    flags: [--fp16]                      # fairseq-train flags for every run (a list, or one string)
    generate_flags: "--batch-size 256"   # extra fairseq-generate flags for evaluation (GENERATE_FLAGS)
    datasets:
      scan:
        label: SCAN (length cutoff 26)   # column title in the tables
        data: data/scan/length_cutoff_26/bin
        preset: scan                     # train.sh --preset (Csordás et al.'s hyperparameters); omit for none
        subsets: [valid, gen]            # evaluated subsets (default: every subset in data but train)
        flags: []                        # dataset-specific flags
        seeds: [1, 2, 3]                 # optional: overrides the sweep's seeds for this dataset
        vars: {suffix: scan}             # optional: extra names for {...} templates below
    configurations:
      transformer:
        label: Transformer
        arch: "compgen_transformer_{preset}"  # {name}, {preset} and vars of the dataset are filled in
        flags: []
        datasets: [scan]                 # optional: the datasets this configuration runs on (default: all)
        presets: {cfq: cfq_universal}    # optional: replaces a dataset's preset for this configuration

Each run lives in OUT/<dataset>/<configuration>/seed<k>/: fairseq's checkpoints, train.log (appended to on
every restart), command.txt / launch.txt / commit.txt (written by train.sh), eval/<subset>.json (written by
evaluate.sh from checkpoint_last.pt: no early stopping) and, once training and evaluation have both
succeeded, done.json. A run with done.json is skipped; any other run is (re)started: fairseq-train resumes
from checkpoint_last.pt in the same --save-dir by itself. The resolved plan is written to OUT/sweep.json for
the aggregator (:mod:`fairseq_compgen.pipelines.aggregate`).

``--jobs N`` runs N runs at once (several small runs share one GPU well); ``--devices 0,1`` gives the job
slots CUDA_VISIBLE_DEVICES round-robin. ``--cpu`` forces CPU training and decoding (for tests and smoke runs).
"""
from __future__ import annotations

import argparse
import copy
import datetime
import fnmatch
import json
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import yaml

REPO = Path(__file__).resolve().parents[2]
TRAIN_SH = REPO / "scripts" / "train.sh"
EVALUATE_SH = REPO / "scripts" / "evaluate.sh"
DONE = "done.json"
NUM_UPDATES = re.compile(r"num_updates[ =](\d+)")


def _flags(value) -> List[str]:
    """A flag list from YAML: a list (items may hold spaces-separated flags) or one string; None -> []."""
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    out: List[str] = []
    for v in value:
        out.extend(shlex.split(str(v)) if isinstance(v, str) else [str(v)])
    return out


@dataclass
class Run:
    dataset: str
    config: str
    seed: int
    arch: str
    data: str
    dir: str
    preset: Optional[str] = None
    flags: List[str] = field(default_factory=list)
    subsets: Optional[List[str]] = None
    launch: List[str] = field(default_factory=list)
    generate_flags: str = ""

    @property
    def name(self) -> str:
        return f"{self.dataset}/{self.config}/seed{self.seed}"

    @property
    def path(self) -> Path:
        return Path(self.dir)

    @property
    def checkpoint(self) -> Path:
        return self.path / "checkpoint_last.pt"

    def train_command(self) -> List[str]:
        preset = ["--preset", self.preset] if self.preset else []
        return ["bash", str(TRAIN_SH), *self.launch, *preset, self.arch, self.data, self.dir,
                *self.flags, "--seed", str(self.seed)]

    def eval_command(self) -> List[str]:
        return ["bash", str(EVALUATE_SH), str(self.checkpoint), self.data, *(self.subsets or [])]

    def is_done(self) -> bool:
        return (self.path / DONE).is_file()


def load_sweep(path) -> dict:
    with open(path) as f:
        spec = yaml.safe_load(f)
    if not isinstance(spec, dict) or "datasets" not in spec or "configurations" not in spec:
        raise ValueError(f"{path}: a sweep needs 'datasets' and 'configurations' mappings")
    spec.setdefault("name", Path(path).stem)
    return spec


def plan(spec: dict, out, cpu: bool = False) -> List[Run]:
    """Every run of the sweep, in file order: dataset, then configuration, then seed."""
    out = Path(out).resolve()
    launch = dict(spec.get("launch") or {})
    if cpu and not launch.get("cpu_procs"):
        launch = {"cpu": True}
    lopts: List[str] = []
    if launch.get("cpu_procs"):
        lopts = ["--cpu-procs", str(int(launch["cpu_procs"]))]
    elif launch.get("cpu"):
        lopts = ["--cpu"]
    elif int(launch.get("gpus", 1)) > 1:
        lopts = ["--gpus", str(int(launch["gpus"]))]
    gen_flags = str(spec.get("generate_flags") or "")
    if cpu or launch.get("cpu") or launch.get("cpu_procs"):
        gen_flags = (gen_flags + " --cpu").strip()
    runs: List[Run] = []
    for dname, d in spec["datasets"].items():
        d = d or {}
        if "data" not in d:
            raise ValueError(f"dataset {dname!r}: no 'data' folder")
        names = {"name": dname, "preset": d.get("preset") or "", **(d.get("vars") or {})}
        data = Path(os.path.expanduser(str(d["data"]).format(**names)))
        data = str(data if data.is_absolute() else Path.cwd() / data)
        seeds = d.get("seeds", spec.get("seeds", [1]))
        for cname, c in spec["configurations"].items():
            c = c or {}
            if c.get("datasets") is not None and dname not in c["datasets"]:
                continue
            if "arch" not in c:
                raise ValueError(f"configuration {cname!r}: no 'arch'")
            flags = _flags(spec.get("flags")) + _flags(d.get("flags")) + _flags(c.get("flags"))
            flags = [f.format(**names) for f in flags]
            preset = (c.get("presets") or {}).get(d.get("preset"), d.get("preset"))
            for seed in seeds:
                runs.append(Run(
                    dataset=dname, config=cname, seed=int(seed), arch=str(c["arch"]).format(**names), data=data,
                    dir=str(out / dname / cname / f"seed{seed}"), preset=preset, flags=flags,
                    subsets=list(d["subsets"]) if d.get("subsets") else None, launch=lopts,
                    generate_flags=gen_flags,
                ))
    return runs


def write_plan(spec: dict, runs: Sequence[Run], out) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "sweep.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"spec": spec, "runs": [asdict(r) for r in runs]}, indent=1, default=str))
    tmp.replace(path)
    return path


def read_plan(out) -> dict:
    return json.loads((Path(out) / "sweep.json").read_text())


def last_num_updates(log: Path) -> Optional[int]:
    """The last num_updates fairseq logged in ``log`` (None when there is none)."""
    if not log.is_file():
        return None
    found = NUM_UPDATES.findall(log.read_text(errors="replace"))
    return int(found[-1]) if found else None


def tool_env(threads: Optional[int] = None, device: Optional[str] = None) -> Dict[str, str]:
    """The environment for train.sh / evaluate.sh: this Python's bin folder first on PATH (fairseq-train,
    fairseq-generate and python of the same environment), checkpoints loadable under torch >= 2.6."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # busy-waiting threads slow runs that share cores (README)
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

    def _call(self, cmd: List[str], log: Path, env: Dict[str, str]) -> int:
        with open(log, "a") as f:
            f.write(f"# {datetime.datetime.now().isoformat(timespec='seconds')} sweep: {shlex.join(cmd)}\n")
            f.flush()
            with self.lock:
                if self.stopping:
                    return -signal.SIGTERM
                p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                     cwd=str(REPO))
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

    def run_one(self, run: Run) -> dict:
        if run.is_done():
            self.echo(f"skip   {run.name} (done)")
            return {"run": run.name, "status": "skipped"}
        device = self.slots.get()
        try:
            return self._run_one(run, tool_env(self.threads, device))
        finally:
            self.slots.put(device)

    def _run_one(self, run: Run, env: Dict[str, str]) -> dict:
        run.path.mkdir(parents=True, exist_ok=True)
        start = last_num_updates(run.path / "train.log") if run.checkpoint.exists() else None
        self.echo(f"train  {run.name}" + (f" (resuming after update {start})" if start else ""))
        rc = self._call(run.train_command(), run.path / "train.log", env)
        if rc != 0:
            self.echo(f"FAILED {run.name}: training exited with {rc}; see {run.path / 'train.log'}")
            return {"run": run.name, "status": "failed", "stage": "train", "rc": rc}
        env = dict(env, GENERATE_FLAGS=(env.get("GENERATE_FLAGS", "") + " " + run.generate_flags).strip())
        self.echo(f"eval   {run.name}")
        rc = self._call(run.eval_command(), run.path / "eval.log", env)
        evals = {p.stem: json.loads(p.read_text()) for p in sorted((run.path / "eval").glob("*.json"))}
        missing = [s for s in run.subsets or [] if s not in evals]
        if rc != 0 or not evals or missing:
            self.echo(f"FAILED {run.name}: evaluation exited with {rc}; see {run.path / 'eval.log'}")
            return {"run": run.name, "status": "failed", "stage": "eval", "rc": rc}
        commit = (run.path / "commit.txt").read_text().split() if (run.path / "commit.txt").exists() else []
        done = {
            "run": run.name, "dataset": run.dataset, "config": run.config, "seed": run.seed, "arch": run.arch,
            "num_updates": last_num_updates(run.path / "train.log"), "commit": commit[0] if commit else None,
            "dirty": "dirty" in commit, "finished": datetime.datetime.now().isoformat(timespec="seconds"),
            "accuracy": {k: v.get("accuracy") for k, v in evals.items()},
        }
        tmp = run.path / (DONE + ".tmp")
        tmp.write_text(json.dumps(done, indent=1))
        tmp.replace(run.path / DONE)
        self.echo(f"done   {run.name}: " + ", ".join(f"{k} {v:.4f}" for k, v in done["accuracy"].items()))
        return dict(done, status="done")

    def run_all(self, runs: Sequence[Run]) -> List[dict]:
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


def select(runs: Sequence[Run], patterns: Optional[Sequence[str]]) -> List[Run]:
    if not patterns:
        return list(runs)
    return [r for r in runs if any(fnmatch.fnmatch(r.name, p) for p in patterns)]


def run_sweep(path, out=None, jobs: int = 1, devices=None, cpu: bool = False, only=None, threads=None,
              dry_run: bool = False, echo=print) -> List[dict]:
    spec = load_sweep(path)
    out = Path(out or spec.get("output") or Path("runs") / spec["name"])
    runs = plan(spec, out, cpu=cpu)
    if dry_run:
        for r in select(runs, only):
            echo(f"{r.name}{'  (done)' if r.is_done() else ''}\n  {shlex.join(r.train_command())}\n"
                 f"  GENERATE_FLAGS={shlex.quote(r.generate_flags)} {shlex.join(r.eval_command())}")
        return []
    write_plan(copy.deepcopy(spec), runs, out)
    if cpu and not threads:  # CPU runs side by side share the cores instead of each taking all of them
        threads = max(1, (os.cpu_count() or 1) // max(jobs, 1))
    runner = Runner(jobs=jobs, devices=devices, threads=threads, echo=echo)

    def on_term(signum, frame):
        raise KeyboardInterrupt
    old = signal.signal(signal.SIGTERM, on_term) if threading.current_thread() is threading.main_thread() else None
    try:
        results = runner.run_all(select(runs, only))
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)
    n = {s: sum(r["status"] == s for r in results) for s in ("done", "skipped", "failed")}
    echo(f"sweep {spec['name']}: {n['done']} done, {n['skipped']} skipped, {n['failed']} failed -> {out}")
    return results


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("sweep", help="sweep file (YAML)")
    p.add_argument("--out", help="output folder (default: the sweep's 'output', else runs/<name>)")
    p.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    p.add_argument("--devices", help="comma-separated CUDA devices, given to job slots round-robin")
    p.add_argument("--cpu", action="store_true", help="train and decode on CPU")
    p.add_argument("--threads", type=int, help="OMP/MKL threads per run (default with --cpu: cores // --jobs)")
    p.add_argument("--only", action="append", help="run only runs matching this glob (dataset/config/seedK); repeatable")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    a = p.parse_args(argv)
    try:
        results = run_sweep(a.sweep, a.out, a.jobs, a.devices.split(",") if a.devices else None, a.cpu, a.only,
                            a.threads, a.dry_run)
    except KeyboardInterrupt:
        print("sweep: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    return 1 if any(r["status"] == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
