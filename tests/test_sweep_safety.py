"""Sweeps that cannot race or drift: the sweep file checked before any run, run folders that remember
their settings, one writer per run folder (no second trainer beside an orphan), and an aggregate that shows what
is missing instead of dropping it. Nothing here trains: the runs are planned, locked and aggregated."""
import fcntl
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fairseq_compgen.errors import UsageError
from fairseq_compgen.pipelines import aggregate, pooling, sweep, tables
from fairseq_compgen.pipelines.runner import LOCK, Runner

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def data(tmp_path):
    """A folder that looks like fairseq data to the checks (dictionaries present)."""
    d = tmp_path / "bin"
    d.mkdir()
    for side in ("src", "tgt"):
        (d / f"dict.{side}.txt").write_text("a 1\n")
        for subset in ("train", "valid", "gen"):
            (d / f"{subset}.src-tgt.{side}.idx").write_bytes(b"")
    return d


def _write(tmp_path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


GOOD = """\
seeds: [1, 2]
datasets:
  scan:
    data: {data}
    subsets: [valid, gen]
configurations:
  reluni:
    arch: rel_uni_transformer_scan
"""


@pytest.mark.parametrize("edit, where", [
    (("    subsets: [valid, gen]", "    subset: [valid, gen]"), r"s\.yaml:5: datasets\.scan\.subset: unknown key"),
    (("    subsets: [valid, gen]", "    subsets: valid"), r"s\.yaml:5: datasets\.scan\.subsets: expected a list"),
    (("seeds: [1, 2]", "seeds: [1, two]"), r"s\.yaml:1: seeds\[1\]: .*'two'"),
    (("    arch: rel_uni_transformer_scan", "    arch: rel_uni_transformer_scan\n    flags: [[--lr, 1]]"),
     r"s\.yaml:9: configurations\.reluni\.flags: expected a list of flags"),
    (("    arch: rel_uni_transformer_scan", "    arch: rel_uni_transformer_scan\n    flags: [--lr, \"'1e-3\"]"),
     r"s\.yaml:9: configurations\.reluni\.flags: \"'1e-3\": no closing quotation: expected flags split like a shell"),
    (("seeds: [1, 2]", "seeds: [1, 2]\ngenerate_flags: --beam '5"),
     r"s\.yaml:2: generate_flags: \"--beam '5\": no closing quotation: expected flags split like a shell"),
    (("    data: {data}\n", ""), r"datasets\.scan\.data: Missing mandatory value"),
    (("configurations:", "configuration:"), r"s\.yaml:6: configuration: unknown key"),
    (("    arch: rel_uni_transformer_scan", "    arch: rel_uni_transformer_scan\n    paper: {{cfq/gen: 0.3}}"),
     r"s\.yaml:9: configurations\.reluni\.paper: 'cfq/gen': expected DATASET/SUBSET with a dataset of this file "
     r"\(scan\)"),
    (("    arch: rel_uni_transformer_scan", "    arch: rel_uni_transformer_scan\n    paper: {{scan/gen: [0.3]}}"),
     r"s\.yaml:9: configurations\.reluni\.paper: 'scan/gen': expected the paper's value as a number or a string"),
])
def test_sweep_file_errors_name_file_line_and_key(tmp_path, data, edit, where):
    path = _write(tmp_path, GOOD.replace(*edit).format(data=data))
    with pytest.raises(UsageError, match=where):
        sweep.run_sweep(path, tmp_path / "out", dry_run=True, echo=lambda s: None)
    assert not (tmp_path / "out").exists()


def test_budget_values_fairseq_would_misread_are_refused_before_any_run(tmp_path, data):
    """A sweep file's --batch-size -3 (fairseq batched the whole data set, in silence), found at its dry run, not
    when the run trains; the file's missing batch size is left to each run's train command."""
    path = _write(tmp_path, GOOD.replace("    subsets", "    flags: --batch-size -3\n    subsets").format(data=data))
    with pytest.raises(UsageError, match=r"s\.yaml: configuration 'reluni' on dataset 'scan': --batch-size -3: "
                                         r"expected a positive number"):
        sweep.run_sweep(path, tmp_path / "out", dry_run=True, echo=lambda s: None)
    assert not (tmp_path / "out").exists()


def test_unregistered_arch_unknown_recipe_and_missing_data_are_refused_before_any_run(tmp_path, data):
    path = _write(tmp_path, GOOD.replace("rel_uni_transformer_scan", "rel_uni_transformer_sacn").format(data=data))
    with pytest.raises(UsageError, match="arch 'rel_uni_transformer_sacn' is not registered"):
        sweep.run_sweep(path, tmp_path / "out", cpu=True, echo=lambda s: None)
    path = _write(tmp_path, GOOD.replace("    subsets", "    recipe: csordas/scna\n    subsets").format(data=data))
    with pytest.raises(UsageError, match="unknown recipe 'csordas/scna'"):
        sweep.run_sweep(path, tmp_path / "out", cpu=True, echo=lambda s: None)
    path = _write(tmp_path, GOOD.format(data=tmp_path / "nowhere"))
    with pytest.raises(UsageError) as e:
        sweep.run_sweep(path, tmp_path / "out", cpu=True, echo=lambda s: None)
    assert str(e.value) == (f"{path}: 1 dataset(s) without a data folder with fairseq dictionaries (dict.*.txt): "
                            f"'scan': {tmp_path / 'nowhere'} (prepare it first: the file names no prep command)")
    # with the dataset's prep command, the refusal says how to make the folder
    prep = "fairseq-compgen prep scan --split length_cutoff_26 --out data/scan"
    path = _write(tmp_path, GOOD.replace("    subsets", f"    prep: {prep}\n    subsets").format(
        data=tmp_path / "nowhere"))
    with pytest.raises(UsageError) as e:
        sweep.run_sweep(path, tmp_path / "out", cpu=True, echo=lambda s: None)
    assert str(e.value).endswith(f"'scan': {tmp_path / 'nowhere'} (prepare it with: {prep})")
    assert not (tmp_path / "out").exists()


def test_cli_prints_one_line(tmp_path, data):
    path = _write(tmp_path, GOOD.replace("subsets:", "subset:").format(data=data))
    p = subprocess.run([sys.executable, "-m", "fairseq_compgen.cli", "sweep", str(path), "--dry-run"],
                       capture_output=True, text=True, cwd=REPO)
    lines = p.stderr.splitlines()
    assert p.returncode == 1 and lines == [f"fairseq_compgen: error: {path}:5: datasets.scan.subset: unknown key "
                                           f"(known: data, flags, label, metric, prep, recipe, seeds, subsets, vars)"], p.stderr


def test_a_changed_sweep_file_refuses_runs_made_with_other_settings(tmp_path, data):
    path = _write(tmp_path, GOOD.format(data=data))
    out = tmp_path / "out"
    runs = sweep.plan(sweep.load_sweep(path), out, cpu=True)
    run = runs[0]
    run.path.mkdir(parents=True)
    (run.path / sweep.SETTINGS).write_text(json.dumps(run.settings()))
    sweep.run_sweep(path, out, dry_run=True, echo=lambda s: None)  # same settings: fine
    path.write_text(GOOD.replace("    subsets", "    flags: --dropout 0.3\n    subsets").format(data=data))
    with pytest.raises(UsageError, match=r"1 run folder\(s\) .* scan/reluni/seed1: flags: \[\] -> \['--dropout', '0.3'\]"):
        sweep.run_sweep(path, out, dry_run=True, echo=lambda s: None)
    # --only another run: still refused, since OUT/sweep.json would become the new plan of seed1's folder too
    # (helper audit, 2026-11-29: aggregate then left the finished seed 1 out as made with other settings)
    with pytest.raises(UsageError, match=r"1 run folder\(s\) .* scan/reluni/seed1: flags: .*, not among --only"):
        sweep.run_sweep(path, out, dry_run=True, only=["scan/reluni/seed2"], echo=lambda s: None)


def _hold(run, sweep_pid, pgid):
    """Lock the run folder as a sweep would, recording `sweep_pid` and `pgid` as its holder."""
    run.path.mkdir(parents=True, exist_ok=True)
    fd = os.open(run.path / LOCK, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"sweep": sweep_pid, "pgid": pgid}).encode(), 0)
    return fd


