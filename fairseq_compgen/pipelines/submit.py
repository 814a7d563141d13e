"""Sweeps beyond one machine: every run of a sweep as one job of submitit (Slurm, or submitit's local executor).

    fairseq-compgen sweep SWEEP --engine slurm [--partition P] [--timeout-min 1440] [--gpus-per-node 1]
        [--cpus-per-task 4] [--mem-gb 16] [--array-parallelism 32]
    fairseq-compgen sweep SWEEP --engine submitit-local   # the same jobs as processes here (tests, debugging)

submitit (https://github.com/facebookincubator/submitit, the launcher fairseq's own hydra plugin uses) pickles
:func:`job` with its :class:`~fairseq_compgen.pipelines.sweep.Run` and runs it on a node: the same code as the
local runner, pipelines/runner.py (the run folder's lock, settings.json, `fairseq-compgen train`, `fairseq-compgen eval`,
done.json), so a run started on Slurm resumes locally and the other way round. The runs are submitted as one job array; the sweep then waits
for them and prints each result. Ctrl-C stops the waiting, not the jobs (`scancel` them, or let them finish);
rerunning the sweep skips what is done and resubmits the rest. submitit's own files (job scripts, each job's
stdout and stderr) go to OUT/.submitit/. The run folders must be on a filesystem the nodes share.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Callable, List, Optional, Sequence

from fairseq_compgen.errors import UsageError
from fairseq_compgen.pipelines.runner import Runner

ENGINES = ("slurm", "submitit-local")


def job(run, threads: Optional[int] = None) -> dict:
    """One run, on whatever machine submitit put this job: the local runner's run_one with a single slot, on the
    threads given, else on the CPUs Slurm gave the job (SLURM_CPUS_PER_TASK, set by --cpus-per-task), else torch's
    default."""
    threads = threads or int(os.environ.get("SLURM_CPUS_PER_TASK") or 0) or None
    return Runner(jobs=1, threads=threads, echo=lambda s: print(s, flush=True)).run_one(run)


def executor(engine: str, folder, gpus_per_node: int = 0, timeout_min: int = 24 * 60,
             partition: Optional[str] = None, cpus_per_task: Optional[int] = None, mem_gb: Optional[int] = None,
             array_parallelism: Optional[int] = None, name: str = "compgen"):
    """A submitit executor for ENGINE with the sweep's resources."""
    check_engine(engine)
    import submitit

    ex = submitit.AutoExecutor(folder=str(folder), cluster="slurm" if engine == "slurm" else "local")
    params = dict(name=name, timeout_min=timeout_min, gpus_per_node=gpus_per_node, cpus_per_task=cpus_per_task,
                  mem_gb=mem_gb)
    if engine == "slurm":
        params.update(slurm_partition=partition, slurm_array_parallelism=array_parallelism)
    ex.update_parameters(**params)
    return ex


def check_engine(engine: str) -> None:
    """UsageError, before anything is planned or submitted, when ENGINE cannot run here: an unknown name, submitit
    not installed, or --engine slurm where Slurm's `sbatch` is not on PATH (submitit's own RuntimeError was a
    traceback after OUT/sweep.json was written)."""
    if engine == "local":
        return
    if engine not in ENGINES:
        raise UsageError(f"--engine {engine!r}: expected local, {' or '.join(ENGINES)}")
    if importlib.util.find_spec("submitit") is None:
        raise UsageError(f"--engine {engine} needs submitit: pip install 'fairseq_compgen[slurm]'")
    if engine == "slurm" and shutil.which("sbatch") is None:
        raise UsageError("--engine slurm: Slurm's sbatch is not on PATH here: expected a Slurm login node (or "
                         "--engine submitit-local to run the same jobs on this machine, or the default local engine)")


def submit_all(ex, runs: Sequence, threads: Optional[int] = None, echo: Callable[[str], None] = print) -> List[dict]:
    """Submit every run as one job array, wait, and return each run's result (a failed job is a failed run)."""
    with ex.batch():
        jobs = [ex.submit(job, r, threads) for r in runs]
    if jobs:
        echo(f"submitted {len(jobs)} run(s) as {type(ex).__name__} jobs "
             f"{jobs[0].job_id}{'...' + jobs[-1].job_id if len(jobs) > 1 else ''}; waiting (Ctrl-C leaves them running)")
    results = []
    for r, j in zip(runs, jobs):
        try:
            res = j.result()
        except Exception as e:  # the job died (timeout, node failure, an exception in job()): its log says why
            echo(f"FAILED {r.name}: job {j.job_id} failed: {str(e).strip().splitlines()[-1] if str(e).strip() else e!r}"
                 f" (submitit logs: {Path(str(j.paths.stderr))})")
            res = {"run": r.name, "status": "failed", "stage": "job"}
        echo(f"{res['status']:6s} {r.name} (job {j.job_id})")
        results.append(res)
    return results
