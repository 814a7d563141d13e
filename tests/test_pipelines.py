"""Experiment pipelines: sweep runner (run, resume, skip, evaluate), aggregator (tables, plots),
`fairseq-compgen train --nprocs 2 --cpu` (torchrun, gloo) against the single-process run, and the sweep files."""
import csv
import json
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fairseq_compgen.pipelines import aggregate, curves, pooling, runner, sweep, tables, train, train_log
from fairseq_compgen.errors import UsageError

REPO = Path(__file__).resolve().parents[1]
# scan_bin: tests/conftest.py
TINY = ("--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 32 --decoder-embed-dim 32 "
        "--encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 2 --decoder-attention-heads 2 "
        # no data-loader worker process: a run stopped mid-epoch by --max-update once aborted at interpreter exit
        # ("terminate called without an active exception", exit -6) with fairseq's default worker still alive
        "--num-workers 0")


def _train_losses(log: Path):
    """num_updates -> train loss from fairseq's train_inner JSON records (--log-interval 1)."""
    return _train_losses_from(log.read_text())


# ----------------------------------------------------------------------------------------------- sweep, end to end
def test_tiny_sweep_resume_skip_evaluate_aggregate(scan_bin, tmp_path):
    spec = {
        "name": "tiny", "seeds": [1, 2],
        "flags": f"{TINY} --max-update 6 --batch-size 16 --validate-interval-updates 3 --save-interval-updates 3 "
                 "--log-interval 1",
        "datasets": {"scan": {"label": "SCAN tiny", "data": str(scan_bin), "recipe": "csordas/scan",
                                      "subsets": ["gen"]}},
        "configurations": {
            "trafo": {"arch": "compgen_transformer_{recipe}", "label": "Transformer"},
            "reluni": {"arch": "rel_uni_transformer_scan"},
        },
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    out = tmp_path / "out"
    runs = sweep.plan(sweep.load_sweep(path), out, cpu=True)
    assert [r.name for r in runs] == ["scan/trafo/seed1", "scan/trafo/seed2", "scan/reluni/seed1", "scan/reluni/seed2"]
    assert runs[0].arch == "compgen_transformer_scan" and "--cpu" in runs[0].launch

    # A run stopped after 3 of its 6 updates: checkpoint_last.pt at update 3, no done marker.
    victim = runs[1]
    victim.path.mkdir(parents=True)
    with open(victim.path / "train.log", "a") as log:
        subprocess.run(victim.train_command() + ["--max-update", "3"], stdout=log, stderr=subprocess.STDOUT,
                       env=runner.tool_env(threads=1), check=True)
    assert victim.checkpoint.is_file() and not victim.is_done()
    assert train_log.last_num_updates(victim.path / "train.log") == 3
    # ... and it had logged updates 4-5 before it was stopped, after its last save: the resume starts at the
    # checkpoint's update, not the log's.
    with open(victim.path / "train.log", "a") as log:
        log.write('2026-01-01 00:00:00 | INFO | train_inner | {"epoch": 1, "num_updates": "5"}\n')
    assert train_log.last_num_updates(victim.path / "train.log") == 5
    # ... and it was stopped while fairseq copied its save checkpoint_1_3.pt over checkpoint_last.pt: the runner
    # resumes from the whole save and keeps the cut-off file aside
    whole = victim.checkpoint.read_bytes()
    (victim.path / "checkpoint_1_3.pt").write_bytes(whole)
    victim.checkpoint.write_bytes(whole[: len(whole) // 3])

    said = []
    results = sweep.run_sweep(path, out, jobs=2, cpu=True, threads=1, echo=said.append)
    assert [r["status"] for r in results] == ["done"] * 4, said
    assert any("scan/trafo/seed2 (resuming after update 3)" in s for s in said)
    assert any(s.startswith("repair scan/trafo/seed2: ") and "checkpoint_1_3.pt (update 3)" in s for s in said), said
    assert (victim.path / "checkpoint_last.pt.incomplete").read_bytes() == whole[: len(whole) // 3]
    for r in runs:
        done = json.loads((r.path / "done.json").read_text())
        assert done["num_updates"] == 6 and done["seed"] == r.seed
        assert (r.path / "command.txt").read_text().startswith("fairseq-train ")
        assert "--seed " + str(r.seed) in (r.path / "command.txt").read_text()
        assert len((r.path / "commit.txt").read_text().split()[0]) in (40, 7) or "unknown" in (r.path / "commit.txt").read_text()
        assert (r.path / "launch.txt").read_text().startswith("fairseq-compgen train --cpu ")
        ev = json.loads((r.path / "eval" / "gen.json").read_text())
        assert ev["n"] == 24 and done["accuracy"]["gen"] == ev["accuracy"]
        # cost and place: the eval call's time, fairseq's clock in train.log, and where it trained
        machine = json.loads((r.path / "machine.txt").read_text())
        assert done["eval_s"] > 0 and train_log.train_wall(r.path / "train.log") >= 0
        # the process's CPU clock in every training summary, the victim's two invocations added up (tasks/clocks.py)
        assert train_log.train_cpu(r.path / "train.log") > 0
        assert machine["threads"] == 1 and machine["gpu"] is None and machine["cores"] >= 1
        # one checkpoint per save: the interval copy identical to checkpoint_last.pt is gone, _last and _best stay
        assert sorted(p.name for p in r.path.glob("checkpoint*.pt")) == ["checkpoint_best.pt", "checkpoint_last.pt"]
    # the victim resumed from its checkpoint: its second training logged updates 4..6 only
    text = (victim.path / "train.log").read_text()
    second = text[text.rindex("sweep: "):]
    assert "Loaded checkpoint" in second and "(epoch 1 @ 3 updates)" in second
    assert sorted(_train_losses_from(second)) == [4, 5, 6]

    # Rerun: everything is skipped, nothing is touched.
    stamps = {r.name: (r.path / "train.log").stat().st_mtime_ns for r in runs}
    again = sweep.run_sweep(path, out, jobs=2, cpu=True, threads=1, echo=said.append)
    assert [r["status"] for r in again] == ["skipped"] * 4
    assert stamps == {r.name: (r.path / "train.log").stat().st_mtime_ns for r in runs}

    # Aggregate: the table's numbers are the per-run JSONs' mean and sample std.
    assert aggregate.main([str(out), "--best"]) == 0
    rows = list(csv.DictReader(open(out / "table.csv")))
    assert [(row["dataset"], row["subset"], row["configuration"]) for row in rows] == [
        ("scan", "gen", "trafo"), ("scan", "gen", "reluni")]
    md = (out / "table.md").read_text()
    for row in rows:
        accs = [json.loads((out / "scan" / row["configuration"] / f"seed{s}" / "eval" / "gen.json").read_text())["accuracy"]
                for s in (1, 2)]
        assert int(row["n"]) == 2
        assert float(row["mean"]) == pytest.approx(statistics.mean(accs))
        assert float(row["std"]) == pytest.approx(statistics.stdev(accs))
        assert f"{statistics.mean(accs):.2f} ± {statistics.stdev(accs):.2f}" in md
    assert "| Transformer |" in md and "SCAN tiny: gen" in md
    # the per-run table: every seed's value beside its updates, cost, commit and machine
    per_run = list(csv.DictReader(open(out / "runs.csv")))
    assert [(row["configuration"], row["seed"]) for row in per_run] == [
        ("trafo", "1"), ("trafo", "2"), ("reluni", "1"), ("reluni", "2")]
    for row in per_run:
        done = json.loads((out / "scan" / row["configuration"] / f"seed{row['seed']}" / "done.json").read_text())
        assert float(row["gen"]) == done["accuracy"]["gen"] and row["updates"] == "6"
        assert row["commit"] == (done["commit"] or "")[:7] + (" dirty" if done["dirty"] else "")
        data = json.loads((out / "scan" / row["configuration"] / f"seed{row['seed']}" / "data.json").read_text())
        assert row["data"] == train.same_data_key(data)[:12]  # the data files' hash pooling compares
        machine = json.loads((out / "scan" / row["configuration"] / f"seed{row['seed']}" / "machine.txt").read_text())
        assert row["machine"].startswith(machine["host"] + ": ") and row["machine"].endswith(", 1 threads, no GPU")
        log = out / "scan" / row["configuration"] / f"seed{row['seed']}" / "train.log"
        assert float(row["train_wall_s"]) == train_log.train_wall(log) and float(row["eval_s"]) == done["eval_s"]
        assert float(row["train_cpu_s"]) == train_log.train_cpu(log) > 0
    assert (out / "runs.md").read_text().count("\n") == 2 + 4
    assert (out / "plots" / "scan.png").stat().st_size > 1000
    logged = curves.learning_curves(victim.path / "train.log")
    assert sorted(logged["gen"]) == [3, 6] and sorted(logged["valid"]) == [3, 6]


def _train_losses_from(text: str):
    records = (json.loads(m) for m in re.findall(r"\| train_inner \| (\{.*\})$", text, flags=re.M))
    return {int(r["num_updates"]): float(r["loss"]) for r in records}


def test_train_keeps_one_copy_of_the_last_checkpoint(scan_bin, tmp_path):
    """fairseq-train writes each save as checkpoint_E_U.pt and copies it to checkpoint_last.pt (and _best): a plain
    `fairseq-compgen train` removes the copies identical to checkpoint_last.pt when it ends; earlier saves stay."""
    save = tmp_path / "run"
    cmd = [sys.executable, "-m", "fairseq_compgen.cli", "train", "--cpu", "compgen_transformer_scan", str(scan_bin),
           str(save), *TINY.split(), "--max-update", "4", "--batch-size", "16", "--save-interval-updates", "2",
           "--validate-interval-updates", "2"]
    done = subprocess.run(cmd, env=runner.tool_env(threads=1), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    written = set(re.findall(r"Saved checkpoint \S*/(checkpoint\w*\.pt) \(epoch \d+ @ (\d+) updates",
                             done.stdout + done.stderr))  # fairseq's log: (file, update)
    assert {u for _, u in written} == {"2", "4"}, written
    kept = sorted(p.name for p in save.glob("checkpoint*.pt"))
    fourth = {f for f, u in written if u == "4" and f not in ("checkpoint_last.pt", "checkpoint_best.pt")}
    second = {f for f, u in written if u == "2" and f not in ("checkpoint_last.pt", "checkpoint_best.pt")}
    assert fourth and not fourth & set(kept) and second <= set(kept) and "checkpoint_last.pt" in kept, (written, kept)
    last = (save / "checkpoint_last.pt").read_bytes()
    assert all((save / k).read_bytes() != last for k in kept if k not in ("checkpoint_last.pt", "checkpoint_best.pt"))


# ------------------------------------------------------------------------------------- distributed CPU (gloo)
def test_two_cpu_ranks_match_single_process(scan_bin, tmp_path):
    """2 ranks x batch 8 == 1 process x batch 16: same seed (same init and same length-sorted order), dropout 0,
    and --curriculum 1 so that the first epoch's batches are not shuffled: batch k of size 16 is then exactly
    batches 2k and 2k+1 of size 8, which ranks 0 and 1 take (fairseq shards batches round-robin), and fairseq
    normalizes the summed gradients by the summed sample size. Without --curriculum the batch lists (of different
    lengths) would be shuffled differently."""
    flags = (f"{TINY} --dropout 0 --attention-dropout 0 --activation-dropout 0 --lr 1e-3 --max-update 4 "
             "--log-interval 1 --disable-validation --no-save --curriculum 1 --seed 3").split()
    env = runner.tool_env(threads=1)
    train = [sys.executable, "-m", "fairseq_compgen.cli", "train", "--cpu"]
    logs = {k: open(tmp_path / f"{k}.log", "w") for k in ("single", "ranks")}
    procs = [
        subprocess.Popen(train + ["compgen_transformer_scan", str(scan_bin), str(tmp_path / "single"),
                                  *flags, "--batch-size", "16"], stdout=logs["single"], stderr=subprocess.STDOUT, env=env),
        subprocess.Popen(train + ["--nprocs", "2", "compgen_transformer_scan", str(scan_bin), str(tmp_path / "ranks"),
                                  *flags, "--batch-size", "8"], stdout=logs["ranks"], stderr=subprocess.STDOUT, env=env),
    ]
    assert [p.wait(timeout=300) for p in procs] == [0, 0], (tmp_path / "ranks.log").read_text()[-3000:]
    single, ranks = _train_losses(tmp_path / "single.log"), _train_losses(tmp_path / "ranks.log")
    assert sorted(single) == sorted(ranks) == [1, 2, 3, 4]
    for step in single:
        assert ranks[step] == pytest.approx(single[step], abs=2e-3), (step, single, ranks)
    log = (tmp_path / "ranks.log").read_text()
    assert "distributed init (rank 1)" in log and "'distributed_world_size': 2" in log
    assert '"bsz": "16"' in log  # the logged batch is the global one (2 x 8)
    cmd = (tmp_path / "ranks" / "command.txt").read_text()  # the torchrun command that started the ranks
    assert "torch.distributed.run --standalone --nproc-per-node=2" in cmd and "--cpu-dist" in cmd


# ------------------------------------------------------------------------------------------ aggregator, synthetic
def _fake_sweep(out: Path, accs, logs=None, name="fake", command=None):
    """accs: {(dataset, config): {seed: {subset: acc}}} as finished runs (None: planned, not finished);
    command(seed, folder): the run's command.txt."""
    runs = []
    for (d, c), seeds in accs.items():
        for seed, per_subset in seeds.items():
            folder = out / d / c / f"seed{seed}"
            runs.append({"dataset": d, "config": c, "seed": seed, "arch": "compgen_transformer", "dir": str(folder),
                         "subsets": None, "flags": []})
            folder.mkdir(parents=True)
            if per_subset is None:
                continue
            (folder / "eval").mkdir()
            for s, a in per_subset.items():
                (folder / "eval" / f"{s}.json").write_text(json.dumps({"n": 10, "correct": 0, "accuracy": a}))
            (folder / "done.json").write_text("{}")
            if logs:
                (folder / "train.log").write_text(logs(seed))
            if command:
                (folder / "command.txt").write_text(command(seed, folder))
    spec = {"name": name, "datasets": {"scan": {"label": "SCAN"}}, "configurations": {"b": {"label": "Big"}}}
    (out / "sweep.json").write_text(json.dumps({"spec": spec, "runs": runs}))


def test_aggregate_mean_sample_std_best_and_missing(tmp_path):
    def log(seed):
        return "".join(
            f"2026 | INFO | gen | epoch 001 | valid on 'gen' subset | loss 1 | ppl 2 | accuracy {u / 1000} "
            f"| wps 1 | num_updates {u}\n" for u in (100, 200)
        ) + "junk\n2026 | INFO | gen | epoch 001 | valid on 'gen' subset | loss 1 | accuracy 0.9 | num_updates 200\n"

    _fake_sweep(tmp_path, {
        ("scan", "a"): {1: {"valid": 1.0, "gen": 0.10}, 2: {"valid": 1.0, "gen": 0.20}, 3: {"valid": 0.97, "gen": 0.60}},
        ("scan", "b"): {1: {"valid": 0.99, "gen": 0.50}, 2: {"valid": 0.98, "gen": 0.70}, 3: None},
    }, logs=log)
    spec, runs, cells = pooling.collect(tmp_path)
    a, b = cells["scan", "gen", "a"], cells["scan", "gen", "b"]
    assert a.mean == pytest.approx(0.3) and a.std == pytest.approx(math.sqrt(((0.2) ** 2 + 0.1 ** 2 + 0.3 ** 2) / 2))
    assert b.n == 2 and b.planned == 3 and b.std == pytest.approx(math.sqrt(0.02))
    md = tables.markdown_table(spec, cells, best=True, scale=100, digits=1)
    assert md.splitlines()[0] == "| Configuration | SCAN: valid | SCAN: gen |"
    assert "| a | **99.0 ± 1.7** | 30.0 ± 26.5 |" in md
    assert "| Big | 98.5 ± 0.7 (2/3) | **60.0 ± 14.1** (2/3) |" in md
    t = tables.markdown_table(spec, cells, transpose=True)
    assert t.splitlines()[0] == "| Dataset: subset | a | Big |"
    assert aggregate.main([str(tmp_path), "--best"]) == 0
    rows = {(r["subset"], r["configuration"]): r for r in csv.DictReader(open(tmp_path / "table.csv"))}
    assert rows["gen", "b"]["best"] == "1" and rows["gen", "a"]["best"] == "0"
    assert rows["gen", "a"]["values"] == "1=0.1;2=0.2;3=0.6"
    # the paper's value, as the sweep file writes it, beside ours (markdown and csv); --spec takes it from a
    # sweep file written after the runs were planned, of the same sweep only
    spec["configurations"]["b"]["paper"] = {"scan/gen": "75.0 ± 5.0"}  # in the paper's units (--scale 100)
    assert "| Big | 98.5 ± 0.7 (2/3) | **60.0 ± 14.1** (2/3) (paper 75.0 ± 5.0; outside) |" in tables.markdown_table(
        spec, cells, best=True, scale=100, digits=1)
    later = tmp_path / "later.yaml"
    later.write_text(yaml.safe_dump({"name": "fake", "datasets": {"scan": {"data": "x"}}, "configurations": {
        "b": {"arch": "compgen_transformer", "label": "Big", "paper": {"scan/gen": "0.70 ± 0.05"}}}}))
    assert aggregate.main([str(tmp_path), "--no-plots", "--spec", str(later)]) == 0
    rows = {(r["subset"], r["configuration"]): r for r in csv.DictReader(open(tmp_path / "table.csv"))}
    assert rows["gen", "b"]["paper"] == "0.70 ± 0.05" and rows["gen", "a"]["paper"] == rows["valid", "b"]["paper"] == ""
    assert rows["gen", "b"]["verdict"] == "inside" and rows["gen", "a"]["verdict"] == ""  # 0.60 within 2 x 0.05
    assert "(paper 0.70 ± 0.05; inside)" in (tmp_path / "table.md").read_text()
    later.write_text(later.read_text().replace("name: fake", "name: other"))
    with pytest.raises(UsageError, match="--spec .*later.yaml: its sweep is 'other', the runs' is 'fake'"):
        aggregate.main([str(tmp_path), "--no-plots", "--spec", str(later)])
    # a single seed has no sample std
    one = pooling.Cell("scan", "gen", "x", 1, {1: 0.5})
    assert math.isnan(one.std) and tables.format_cell(one, 1, 2) == "0.50 ± -"
    # learning curves: a later line for the same update (e.g. after a resume) wins
    assert curves.learning_curves(Path(runs[0]["dir"]) / "train.log") == {"gen": {100: 0.1, 200: 0.9}}
    assert (tmp_path / "plots" / "scan.png").stat().st_size > 1000


@pytest.mark.parametrize("values, paper, scale, expected", [
    ([0.30, 0.34], "0.30 ± 0.02", 1, "inside"),  # mean 0.32: within 2 std
    ([0.30, 0.40], "0.30 ± 0.02", 1, "outside"),  # mean 0.35
    ([1.0, 0.996], "1.00 ± 0.00", 1, "inside"),  # std 0.00 as printed: half a unit of the last digit
    ([1.0, 0.98], "1.00 ± 0.00", 1, "outside"),
    ([0.59, 0.60], "0.637", 1, "inside"),  # a single value: within 0.05
    ([0.57, 0.58], "0.637", 1, "outside"),
    ([0.70, 0.80], "78.4", 100, "inside"),  # --scale 100: the band is 5 points
    ([0.97, 0.98], "median 91.0", 100, ""),  # not a number: no verdict
    ([0.998, 0.999], "99.8 ± 0.1", 1, "not compared: the paper's value is in percent, ours a fraction: --scale 100"),
    ([26.28, 26.32], "26.3", 1, "inside"),  # BLEU: both above 1, no percent mix-up
    ([0.15, 0.17], "43.0 ± 9.5 (SEM, 3 seeds)", 100, "inside"),  # std 9.5 * sqrt(3) = 16.45: band [10.1, 75.9]
    ([0.09, 0.10], "43.0 ± 9.5 (SEM, 3 seeds)", 100, "outside"),  # mean 9.5: 33.5 below, beyond 2 x 16.45
    ([0.20, 0.22], "43.0 ± 9.5", 100, "outside"),  # the same numbers read as a std: band [24, 62]
    ([0.20, 0.22], "43.0 ± 9.5 (sem, 3 seeds)", 100, "inside"),  # however the suffix is cased
    # marked percent: compared with our fractions at any --scale (unmarked, 0.4 at scale 1 read as a fraction
    # took a mean of 0.4 % for "inside" 0.4 ± 0.3)
    ([0.003, 0.005], "0.4 ± 0.3 %", 1, "inside"),
    ([0.003, 0.005], "0.4 ± 0.3 %", 100, "inside"),
    ([0.40, 0.40], "0.4 ± 0.3 %", 1, "outside"),
    ([0.40, 0.40], "0.4 ± 0.3", 1, "inside"),
    ([0.998, 0.999], "99.8% ± 0.1%", 1, "inside"),
    ([0.998, 0.999], "99.8 ± 0.1 %", 100, "inside"),
    ([0.15, 0.17], "43.0 ± 9.5 % (SEM, 3 seeds)", 1, "inside"),
    ([0.15, 0.17], "43.0 ± 9.5 (SEM, 3 seeds) %", 1, "inside"),
    ([0.09, 0.10], "43.0 ± 9.5 % (SEM, 3 seeds)", 100, "outside"),
    ([0.995, 1.0], "100.0 %", 1, "inside"),  # a single value: within 5 points
    ([0.94, 0.95], "100.0 %", 100, "outside"),
    ([0.0101, 0.0101], "1.00 ± 0.00 %", 1, "outside"),  # half a unit of the last digit: 0.005 points
    ([0.01, 0.01], "1.00 ± 0.00 %", 1, "inside"),
])
def test_verdict_against_the_papers_band(values, paper, scale, expected):
    cell = pooling.Cell("scan", "gen", "x", len(values), dict(enumerate(values, 1)))
    assert tables.verdict(cell, paper, scale) == expected
    assert tables.verdict(pooling.Cell("scan", "gen", "x", 2, {}), paper, scale) == ""  # no runs yet


def test_aggregate_pools_folders_of_one_sweep_and_refuses_what_differs(tmp_path):
    """Seeds of one sweep run into two folders (another day, another machine) make one cell; a seed finished in
    both, runs trained with other options, or folders of different sweeps are refused with one line."""
    def command(lr="1e-3", fmt="simple", data="/a/data/bin"):
        # machine- and run-specific words differ (data path, --user-dir, logging options, --cpu), the protocol not
        return lambda seed, folder: (f"fairseq-train {data} --user-dir {folder.parent} --arch compgen_transformer "
                                     f"--optimizer adam --adam-betas '(0.9, 0.98)' --lr {lr} --optimizer adam "
                                     f"--log-format {fmt} --save-dir {folder} --seed {seed}"
                                     + (" --cpu --log-interval 10 --no-progress-bar" if fmt == "json" else ""))

    first, later = tmp_path / "first", tmp_path / "later"
    _fake_sweep(first, {("scan", "a"): {1: {"gen": 0.2}, 2: {"gen": 0.4}, 3: None}}, command=command())
    _fake_sweep(later, {("scan", "a"): {1: None, 2: None, 3: {"gen": 0.9}}},
                command=command(fmt="json", data="/b/data/bin"))
    spec, runs, cells = pooling.collect([first, later])
    cell = cells["scan", "gen", "a"]
    assert cell.values == {1: 0.2, 2: 0.4, 3: 0.9} and cell.planned == 3
    assert [Path(r["dir"]).parts[-4] for r in runs] == ["first", "first", "later"]
    assert aggregate.main([str(first), str(later), "--no-plots", "--export", str(tmp_path / "res")]) == 0
    assert "0.50 ± 0.36 |" in (first / "table.md").read_text()
    assert (tmp_path / "res" / "sweep.json").is_file() and (tmp_path / "res" / "sweep.2.later.json").is_file()
    assert (tmp_path / "res" / "scan" / "a" / "seed3" / "command.txt").is_file()

    other_lr = tmp_path / "other_lr"
    _fake_sweep(other_lr, {("scan", "a"): {1: None, 2: None, 3: {"gen": 0.9}}}, command=command(lr="5e-4"))
    with pytest.raises(UsageError, match=r"different options \(--lr: 1e-3 vs 5e-4\)"):
        pooling.collect([first, other_lr])
    twice = tmp_path / "twice"
    _fake_sweep(twice, {("scan", "a"): {1: None, 2: {"gen": 0.5}, 3: None}}, command=command())
    with pytest.raises(UsageError, match="scan/a/seed2 finished in both .*first.* and .*twice"):
        pooling.collect([first, twice])
    foreign = tmp_path / "foreign"
    _fake_sweep(foreign, {("scan", "a"): {3: {"gen": 0.9}}}, name="another", command=command())
    with pytest.raises(UsageError, match=r"different sweeps \(fake, another\)"):
        pooling.collect([first, foreign])


# ------------------------------------------------------------------------------------------------ sweep files
SWEEPS = sorted((REPO / "fairseq_compgen" / "sweeps").glob("*.yaml"))


def test_sweep_files_plan_and_use_registered_archs(tmp_path):
    from fairseq_compgen.models.standalone import compgen_archs, tagger_archs

    # encoder-decoder archs, and the encoder-only taggers of sweeps/ontanon_tagging.yaml
    archs = set(compgen_archs()) | set(tagger_archs())
    from fairseq_compgen import recipes

    assert SWEEPS, "no sweep files"
    for path in SWEEPS:
        spec = sweep.load_sweep(path)
        runs = sweep.plan(spec, tmp_path / path.stem)
        assert runs, path
        for r in runs:
            assert r.arch in archs, (path.name, r.name, r.arch)
            assert r.recipe is None or r.recipe in recipes.names(), (path.name, r.recipe)
        names = [r.name for r in runs]
        assert len(names) == len(set(names)), path


def test_every_shipped_and_campaign_sweep_passes_the_checks_its_runs_get(tmp_path):
    """sweep.validate on each file: archs, recipes, budgets, fairseq-train's parser and each model's own flag
    check (check_training_flags: sizes, dropouts, position options no chosen encoding takes), as a sweep's dry run
    does before any run; a new check that a shipped configuration fails is found here, not by a campaign lane."""
    paths = SWEEPS + sorted((REPO / "campaign").glob("*.yaml"))
    for path in paths:
        sweep.validate(path, sweep.plan(sweep.load_sweep(path), tmp_path / path.stem))


def test_dry_run_prints_commands(tmp_path, scan_bin):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"seeds": [7], "launch": {"gpus": 4}, "datasets": {"d": {"data": str(scan_bin)}},
                                    "configurations": {"c": {"arch": "rel_uni_transformer", "flags": ["--lr 1e-4"]}}}))
    said = []
    sweep.run_sweep(path, tmp_path / "o", dry_run=True, echo=said.append)
    assert len(said) == 1 and "fairseq_compgen.cli train --gpus 4 rel_uni_transformer" in said[0]
    assert said[0].split("\n")[1].endswith("--lr 1e-4 --seed 7") and not (tmp_path / "o").exists()


@pytest.mark.parametrize("recipe, flags", [(["--recipe", "csordas/scan"], []),
                                           ([], ["--batch-size", "8", "--max-update", "2"])])
def test_training_on_a_folder_without_binaries_says_so(tmp_path, recipe, flags):
    """Dictionaries but no binaries gave `ls: cannot access '*.idx'`; now one line naming the folder (with a recipe,
    or without one and a batch size of the user's, which fairseq-train needs)."""
    for side in ("src", "tgt"):
        (tmp_path / f"dict.{side}.txt").write_text("a 1\n")
    p = subprocess.run([sys.executable, "-m", "fairseq_compgen.cli", "train", "--cpu", *recipe, "rel_uni_transformer",
                        str(tmp_path), str(tmp_path / "save"), *flags], capture_output=True, text=True)
    assert p.returncode == 1
    assert p.stderr.strip() == (f"fairseq_compgen: error: {tmp_path} has dictionaries but no binarized train subset "
                                "(train.*.idx): rerun its `fairseq-compgen prep` command")
    assert not (tmp_path / "save" / "command.txt").exists()


def test_evaluate_without_binaries_fails_instead_of_evaluating_nothing(tmp_path):
    """Evaluation of a folder without binaries used to exit 0 having evaluated nothing."""
    ckpt = tmp_path / "checkpoint_last.pt"
    ckpt.write_bytes(b"")
    p = subprocess.run([sys.executable, "-m", "fairseq_compgen.cli", "eval", str(ckpt), str(tmp_path)],
                       capture_output=True, text=True)
    assert p.returncode == 1 and "has no binarized subset other than train" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not (tmp_path / "eval").exists()


def test_aggregate_categories_and_export(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    _fake_sweep(out, {("scan", "a"): {1: {"gen": 0.5}, 2: {"gen": 0.7}, 3: None}},
                logs=lambda seed: ("x | INFO | train_inner | epoch 001:  1 / 9 loss=1\n"
                                   f"x | INFO | valid | epoch 001 | valid on 'gen' subset | accuracy 0.{seed} | "
                                   "num_updates 9\nx | INFO | train | epoch 001 | loss 1 | num_updates 9\nnoise\n"))
    for seed, (x, y) in ((1, (0.2, 0.8)), (2, (0.4, 1.0))):
        path = out / "scan" / "a" / f"seed{seed}" / "eval" / "gen.json"
        result = json.loads(path.read_text())
        result["per_category"] = {"x": {"accuracy": x}, "y": {"accuracy": y}}
        path.write_text(json.dumps(result))
    (out / "scan" / "a" / "seed1" / "command.txt").write_text("fairseq-train ...\n")
    dest = tmp_path / "results" / "fake"
    assert aggregate.main([str(out), "--no-plots", "--categories", "gen", "--export", str(dest)]) == 0
    table = (out / "categories_gen.md").read_text().splitlines()
    assert table[0] == "| category | a (seeds 1, 2) |" and "| x | 0.300 |" in table and "| **overall** | 0.600 |" in table
    run = dest / "scan" / "a" / "seed1"
    assert json.loads((run / "eval" / "gen.json").read_text())["per_category"]["y"]["accuracy"] == 0.8
    assert (run / "command.txt").read_text() == "fairseq-train ...\n" and (run / "done.json").is_file()
    assert [line.split("| INFO | ")[1][:5] for line in (run / "train_metrics.log").read_text().splitlines()] == [
        "valid", "train"]  # validation and epoch lines only, no train_inner, no noise
    assert not (dest / "scan" / "a" / "seed3").exists()  # not finished: nothing to export
    for name in ("sweep.json", "table.md", "table.csv", "categories_gen.md"):
        assert (dest / name).is_file(), name


def test_an_export_written_again_holds_only_this_calls_runs_and_results(tmp_path):
    """Exporting again into an earlier export: a seed no longer finished and a subset no longer evaluated leave
    DEST (they stayed, and `aggregate DEST`, the command its aggregate.json gives, mixed them into the tables:
    helper audit, 2026-11-29); a file the user put into DEST stays."""
    out = tmp_path / "out"
    out.mkdir()
    _fake_sweep(out, {("scan", "a"): {1: {"gen": 0.1, "test": 0.5}, 2: {"gen": 0.2, "test": 0.6},
                                      3: {"gen": 0.9, "test": 0.7}}})
    dest = tmp_path / "results" / "fake"
    assert aggregate.main([str(out), "--no-plots", "--export", str(dest)]) == 0
    assert (dest / "scan" / "a" / "seed3" / "eval" / "test.json").is_file()
    (dest / "scan" / "a" / "seed2" / "notes.txt").write_text("the user's\n")
    (out / "scan" / "a" / "seed3" / "done.json").unlink()  # seed 3 no longer finished
    for seed in (1, 2):  # and test no longer evaluated
        (out / "scan" / "a" / f"seed{seed}" / "eval" / "test.json").unlink()
    assert aggregate.main([str(out), "--no-plots", "--export", str(dest)]) == 0
    assert not (dest / "scan" / "a" / "seed3").exists()
    assert sorted(p.name for p in (dest / "scan" / "a" / "seed1" / "eval").iterdir()) == ["gen.json"]
    assert (dest / "scan" / "a" / "seed2" / "notes.txt").read_text() == "the user's\n"
    again = tmp_path / "again"
    assert aggregate.main([str(dest), "--no-plots", "--tables", str(again)]) == 0
    table = (again / "table.md").read_text()
    assert "| a | 0.15 ± 0.07 (2/3) |" in table and "test" not in table, table
    # an export exported again into itself keeps its runs
    assert aggregate.main([str(dest), "--no-plots", "--export", str(dest)]) == 0
    assert (dest / "scan" / "a" / "seed1" / "eval" / "gen.json").is_file()


def _per_length(folder: Path, subset: str, counts):
    """Give a fake run's eval/<subset>.json a per_length: {length: (n, correct)}."""
    path = folder / "eval" / f"{subset}.json"
    result = json.loads(path.read_text())
    result["per_length"] = {str(k): {"n": n, "correct": c, "accuracy": c / n} for k, (n, c) in counts.items()}
    path.write_text(json.dumps(result, sort_keys=True))  # sorted keys: "10" before "9", as eval writes them


def test_aggregate_by_length_table_plot_and_export(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    _fake_sweep(out, {("scan", "a"): {1: {"gen": 0.5}, 2: {"gen": 0.7}, 3: {"gen": 0.1}},
                      ("scan", "b"): {1: {"gen": 0.2}}})
    runs = out / "scan"
    _per_length(runs / "a" / "seed1", "gen", {9: (4, 4), 10: (2, 1)})
    _per_length(runs / "a" / "seed2", "gen", {9: (4, 2), 10: (2, 0)})
    _per_length(runs / "b" / "seed1", "gen", {9: (4, 1), 10: (2, 2)})
    # seed 3 of a was evaluated before per_length was recorded: left out, and named
    dest = tmp_path / "results" / "fake"
    argv = [str(out), "--by-length", "gen", "--export", str(dest), "--scale", "100", "--digits", "1"]
    assert aggregate.main(argv + ([] if aggregate.have_matplotlib() else ["--no-plots"])) == 0
    text = (out / "by_length_gen.md").read_text()
    rows = text.splitlines()
    assert rows[0] == "### SCAN: gen, exact match (%) per reference length (tokens), mean ± std over seeds"
    assert rows[2] == "| reference length | examples | a (seeds 1, 2) | Big (seeds 1) |"
    assert rows[4:6] == ["| 9 | 4 | 75.0 ± 35.4 | 25.0 |",  # numerically ordered: 9 before 10; --scale, --digits
                         "| 10 | 2 | 25.0 ± 35.4 | 100.0 |"]
    assert "Left out: 1 finished run(s) whose eval/gen.json has no per_length (evaluated before it was recorded) and " \
           "whose outputs were not kept: scan/a/seed3." in text
    assert (dest / "by_length_gen.md").read_text() == text
    if aggregate.have_matplotlib():  # the plots of the call travel with the export
        assert (out / "plots" / "scan_by_length_gen.png").stat().st_size > 0
        written = sorted(p.name for p in (out / "plots").iterdir())
        assert sorted(p.name for p in (dest / "plots").iterdir()) == written
        for name in written:
            assert (dest / "plots" / name).read_bytes() == (out / "plots" / name).read_bytes()


def test_aggregate_by_length_counts_from_kept_outputs_and_checks_them(tmp_path):
    """A run scored before per_length was recorded, whose outputs were kept (eval/gen.outputs.gz): its counts per
    length come from those, checked against the result's overall count; the export carries the outputs along."""
    import gzip

    out = tmp_path / "out"
    out.mkdir()
    _fake_sweep(out, {("scan", "a"): {1: {"gen": 2 / 3}, 2: {"gen": 2 / 3}}})
    _per_length(out / "scan" / "a" / "seed1", "gen", {1: (1, 1), 2: (1, 0), 3: (1, 1)})
    seed2 = out / "scan" / "a" / "seed2" / "eval"
    (seed2 / "gen.json").write_text(json.dumps({"n": 3, "correct": 2, "accuracy": 2 / 3}))  # no per_length
    (seed2 / "gen.outputs.gz").write_bytes(gzip.compress(
        b"S-0\tx\nT-0\tA B\nH-0\t-0.1\tA B\nS-2\tz\nT-2\tA\nH-2\t-0.3\tB\nT-1\tA B C\nH-1\t-0.2\tA B C\n"))
    dest = tmp_path / "results" / "fake"
    (seed2 / "valid.json").write_text(json.dumps({"n": 1, "correct": 1, "accuracy": 1.0,
                                                  "per_length": {"2": {"n": 1, "correct": 1, "accuracy": 1.0}}}))
    assert aggregate.main([str(out), "--no-plots", "--by-length", "gen", "--by-length", "valid",
                           "--export", str(dest), "--digits", "3"]) == 0
    assert (out / "by_length_valid.md").read_text().splitlines()[4] == "| 2 | 1 | 1.000 |"  # one per subset
    rows = (out / "by_length_gen.md").read_text().splitlines()
    assert rows[2] == "| reference length | examples | a (seeds 1, 2) |"
    assert rows[4:7] == ["| 1 | 1 | 0.500 ± 0.707 |", "| 2 | 1 | 0.500 ± 0.707 |", "| 3 | 1 | 1.000 ± 0.000 |"]
    assert not any(row.startswith("Left out") for row in rows)
    assert (dest / "scan" / "a" / "seed2" / "eval" / "gen.outputs.gz").read_bytes() == (
        seed2 / "gen.outputs.gz").read_bytes()

    (seed2 / "gen.json").write_text(json.dumps({"n": 3, "correct": 3, "accuracy": 1.0}))  # not what they give
    with pytest.raises(UsageError) as e:
        aggregate.main([str(out), "--no-plots", "--by-length", "gen"])
    assert str(e.value) == (f"{seed2 / 'gen.outputs.gz'}: 2 of 3 exactly right, but {seed2 / 'gen.json'} records 3 "
                            "of 3: expected the outputs it was scored from")


def test_aggregate_by_length_refuses_runs_on_other_data_and_runs_without_counts(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    _fake_sweep(out, {("scan", "a"): {1: {"gen": 0.5}, 2: {"gen": 0.7}}})
    with pytest.raises(UsageError) as e:
        aggregate.main([str(out), "--no-plots", "--by-length", "gen"])
    assert str(e.value).startswith("--by-length gen: no finished run's eval/gen.json has per_length")
    with pytest.raises(UsageError) as e:  # a subset no run evaluated: named with those they did, no "rerun"
        aggregate.main([str(out), "--no-plots", "--by-length", "test"])
    assert str(e.value) == "--by-length test: no finished run has eval/test.json (the subsets they evaluated: gen)"
    _per_length(out / "scan" / "a" / "seed1", "gen", {9: (4, 4)})
    _per_length(out / "scan" / "a" / "seed2", "gen", {9: (5, 4)})
    with pytest.raises(UsageError) as e:
        aggregate.main([str(out), "--no-plots", "--by-length", "gen"])
    assert str(e.value) == (f"{out / 'scan' / 'a' / 'seed2' / 'eval' / 'gen.json'}: 5 examples of reference length 9, "
                            f"but {out / 'scan' / 'a' / 'seed1' / 'eval' / 'gen.json'} has 4: expected runs of one "
                            "dataset to be evaluated on the same data")


def test_seeds_option_reruns_a_cell_with_an_unused_seed(scan_bin, tmp_path):
    """`fairseq-compgen sweep ... --seeds 4`: the file's seeds replaced (sweep-wide and per dataset), --seed 4 in the
    command; adding seed 4 to a folder of seeds 1-2 needs those seeds too, else the plan would drop them (refused)."""
    spec = {"name": "tiny", "seeds": [1, 2], "flags": f"{TINY} --max-update 2",
            "datasets": {"scan": {"data": str(scan_bin), "recipe": "csordas/scan", "subsets": ["gen"], "seeds": [1]}},
            "configurations": {"trafo": {"arch": "compgen_transformer_scan"}}}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    said = []
    sweep.run_sweep(path, tmp_path / "out4", cpu=True, dry_run=True, echo=said.append, seeds=[4])
    assert [s.split("\n")[0] for s in said] == ["scan/trafo/seed4"] and "--seed 4" in said[0]
    assert [r.seed for r in sweep.plan(sweep.with_seeds(sweep.load_sweep(path), [3, 4]), tmp_path / "x")] == [3, 4]
    with pytest.raises(UsageError, match=r"--seeds 4 4: expected distinct non-negative integers"):
        sweep.with_seeds(sweep.load_sweep(path), [4, 4])
    # a folder planned with seed 1: --seeds 4 alone would drop it, seeds 1 and 4 resume it
    out = tmp_path / "out"
    sweep.write_plan(sweep.load_sweep(path), sweep.plan(sweep.load_sweep(path), out, cpu=True), out, sweep.source_of(path))
    with pytest.raises(UsageError, match="would drop them from the plan and from aggregate; expected the same runs: "
                                         r"add --seeds 1 \(with --only to run some\)"):
        sweep.run_sweep(path, out, cpu=True, dry_run=True, echo=said.append, seeds=[4])
    sweep.run_sweep(path, out, cpu=True, dry_run=True, echo=said.append, seeds=[1, 4], only=["*/*/seed4"])