def test_a_run_held_by_a_live_sweep_is_left_alone(tmp_path, data):
    run = sweep.plan(sweep.load_sweep(_write(tmp_path, GOOD.format(data=data))), tmp_path / "out", cpu=True)[0]
    fd = _hold(run, os.getpid(), None)
    said = []
    try:
        result = Runner(echo=said.append).run_one(run)
    finally:
        os.close(fd)
    assert result["status"] == "busy" and said[0].startswith("BUSY   scan/reluni/seed1")
    assert not (run.path / "train.log").exists()
    sweep._summary({"name": "s"}, [result], "out", said.append)  # not this sweep's failure
    assert said[-1] == "sweep s: 0 done, 0 skipped, 0 failed, 1 busy (another live sweep or training holds them) -> out"


def test_an_orphaned_trainer_is_stopped_before_the_run_restarts(tmp_path, data):
    """The sweep was SIGKILLed: its trainer (own session) still runs and holds the folder's lock."""
    run = sweep.plan(sweep.load_sweep(_write(tmp_path, GOOD.format(data=data))), tmp_path / "out", cpu=True)[0]
    gone = subprocess.Popen(["true"])
    gone.wait()  # a sweep pid that no longer exists
    fd = _hold(run, gone.pid, None)
    orphan = subprocess.Popen(["sleep", "300"], pass_fds=(fd,), start_new_session=True)
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"sweep": gone.pid, "pgid": orphan.pid}).encode(), 0)
    os.close(fd)  # only the orphan holds the lock now
    said = []
    runner = Runner(echo=said.append)
    got = runner._take_lock(run, wait_s=20)
    try:
        assert got is not None and orphan.wait(timeout=10) == -signal.SIGTERM
        assert said and said[0].startswith(f"stop   scan/reluni/seed1: process group {orphan.pid}")
    finally:
        if orphan.poll() is None:
            orphan.kill()
        if got is not None:
            os.close(got)


