"""Sweeps on an existing engine: every run as a submitit job. The local executor runs the same jobs
as processes of this machine, so the Slurm path (pickled job -> lock, train, eval, done.json) is tested here."""
import json

import pytest
import yaml

from fairseq_compgen.errors import UsageError
from fairseq_compgen.pipelines import aggregate, submit, sweep


def _submitit():
    """submitit, for the tests that need it (the `slurm` extra; under CI=true a missing extra fails the run)."""
    return pytest.importorskip("submitit", reason="the `slurm` extra (pip install 'fairseq_compgen[slurm]')")

TINY = ("--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 16 --decoder-embed-dim 16 "
        "--encoder-ffn-embed-dim 32 --decoder-ffn-embed-dim 32 --encoder-attention-heads 2 --decoder-attention-heads 2 "
        "--num-workers 0 --max-update 4 --batch-size 16 --validate-interval-updates 4 --save-interval-updates 4")


def test_a_submitit_local_sweep_of_two_tiny_runs(scan_bin, tmp_path):
    _submitit()
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({
        "name": "tiny_submitit", "seeds": [1, 2], "flags": TINY,
        "datasets": {"scan": {"data": str(scan_bin), "recipe": "csordas/scan", "subsets": ["gen"]}},
        "configurations": {"trafo": {"arch": "compgen_transformer_{recipe}"}}}))
    out, said = tmp_path / "out", []
    results = sweep.run_sweep(path, out, cpu=True, threads=1, engine="submitit-local", echo=said.append)
    assert [r["status"] for r in results] == ["done", "done"], said
    assert any(s.startswith("submitted 2 run(s) as AutoExecutor jobs") for s in said), said
    for seed in (1, 2):
        run = out / "scan" / "trafo" / f"seed{seed}"
        done = json.loads((run / "done.json").read_text())
        assert done["num_updates"] == 4 and done["seed"] == seed
        assert done["metrics"]["gen"]["n"] == 24 and done["accuracy"]["gen"] == done["metrics"]["gen"]["accuracy"]
        assert "--seed " + str(seed) in (run / "command.txt").read_text()
    assert list((out / ".submitit").glob("*_log.out"))  # submitit's own per-job logs
    # a rerun submits nothing: each run is done (it submitted them again, each job waiting to say so: the sweep
    # audit of 2026-11-29)
    said.clear()
    again = sweep.run_sweep(path, out, cpu=True, threads=1, engine="submitit-local", echo=said.append)
    assert [r["status"] for r in again] == ["skipped", "skipped"]
    assert not any(s.startswith("submitted") for s in said) and "skip   scan/trafo/seed1 (done)" in said, said
    assert aggregate.main([str(out), "--no-plots"]) == 0


def test_unknown_engine_is_refused():
    with pytest.raises(UsageError, match="--engine 'pbs'"):
        submit.executor("pbs", "/tmp/x")


def test_slurm_where_there_is_none_is_one_line_before_anything_is_written(tmp_path, monkeypatch, scan_bin):
    """--engine slurm without Slurm was submitit's RuntimeError traceback, after OUT/sweep.json was written (sweep
    audit, 2026-11-29)."""
    _submitit()
    (tmp_path / "bin").mkdir()  # a PATH without sbatch
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"datasets": {"scan": {"data": str(scan_bin)}},
                                    "configurations": {"t": {"arch": "compgen_transformer_scan"}}}))
    with pytest.raises(UsageError, match=r"^--engine slurm: Slurm's sbatch is not on PATH here: expected a Slurm "
                                         r"login node \(or --engine submitit-local"):
        sweep.run_sweep(path, tmp_path / "out", engine="slurm", echo=lambda s: None)
    assert not (tmp_path / "out").exists()


def test_slurm_resources_reach_the_sbatch_script(tmp_path, monkeypatch):
    """No Slurm here: stand-ins for `srun` and `sbatch` on PATH lets submitit build its executor, whose sbatch script is checked."""
    _submitit()
    (tmp_path / "bin").mkdir()
    for tool in ("srun", "sbatch"):
        (tmp_path / "bin" / tool).write_text("#!/bin/sh\nexit 0\n")
        (tmp_path / "bin" / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{__import__('os').environ['PATH']}")
    ex = submit.executor("slurm", tmp_path / "s", gpus_per_node=1, timeout_min=90, partition="gpu", cpus_per_task=4,
                         mem_gb=16, array_parallelism=8, name="t")
    script = ex._executor._make_submission_file_text("python -m x", "uid")
    for line in ("#SBATCH --partition=gpu", "#SBATCH --time=90", "#SBATCH --gpus-per-node=1",
                 "#SBATCH --cpus-per-task=4", "#SBATCH --mem=16GB", "#SBATCH --job-name=t"):
        assert line in script, (line, script)
    assert ex._executor.parameters["array_parallelism"] == 8


def test_threads_of_a_job_default_to_what_it_was_given(tmp_path, monkeypatch, scan_bin):
    """A submitit job ran on torch's default threads whatever Slurm gave it, and submitit-local's jobs, which run at
    once on this machine, each on every core (sweep audit, 2026-11-29)."""
    seen = []
    monkeypatch.setattr(submit, "Runner", lambda jobs, threads, echo: seen.append(threads) or
                        type("R", (), {"run_one": lambda self, run: {"status": "done"}})())
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "6")
    submit.job(None)
    submit.job(None, threads=2)
    monkeypatch.delenv("SLURM_CPUS_PER_TASK")
    submit.job(None)
    assert seen == [6, 2, None]
    _submitit()
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"seeds": [1, 2, 3, 4], "datasets": {"scan": {"data": str(scan_bin)}},
                                    "configurations": {"t": {"arch": "compgen_transformer_scan",
                                                             "flags": "--max-update 4 --batch-size 8"}}}))
    given = []
    monkeypatch.setattr(submit, "submit_all", lambda ex, runs, threads, echo: given.append((len(runs), threads)) or [])
    monkeypatch.setattr(sweep.os, "cpu_count", lambda: 8)
    sweep.run_sweep(path, tmp_path / "out", cpu=True, engine="submitit-local", echo=lambda s: None)
    sweep.run_sweep(path, tmp_path / "out", cpu=True, engine="submitit-local", threads=1, echo=lambda s: None)
    assert given == [(4, 2), (4, 1)]