def test_a_stale_holder_record_stops_no_process_group(tmp_path, data):
    """The lock file names a gone sweep and a process group, but another process holds the lock (a
    `fairseq-compgen train` started by hand, which records no holder): the recorded group's number may now be an
    unrelated group's, so nothing is stopped and the run is left alone (sweep audit, 2026-11-29: it was SIGTERMed)."""
    run = sweep.plan(sweep.load_sweep(_write(tmp_path, GOOD.format(data=data))), tmp_path / "out", cpu=True)[0]
    gone = subprocess.Popen(["true"])
    gone.wait()
    unrelated = subprocess.Popen(["sleep", "300"], start_new_session=True)  # does not have the lock open
    fd = _hold(run, gone.pid, unrelated.pid)  # this process holds the lock, as a hand-started training would
    said = []
    try:
        assert Runner(echo=said.append)._take_lock(run, wait_s=2) is None
        assert unrelated.poll() is None and not said
        result = Runner(echo=said.append).run_one(run)
        assert result["status"] == "busy" and unrelated.poll() is None
        assert said == [f"BUSY   {run.name}: a live sweep or training holds its lock ({run.path / LOCK}); left alone"]
    finally:
        os.close(fd)
        unrelated.kill()
        unrelated.wait()


def test_an_evaluation_cut_off_by_the_sweeps_stop_is_stopped_not_failed(tmp_path, data, monkeypatch):
    """A GPU slice ends while a finished training is being evaluated: the run is "stopped" (the next sweep
    evaluates it), not FAILED, and leaves no done.json."""
    run = sweep.plan(sweep.load_sweep(_write(tmp_path, GOOD.format(data=data))), tmp_path / "out", cpu=True)[0]
    said = []
    runner = Runner(echo=said.append)

    def call(cmd, log, env, lock_fd):
        if "eval" in cmd:
            runner.stopping = True  # what stop() does when the slice's SIGTERM arrives
            return -signal.SIGTERM
        return 0
    monkeypatch.setattr(runner, "_call", call)
    assert runner.run_one(run) == {"run": run.name, "status": "stopped", "stage": "eval"}
    assert said[-1].startswith(f"stopped {run.name}: interrupted during evaluation")
    assert not (run.path / "done.json").exists()
    runner.stopping = False  # an evaluation that fails by itself is still a failure
    monkeypatch.setattr(runner, "_call", lambda cmd, log, env, lock_fd: 1 if "eval" in cmd else 0)
    assert runner.run_one(run)["status"] == "failed" and said[-1].startswith(f"FAILED {run.name}: evaluation")


def test_a_stray_json_in_eval_fails_the_run_by_name(tmp_path, data, monkeypatch):
    """Every eval/*.json is read as a result; a stray or half-written one stopped the sweep with a JSONDecodeError
    traceback (found by an audit, 2026-11-28). Now that run fails, naming the file, and the sweep goes on."""
    run = sweep.plan(sweep.load_sweep(_write(tmp_path, GOOD.format(data=data))), tmp_path / "out", cpu=True)[0]
    said = []
    runner = Runner(echo=said.append)

    def call(cmd, log, env, lock_fd):
        if "eval" in cmd:
            (run.path / "eval").mkdir(parents=True, exist_ok=True)
            (run.path / "eval" / "gen.json").write_text('{"n": 4, "correct"')  # cut off
        return 0
    monkeypatch.setattr(runner, "_call", call)
    assert runner.run_one(run) == {"run": run.name, "status": "failed", "stage": "eval", "rc": 0}
    assert said[-1] == (f"FAILED {run.name}: {run.path / 'eval' / 'gen.json'}:1: not valid JSON (Expecting ':' "
                        f"delimiter): expected the JSON object fairseq-compgen eval writes; rerun the run's evaluation "
                        f"(or the sweep) to rewrite it")
    assert not (run.path / "done.json").exists()

def test_the_lock_outlives_the_sweep_in_its_trainer(tmp_path, data):
    """The trainer inherits the lock: while it runs, a second sweep cannot take the folder."""
    run = sweep.plan(sweep.load_sweep(_write(tmp_path, GOOD.format(data=data))), tmp_path / "out", cpu=True)[0]
    run.path.mkdir(parents=True)
    runner = Runner(echo=lambda s: None)
    fd = runner._take_lock(run)
    child = subprocess.Popen(["sleep", "300"], pass_fds=(fd,), start_new_session=True)
    os.close(fd)  # the sweep is gone; its trainer is not
    try:
        probe = os.open(run.path / LOCK, os.O_RDWR)
        with pytest.raises(BlockingIOError):
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(probe)
    finally:
        child.kill()
        child.wait()


# ------------------------------------------------------------------------------------------------ aggregate
def _plan(out: Path, data, finished):
    """sweep.json for datasets a and b x configuration c x seeds 1, 2; `finished`: {(dataset, seed): settings}."""
    spec = yaml.safe_load(GOOD.format(data=data))
    spec["datasets"]["b"] = dict(spec["datasets"]["scan"])
    del spec["datasets"]["scan"]["subsets"], spec["datasets"]["b"]["subsets"]
    spec = {**spec, "datasets": {"a": spec["datasets"]["scan"], "b": spec["datasets"]["b"]}}
    path = out.parent / "plan.yaml"
    path.write_text(yaml.safe_dump(spec))
    full = sweep.load_sweep(path)
    runs = sweep.plan(full, out, cpu=True)
    sweep.write_plan(full, runs, out)
    for r in runs:
        if (r.dataset, r.seed) in finished:
            (r.path / "eval").mkdir(parents=True)
            (r.path / "eval" / "gen.json").write_text(json.dumps({"accuracy": 0.5 + r.seed / 10}))
            settings = finished[r.dataset, r.seed] or r.settings()
            (r.path / "done.json").write_text(json.dumps({"settings": settings}))
    return runs


def test_aggregate_shows_missing_datasets_and_leaves_out_changed_runs(tmp_path, data, capsys):
    out = tmp_path / "out"
    _plan(out, data, {("a", 1): None, ("a", 2): {"arch": "something else"}})
    spec, runs, cells = pooling.collect(out)
    assert "1 finished run(s) were made with other settings" in capsys.readouterr().err
    assert cells["a", "gen", "reluni"].values == {1: pytest.approx(0.6)}
    md = tables.markdown_table(spec, cells)
    assert "b: (no finished run)" in md and "- (0/2)" in md  # dataset b is shown, as missing
    # the per-run table lists the runs the cells hold: not the one left out
    assert [(row["seed"], row["values"]) for row in tables.run_rows(runs, cells)] == [(1, {"gen": pytest.approx(0.6)})]


def test_a_run_left_out_is_out_of_every_view_and_of_the_option_check(tmp_path, data, capsys):
    """A finished run made with other settings was left out of the cells only: the by-length view, the curves and
    the export still used it, and trained with other options it stopped the whole command as 'cannot be pooled'
    (helper audit, 2026-11-29). Now it is left out everywhere, with the one message."""
    from fairseq_compgen.pipelines import aggregate

    out = tmp_path / "out"
    runs = _plan(out, data, {("a", 1): None, ("a", 2): {"arch": "something else"}})
    for r in runs:
        if r.dataset == "a":
            lr = "1e-3" if r.seed == 1 else "0.5"  # the run left out was trained with another --lr too
            (r.path / "command.txt").write_text(f"fairseq-train {data} --arch rel_uni_transformer_scan --lr {lr}\n")
            result = json.loads((r.path / "eval" / "gen.json").read_text())
            result["per_length"] = {"3": {"n": 4, "correct": r.seed, "accuracy": r.seed / 4}}
            (r.path / "eval" / "gen.json").write_text(json.dumps(result))
    dest = tmp_path / "export"
    assert aggregate.main([str(out), "--no-plots", "--by-length", "gen", "--export", str(dest)]) == 0
    assert "1 finished run(s) were made with other settings" in capsys.readouterr().err
    by_length = (out / "by_length_gen.md").read_text()
    assert "| reluni (seeds 1) |" in by_length and "| 3 | 4 | 0.25 |" in by_length, by_length
    assert (dest / "a" / "reluni" / "seed1").is_dir() and not (dest / "a" / "reluni" / "seed2").exists()


@pytest.mark.parametrize("value", ["NaN", "Infinity"])
def test_a_result_that_is_no_finite_number_is_named(tmp_path, data, value):
    """JSON's NaN passed, and the std failed in a traceback (the permutation test gave p = 0.0)."""
    from fairseq_compgen.pipelines import pooling

    out = tmp_path / "out"
    runs = _plan(out, data, {("a", 1): None})
    path = runs[0].path / "eval" / "gen.json"
    path.write_text(f'{{"accuracy": {value}}}')
    with pytest.raises(UsageError, match=r"gen\.json: 'accuracy' is (nan|inf): expected a finite number"):
        pooling.collect(out)


def test_aggregate_of_nothing_is_an_error(tmp_path, data):
    out = tmp_path / "out"
    _plan(out, data, {})
    with pytest.raises(UsageError, match="none of the 4 planned runs has finished"):
        aggregate.main([str(out), "--no-plots"])
    with pytest.raises(UsageError, match="no sweep.json"):
        aggregate.main([str(tmp_path / "elsewhere"), "--no-plots"])


def test_runs_queued_behind_an_interrupt_are_stopped_not_failed(tmp_path, data):
    """After SIGTERM/Ctrl-C the runs still queued used to print `train` and then `FAILED ... -15`."""
    path = _write(tmp_path, GOOD.format(data=data))
    (run, *_) = sweep.plan(sweep.load_sweep(path), tmp_path / "out", cpu=True)
    said = []
    runner = Runner(jobs=1, echo=said.append)
    runner.stop()
    assert runner.run_one(run) == {"run": run.name, "status": "stopped"} and said == []
    assert not run.path.exists()


# ----------------------------------------------------------------------------------------------- what it says
@pytest.mark.parametrize("edit, where", [
    # a configuration given twice: the last one silently replaced the first
    (("configurations:\n", "configurations:\n  reluni:\n    arch: transformer\n"),
     r"s\.yaml:9: key 'reluni' appears twice in one mapping \(first at line 7\)"),
    # a key given twice deeper down
    (("    subsets: [valid, gen]", "    subsets: [valid, gen]\n    subsets: [gen]"),
     r"s\.yaml:6: key 'subsets' appears twice in one mapping \(first at line 5\)"),
    (("seeds: [1, 2]", "seeds: [1, 2]\nseeds: [3]"), r"s\.yaml:2: key 'seeds' appears twice"),
    (("seeds: [1, 2]", "seeds: []"), r"s\.yaml:1: seeds: expected at least one seed"),
    (("    subsets: [valid, gen]", "    subsets: [valid, gen]\n    seeds: []"),
     r"s\.yaml:6: datasets\.scan\.seeds: expected at least one seed"),
    (("seeds: [1, 2]", "seeds: [1, 1]"), r"s\.yaml:1: seeds\[1\]: seed 1 is listed twice"),
    (("  reluni:", "  ../../escape:"), r"s\.yaml:7: configurations: '\.\./\.\./escape' holds the path separator '/'"),
    (("  reluni:", "  /tmp/abs:"), r"s\.yaml:7: configurations: '/tmp/abs' holds the path separator"),
    (("  reluni:", "  '..':"), r"s\.yaml:7: configurations: '\.\.' is not a folder name"),
    (("  scan:", "  a\\b:"), r"s\.yaml:3: datasets: 'a\\\\b' holds the path separator '\\\\'"),  # a\b
    # placeholders sweep.plan could not fill were tracebacks (KeyError, ValueError) (sweep audit, 2026-11-29)
    (("    data: {data}", "    data: {data}/{{nmae}}"),
     r"s\.yaml:4: datasets\.scan\.data: '.*/\{nmae\}': unknown placeholder \{nmae\} \(filled for dataset 'scan'\): "
     r"expected placeholders among \{name\}, \{recipe\} \(the dataset's name, its recipe's last part, its vars:\), "
     r"with literal braces doubled \(\{\{ and \}\}\)"),
    (("    arch: rel_uni_transformer_scan", "    arch: rel_uni_transformer_scan\n    flags: --seed {{x"),
     r"s\.yaml:9: configurations\.reluni\.flags: '--seed \{x': expected '\}' before end of string"),
    (("    arch: rel_uni_transformer_scan", "    arch: '{{0}}'"),
     r"s\.yaml:8: configurations\.reluni\.arch: '\{0\}': a positional placeholder"),
    # values the schema's types let through (an int), which plan misread or fairseq refused at the run
    (("seeds: [1, 2]", "seeds: [1, -2]"), r"s\.yaml:1: seeds\[1\]: seed -2: expected a seed of 0 or more"),
    (("seeds: [1, 2]", "seeds: [1, 2]\nlaunch: {{cpu_procs: 0}}"),
     r"s\.yaml:2: launch\.cpu_procs: 0: expected a number of processes, at least 1"),
    (("seeds: [1, 2]", "seeds: [1, 2]\nlaunch: {{gpus: -1}}"), r"s\.yaml:2: launch\.gpus: -1: expected a number of GPUs"),
    # a paper value for a subset no run evaluates was shown nowhere, in silence
    (("    arch: rel_uni_transformer_scan", "    arch: rel_uni_transformer_scan\n    paper: {{scan/gne: 0.3}}"),
     r"s\.yaml:9: configurations\.reluni\.paper: 'scan/gne': dataset 'scan' evaluates no subset 'gne': expected "
     r"one of valid, gen"),
])
def test_sweep_files_mean_what_they_say(tmp_path, data, edit, where):
    text = GOOD.replace(*edit)
    assert text != GOOD
    path = _write(tmp_path, text.format(data=data))
    with pytest.raises(UsageError, match=where):
        sweep.run_sweep(path, tmp_path / "out", cpu=True, echo=lambda s: None)
    assert not (tmp_path / "out").exists() and not (tmp_path / "escape").exists()


def test_a_misspelt_subset_is_refused_before_training(tmp_path, data):
    path = _write(tmp_path, GOOD.replace("[valid, gen]", "[valid, gne]").format(data=data))
    with pytest.raises(UsageError, match=rf"s\.yaml:5: datasets\.scan\.subsets: no subset 'gne' in {data}: "
                                         rf"expected subsets it holds \(gen, train, valid\)"):
        sweep.run_sweep(path, tmp_path / "out", cpu=True, echo=lambda s: None)
    assert not (tmp_path / "out").exists()
    path = _write(tmp_path, GOOD.format(data=data))  # the subsets it holds: fine
    assert len(sweep.plan(sweep.load_sweep(path), tmp_path / "out")) == 2
    sweep.run_sweep(path, tmp_path / "out", cpu=True, dry_run=True, echo=lambda s: None)


def test_a_duplicated_key_is_one_line_from_the_cli(tmp_path, data):
    path = _write(tmp_path, GOOD.replace("seeds: [1, 2]", "seeds: [1, 2]\nseeds: [3]").format(data=data))
    p = subprocess.run([sys.executable, "-m", "fairseq_compgen.cli", "sweep", str(path), "--dry-run"],
                       capture_output=True, text=True, cwd=REPO)
    lines = p.stderr.splitlines()
    assert p.returncode == 1 and lines == [f"fairseq_compgen: error: {path}:2: key 'seeds' appears twice in one "
                                           f"mapping (first at line 1): expected each key once (the last one would "
                                           f"silently win)"], p.stderr


def test_another_sweep_into_the_same_out_is_refused_the_same_one_resumes(tmp_path, data):
    """A second sweep run into the same --out replaced sweep.json: the first sweep's finished runs vanished from
    aggregate."""
    out = tmp_path / "out"
    first = _write(tmp_path, GOOD.format(data=data))
    _plan(out, data, {})  # a sweep.json of sweep 'plan' (a, b x reluni x seeds 1, 2)
    before = (out / "sweep.json").read_text()
    with pytest.raises(UsageError, match=rf"{out}/sweep\.json is the plan of sweep 'plan' \(a sweep file not "
                                         rf"recorded there\), not of sweep 's' \({first}\): .* 4 of its planned runs "
                                         rf"\(e\.g\. a/reluni/seed1\) would vanish from aggregate"):
        sweep.run_sweep(first, out, cpu=True, echo=lambda s: None)
    assert (out / "sweep.json").read_text() == before
    # the same sweep file again: a resume; with a seed added too (nothing planned there is dropped)
    out2 = tmp_path / "out2"
    runs = sweep.plan(sweep.load_sweep(first), out2)
    sweep.write_plan(sweep.load_sweep(first), runs, out2, sweep.source_of(first))
    sweep.run_sweep(first, out2, dry_run=True, echo=lambda s: None)
    first.write_text(GOOD.replace("[1, 2]", "[1, 2, 3]").format(data=data))
    sweep.run_sweep(first, out2, dry_run=True, echo=lambda s: None)
    # another file, even of the same name, that drops planned runs is refused, naming both files
    other = tmp_path / "elsewhere" / "s.yaml"
    other.parent.mkdir()
    other.write_text(GOOD.replace("[1, 2]", "[1]").format(data=data))
    with pytest.raises(UsageError, match=rf"is the plan of sweep 's' \({first}\), not of sweep 's' \({other}\): .*"
                                         rf"1 of its planned runs \(e\.g\. scan/reluni/seed2\)"):
        sweep.run_sweep(other, out2, dry_run=True, echo=lambda s: None)
    # the same file with a seed added by --seeds (as its help says), then run plainly: told how to keep the seed
    four = sweep.with_seeds(sweep.load_sweep(first), [1, 2, 3, 4])  # the plan a run with --seeds 1 2 3 4 writes
    sweep.write_plan(four, sweep.plan(four, out2), out2, sweep.source_of(first))
    with pytest.raises(UsageError) as e:
        sweep.run_sweep(first, out2, dry_run=True, echo=lambda s: None)
    assert str(e.value) == (f"{out2 / 'sweep.json'} plans 1 run(s) of sweep 's' that this command does not (e.g. "
                            f"scan/reluni/seed4; its seeds: 1 2 3 4): running it there would drop them from the plan "
                            f"and from aggregate; expected the same runs: add --seeds 1 2 3 4 (with --only to run "
                            f"some), or use another --out")
    sweep.run_sweep(first, out2, dry_run=True, echo=lambda s: None, seeds=[1, 2, 3, 4])


def test_a_copied_or_moved_sweep_folder_aggregates_its_own_runs(tmp_path, data):
    """sweep.json stored absolute run folders: a copy aggregated the original's results, a moved one none."""
    import shutil

    out = tmp_path / "out"
    _plan(out, data, {("a", 1): None})
    assert all(not Path(r["dir"]).is_absolute() for r in json.loads((out / "sweep.json").read_text())["runs"])
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / "a" / "reluni" / "seed1" / "eval" / "gen.json").write_text(json.dumps({"accuracy": 0.25}))
    assert pooling.collect(out)[2]["a", "gen", "reluni"].values == {1: pytest.approx(0.6)}
    assert pooling.collect(copy)[2]["a", "gen", "reluni"].values == {1: pytest.approx(0.25)}
    moved = tmp_path / "moved"
    out.rename(moved)
    assert pooling.collect(moved)[2]["a", "gen", "reluni"].values == {1: pytest.approx(0.6)}
    # a sweep.json written before (absolute folders of where the sweep ran) reads the copy's own runs too
    old = json.loads((copy / "sweep.json").read_text())
    for r in old["runs"]:
        r["dir"] = str(out / r["dir"])
    (copy / "sweep.json").write_text(json.dumps(old))
    assert pooling.collect(copy)[2]["a", "gen", "reluni"].values == {1: pytest.approx(0.25)}


def test_prep_makes_the_missing_data_folders_with_their_prep_commands(tmp_path, monkeypatch):
    """`sweep --prep` runs each selected dataset's prep: command whose folder is not made yet (relative paths
    from the current folder, like the data paths), then goes on; a made folder is not prepared again."""
    monkeypatch.chdir(tmp_path)
    prep = ("fairseq-compgen prep algorithmic --out data/alg --tasks reverse --train-size 40 --test-size 8 "
            "--joined-dictionary")
    path = _write(tmp_path, GOOD.replace("    subsets: [valid, gen]", f"    prep: {prep}\n    subsets: [valid, test]")
                  .format(data="data/alg/reverse/bin"))
    said = []
    assert sweep.run_sweep(path, tmp_path / "out", cpu=True, dry_run=True, prep=True, echo=said.append) == []
    assert said[0] == f"sweep: preparing 'scan': {prep}"
    assert (tmp_path / "data" / "alg" / "reverse" / "bin" / "dict.src.txt").is_file()
    assert [s.split("\n")[0] for s in said[1:]] == ["scan/reluni/seed1", "scan/reluni/seed2"]  # then the dry run
    said.clear()
    sweep.run_sweep(path, tmp_path / "out", cpu=True, dry_run=True, prep=True, echo=said.append)
    assert not [s for s in said if s.startswith("sweep: preparing")]  # made: not again

    bad = _write(tmp_path, GOOD.replace("    subsets", "    prep: rm -rf data\n    subsets").format(data="nowhere"))
    with pytest.raises(UsageError) as e:
        sweep.run_sweep(bad, tmp_path / "out2", cpu=True, dry_run=True, prep=True, echo=said.append)
    assert str(e.value) == (f"{bad}: datasets.scan.prep: 'rm -rf data': expected fairseq-compgen prep commands "
                            "(joined by &&)")
    assert (tmp_path / "data" / "alg").is_dir()
    # a misspelled arch is refused before anything is prepared
    typo = _write(tmp_path, GOOD.replace("rel_uni_transformer_scan", "rel_uni_transformer_sacn").replace(
        "    subsets", f"    prep: {prep.replace('data/alg', 'data/alg2')}\n    subsets").format(data="data/alg2/reverse/bin"))
    with pytest.raises(UsageError, match="arch 'rel_uni_transformer_sacn' is not registered"):
        sweep.run_sweep(typo, tmp_path / "out3", cpu=True, dry_run=True, prep=True, echo=said.append)
    assert not (tmp_path / "data" / "alg2").exists()
