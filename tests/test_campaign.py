"""scripts/campaign.sh on a tiny queue in a clone of this repository: it trains from a clean worktree of
HEAD outside the working tree, runs the queue's steps in order, commits each finished run's raw files (records, eval
JSONs, a hash of its data) in a commit of that folder alone (with the sweep's sweep.json, so the committed folder
aggregates), skips finished runs when restarted (also from a new
state folder, as on a fresh machine), and refuses a dirty tree."""
import json
import os
import runpy
import shutil
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import pytest

REPO = Path(__file__).resolve().parents[1]
GIT_ENV = {"GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.org", "GIT_COMMITTER_NAME": "test",
           "GIT_COMMITTER_EMAIL": "test@example.org"}
TINY = ("--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 16 --decoder-embed-dim 16 "
        "--encoder-ffn-embed-dim 32 --decoder-ffn-embed-dim 32 --encoder-attention-heads 2 "
        "--decoder-attention-heads 2 --batch-size 32 --max-update 6 --validate-interval-updates 1000000")


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=dict(os.environ, **GIT_ENV)).stdout


def _campaign(repo, state, **env_vars):
    env = {**os.environ, **GIT_ENV, "STATE": str(state), "PY": sys.executable, "QUEUE": "campaign/tiny_queue.txt",
           "THREADS": "1", **env_vars}
    return subprocess.run(["bash", "scripts/campaign.sh"], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=600)


def _clone_with(tmp_path, files):
    """A clone of this repository with `files` (path under the clone -> text) committed: (clone, state folder, HEAD)."""
    repo, state = tmp_path / "repo", tmp_path / "state"
    subprocess.run(["git", "clone", "-q", str(REPO), str(repo)], check=True)
    for name, text in files.items():
        (repo / name).write_text(text)
    _git(repo, "add", *files)
    _git(repo, "commit", "-q", "-m", "a queue for this test")
    return repo, state, _git(repo, "rev-parse", "HEAD").strip()


def _tiny_clone(tmp_path, scan_bin):
    """A clone of this repository with a committed two-step queue (seed 2, then seed 1) of a tiny rel-uni sweep:
    (clone, state folder, HEAD)."""
    return _clone_with(tmp_path, {"campaign/tiny.yaml": f"""name: tiny
seeds: [1, 2]
datasets:
  scan:
    data: {scan_bin}
    recipe: csordas/scan
    subsets: [valid, gen]
configurations:
  rel_uni:
    arch: rel_uni_transformer_scan
    flags: "{TINY}"
""", "campaign/tiny_queue.txt": "# two steps, one seed each\ncampaign/tiny.yaml scan/*/seed2\n"
                                   "campaign/tiny.yaml scan/*/seed1\n"})


@pytest.fixture(scope="module")
def trained_once(scan_bin, tmp_path_factory):
    """The tiny clone with a one-run queue (seed 1) committed at HEAD, its run trained and recorded by the campaign,
    then the clone reset to HEAD, built once for this module: (the folder holding repo/ and state/, HEAD). The worktree
    the run trained from is removed, so that a copy of the state folder stands alone."""
    base = tmp_path_factory.mktemp("one_run")
    repo, state, _ = _tiny_clone(base, scan_bin)
    (repo / "campaign" / "tiny_queue.txt").write_text("campaign/tiny.yaml scan/*/seed1\n")
    _git(repo, "commit", "-q", "-m", "one run", "--", "campaign/tiny_queue.txt")
    head = _git(repo, "rev-parse", "HEAD").strip()
    p = _campaign(repo, state)
    assert p.returncode == 0 and "committed tiny/scan/rel_uni/seed1" in p.stdout, p.stdout[-3000:] + p.stderr
    _git(repo, "reset", "-q", "--hard", head)
    _git(repo, "worktree", "remove", "--force", str(state / f"tree-{head[:12]}"))
    return base, head


def _one_run_trained(tmp_path, trained_once):
    """`trained_once` for one test, in `tmp_path`: (a clone of its repository, a copy of its state folder with the
    run's folder, HEAD); nothing of the run is in the repository."""
    base, head = trained_once
    subprocess.run(["git", "clone", "-q", str(base / "repo"), str(tmp_path / "repo")], check=True)
    shutil.copytree(base / "state", tmp_path / "state", symlinks=True)
    assert _git(tmp_path / "repo", "rev-parse", "HEAD").strip() == head
    return tmp_path / "repo", tmp_path / "state", head


def test_campaign_runs_commits_resumes_and_refuses_a_dirty_tree(scan_bin, tmp_path):
    repo, state, head = _tiny_clone(tmp_path, scan_bin)

    p = _campaign(repo, state)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stdout.index("committed tiny/scan/rel_uni/seed2") < p.stdout.index("committed tiny/scan/rel_uni/seed1")
    for seed in (1, 2):
        run = repo / "results" / "campaign" / "tiny" / "scan" / "rel_uni" / f"seed{seed}"
        done = json.loads((run / "done.json").read_text())
        assert set(done["accuracy"]) == {"valid", "gen"}
        assert {f.name for f in (run / "eval").glob("*.json")} >= {"valid.json", "gen.json"}
        # and the outputs they were scored from, the same bytes as the state folder's
        kept = {f.name for f in (run / "eval").glob("*.outputs.gz")}
        assert kept == {"valid.outputs.gz", "gen.outputs.gz"}
        state_run = state / "runs" / "tiny" / "scan" / "rel_uni" / f"seed{seed}"
        assert all((run / "eval" / k).read_bytes() == (state_run / "eval" / k).read_bytes() for k in kept)
        assert (run / "commit.txt").read_text().split() == [head]  # a clean tree: no "dirty"
        assert f"--seed {seed}" in (run / "command.txt").read_text()
        hashes = dict(line.split()[::-1] for line in (run / "data.sha256").read_text().splitlines())
        assert set(hashes) == {f.name for f in scan_bin.iterdir() if f.is_file()}
    log = _git(repo, "log", "--format=%s", f"{head}..HEAD").splitlines()
    assert len(log) == 2 and all(m.startswith("Campaign: tiny/scan/rel_uni/seed") for m in log)
    plans = []
    for commit in _git(repo, "rev-list", f"{head}..HEAD").split():  # each commit holds its run's folder alone
        files = _git(repo, "show", "--name-only", "--format=", commit).split()
        plans += [f for f in files if f == "results/campaign/tiny/sweep.json"]  # and the sweep's plan, once
        files = [f for f in files if f != "results/campaign/tiny/sweep.json"]
        assert len({str(Path(f).parents[len(Path(f).parents) - 7]) for f in files}) == 1, files
    assert len(plans) == 1
    # the committed folder is a sweep folder: the aggregator pools its runs from the repository alone
    shutil.copytree(repo / "results" / "campaign" / "tiny", tmp_path / "committed")  # it writes tables there
    agg = subprocess.run([sys.executable, "-m", "fairseq_compgen.cli", "aggregate", str(tmp_path / "committed"),
                          "--no-plots"], capture_output=True, text=True)
    table = (tmp_path / "committed" / "table.md").read_text()
    assert agg.returncode == 0 and "| rel_uni |" in table, agg.stdout + agg.stderr
    assert "± -" not in table and "/2)" not in table, table  # both seeds pooled: a std, no seed missing
    assert _git(repo, "status", "--porcelain", "--untracked-files=no") == ""
    assert (state / f"tree-{head[:12]}").is_dir()  # trained from the worktree, outside the working tree

    # a campaign stopped between copying a run's files and committing them: the next one commits them
    _git(repo, "reset", "-q", "HEAD~1")
    last = "tiny/scan/rel_uni/seed1"
    assert (repo / "results" / "campaign" / last / "done.json").is_file()
    p = _campaign(repo, state)  # restarted: everything is done, nothing is trained again
    assert p.returncode == 0 and p.stdout.count("skip") >= 2, p.stdout
    assert p.stdout.count("committed") == 1 and f"committed {last}" in p.stdout, p.stdout
    assert len(_git(repo, "log", "--format=%s", f"{head}..HEAD").splitlines()) == 2
    assert _git(repo, "status", "--porcelain") == ""

    # a fresh machine keeps only the repository: with a new state folder, runs recorded in results/campaign are not
    # trained again
    fresh = tmp_path / "fresh_state"
    p = _campaign(repo, fresh)
    assert p.returncode == 0 and "committed" not in p.stdout, p.stdout + p.stderr
    assert not list(fresh.glob("runs/tiny/scan/*/seed*/checkpoint*")) and not list(fresh.glob("runs/**/done.json"))
    # and no step is walked: every run of both is committed (campaign/status.py --steps-left)
    assert "0 steps of campaign/tiny_queue.txt have runs not recorded" in p.stdout and " step " not in p.stdout, p.stdout

    (repo / "README.md").write_text("edited\n")
    p = _campaign(repo, state)
    assert p.returncode == 1 and "uncommitted changes" in p.stderr


def test_prep_lines_run_once_per_state_folder_and_a_step_without_runs_is_skipped_with_a_message(tmp_path):
    """A prep line is done when it succeeded, not when its output folder exists (prep makes the folder before its
    files: a session ending in between used to leave the line skipped for good); a step whose glob matches no run
    says so and the queue goes on (it used to end the lane silently)."""
    repo, state, _ = _clone_with(tmp_path, {"campaign/tiny_queue.txt": (
        "prep scan --split length_cutoff_26 --out data/scan\n"
        "fairseq_compgen/sweeps/positions_length.yaml scan/no_such_encoding/seed1\n"
        "prep scan --split length_cutoff_26 --out data/scan\n")})
    (state / "data" / "scan").mkdir(parents=True)  # a prep cut off after making its output folder
    p = _campaign(repo, state)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert (state / "data" / "scan" / "length_cutoff_26" / "bin" / "dict.src.txt").is_file()
    assert p.stdout.count("SCAN split length_cutoff_26") == 1, p.stdout  # prepared once: the same line again skips
    assert "--only scan/no_such_encoding/seed1: no run of" in p.stderr and (
        "step fairseq_compgen/sweeps/positions_length.yaml scan/no_such_encoding/seed1: the sweep's dry run failed "
        "(above); step skipped") in p.stderr
    assert "queue finished" in p.stdout
    p = _campaign(repo, state)  # restarted: nothing prepared again
    assert p.returncode == 0 and "SCAN split" not in p.stdout, p.stdout


def test_campaign_goes_on_from_a_code_commit_made_while_a_run_trains(scan_bin, tmp_path):
    """A commit that changes code (anything outside results/), made while the first run trains: that run finishes
    at the commit it started from, and the next run trains at the new HEAD (the worktree of the commit after the
    first run's results commit). The campaign's own results commits alone never move it. It goes on from the step
    it was in: the steps before it are not walked again (each walked step costs a dry run)."""
    repo, state, head = _tiny_clone(tmp_path, scan_bin)
    queue = repo / "campaign" / "tiny_queue.txt"  # a first step that plans no run (its dry run fails): walked once
    queue.write_text("campaign/tiny.yaml scan/*/seed3\n" + queue.read_text())
    _git(repo, "commit", "-q", "-m", "a step before", "--", "campaign/tiny_queue.txt")
    head = _git(repo, "rev-parse", "HEAD").strip()
    wrapper = tmp_path / "python_that_commits"  # the campaign's PY: a developer commits while the first run trains
    wrapper.write_text(f"""#!/usr/bin/env bash
if [[ " $* " == *" sweep "* && " $* " != *" --dry-run "* && ! -e {tmp_path}/edited ]]; then
  touch {tmp_path}/edited
  echo "an edit" >> {repo}/docs/data.md
  git -C {repo} commit -q -m "docs edited" -- docs/data.md
fi
exec {sys.executable} "$@"
""")
    wrapper.chmod(0o755)
    p = _campaign(repo, state, PY=str(wrapper))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    edit = _git(repo, "log", "-1", "--format=%H", "--", "docs/data.md").strip()
    run = repo / "results" / "campaign" / "tiny" / "scan" / "rel_uni"
    first, second = ((run / f"seed{s}" / "commit.txt").read_text().split()[0] for s in (2, 1))
    assert first == head  # trained to its end at the commit it started from
    assert second != head and subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", edit, second]
                                             ).returncode == 0
    assert f"HEAD moved to {second[:12]}, which changes code; going on from there" in p.stdout, p.stdout
    assert p.stdout.count("HEAD moved") == 1  # the second run's results commit changes results/ only
    assert p.stdout.count("step campaign/tiny.yaml scan/*/seed3") == 1, p.stdout
    assert "going on from step campaign/tiny.yaml scan/*/seed2 (the steps before it were walked" in p.stdout
    assert (state / f"tree-{second[:12]}").is_dir() and not list(state.glob(".code-moved.*"))
    # the first commit's worktree, which no process names any more, was removed when the campaign moved on
    assert not (state / f"tree-{head[:12]}").exists()
    assert f"removed the unused worktree {state}/tree-{head[:12]}" in p.stdout
    assert str(state / f"tree-{head[:12]}") not in _git(repo, "worktree", "list")


def test_parity_verdict_reads_committed_runs_and_applies_both_rules(tmp_path):
    """campaign/parity_verdict.py on the committed seeds 1-2 of Table 3's rel-uni (fp32) and its bf16 arm: the
    accuracy rule (within max(2 std, 0.05) of the fp32 mean), the loss-curve rule (difference of means within 2
    standard errors) at every validation, the strict envelope printed beside it; a missing run is one line, exit 2."""
    script = REPO / "campaign" / "parity_verdict.py"
    fp32 = REPO / "results/campaign/csordas_scan26_5k/scan/rel_uni_trafo"
    bf16 = REPO / "results/campaign/autocast_parity_scan26/scan/rel_uni_trafo_bf16"
    p = subprocess.run([sys.executable, script, fp32, bf16, "--seeds", "1", "2"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert "| gen accuracy | 0.8514, 0.7938 | 0.8226 ± 0.0407 | 0.8430, 0.8411 | 0.8420 | 0.0194 | 0.0814 | yes |" in lines
    assert sum(line.startswith(("| valid loss |", "| gen loss |")) for line in lines) == 10  # 1,000 to 5,000
    assert "| valid loss | 4000 | 0.001, 0.001 | 0.001, 0.026 | +0.013 | 0.025 | yes | [0.001, 0.001]: no |" in lines
    assert lines[-1] == "verdict: parity holds (seeds 1, 2)"

    missing = subprocess.run([sys.executable, script, fp32, tmp_path, "--seeds", "1", "2"], capture_output=True,
                             text=True)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1, missing.stderr
    assert str(tmp_path / "seed1") in missing.stderr

    # one seed has no standard deviation: a usage error naming the flag, not a traceback
    for seeds, message in ((["1"], "--seeds 1: the fp32 band needs a standard deviation, so 2 seeds at least"),
                           (["1", "1", "2"], "--seeds 1 1 2: a seed named twice would count twice")):
        bad = subprocess.run([sys.executable, script, fp32, bf16, "--seeds", *seeds], capture_output=True, text=True)
        assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
        assert bad.stderr.strip().splitlines()[-1].endswith(message), bad.stderr


def test_budget_rule_reads_epoch_summaries_and_takes_the_larger_budget(tmp_path):
    """campaign/budget_rule.py (the Chaabouni curve's rule): per configuration, the smallest multiple of 10 epochs
    from which every epoch's training loss is within 10 % of epoch 250's; the step takes the larger; a resumed
    epoch's later summary wins; the test accuracy is printed, never used; an unfinished curve is one line, exit 2."""
    script = REPO / "campaign" / "budget_rule.py"

    def summary(e, loss):
        return (f'2026-01-01 00:00:00 | INFO | train | {{"epoch": {e}, "train_loss": "{loss}", '
                f'"train_num_updates": "{58 * e}", "train_wall": "{e}"}}')

    def write(config, loss_at, relog=None):
        """relog: {after epoch a: (epoch e, loss)}: a resumed run logs epoch e again after epoch a's summary."""
        run = tmp_path / "jump" / config / "seed1"
        run.mkdir(parents=True)
        lines = []
        for e in range(1, 251):
            lines.append(summary(e, loss_at(e)))
            if e % 10 == 0:  # a test accuracy that would choose otherwise: ignored
                lines.append(f'2026-01-01 00:00:00 | INFO | test | {{"epoch": {e}, "test_loss": "1", '
                             f'"test_accuracy": "{1.0 if e == 20 else 0.1}", "test_num_updates": "{58 * e}"}}')
            if relog and e in relog:
                lines.append(summary(*relog[e]))
        (run / "train.log").write_text("\n".join(lines) + "\n")

    # transformer: 1.0 until epoch 100, then 0.105 except a spike at 137 (outside 10 %): from 140 on
    write("transformer", lambda e: 1.0 if e <= 100 else (0.2 if e == 137 else 0.105))
    # sag_t5: within 10 % of 0.1 from epoch 31 on, except a first summary of epoch 55 at 0.5 that the resumed run
    # logged again at 0.1 (after epoch 56's): 40, not 60
    write("sag_t5", lambda e: 0.5 if e <= 30 or e == 55 else 0.1, relog={56: (55, 0.1)})
    p = subprocess.run([sys.executable, script, tmp_path / "jump"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert "  budget: 140 epochs" in lines and "  budget: 40 epochs" in lines, p.stdout
    assert lines[-1] == "the step's budget (largest of sag_t5 40, transformer 140): 140 epochs", p.stdout
    assert "     20        0.5         1.0000" in lines  # the accuracy beside, not used

    (tmp_path / "jump" / "unfinished" / "seed1").mkdir(parents=True)
    (tmp_path / "jump" / "unfinished" / "seed1" / "train.log").write_text(summary(7, 1) + "\n")
    p = subprocess.run([sys.executable, script, tmp_path / "jump"], capture_output=True, text=True)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "unfinished/seed1/train.log: the curve is not finished (last epoch summary: 7" in p.stderr

    for flags, message in ((["--every", "0"], "--every 0: expected a positive number of epochs"),
                           (["--final", "-10"], "--final -10: expected a positive number of epochs"),
                           (["--tolerance", "-0.1"], "--tolerance -0.1: expected a relative tolerance >= 0"),
                           (["--tolerance", "nan"], "--tolerance nan: expected a relative tolerance >= 0")):
        p = subprocess.run([sys.executable, script, tmp_path / "jump", *flags], capture_output=True, text=True)
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        assert p.stderr.strip().splitlines()[-1].endswith(message), p.stderr


def test_every_step_of_the_campaigns_queues_selects_runs():
    """campaign/queue*.txt, as scripts/campaign.sh reads them: every sweep step names a sweep file of this
    repository whose plan has at least one run matching the step's glob (a mistyped glob would run nothing and say
    nothing), and every prep step's options parse with that dataset's parser."""
    from fairseq_compgen import prep
    from fairseq_compgen.pipelines import sweep

    queues = sorted((REPO / "campaign").glob("queue*.txt"))
    assert [q.name for q in queues] == ["queue.txt", "queue_positions.txt"]
    for queue in queues:
        for number, line in enumerate(queue.read_text().splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            where = f"{queue.name}:{number}: {line}"
            first, rest = line.split(maxsplit=1)
            if first == "prep":
                name, *options = rest.split()
                assert prep.module(name).parse_args(options), where
                continue
            runs = sweep.plan(sweep.load_sweep(REPO / first), Path("/nonexistent"), cpu=True)
            assert sweep.select(runs, [rest.strip()]), where


def test_status_counts_done_under_way_and_left_runs(tmp_path):
    """campaign/status.py: per queue step, the runs recorded under results/campaign (done), those with a train.log
    in the state folder (under way, with the last update it logged: 600 after a resume from a checkpoint below 700)
    or carried from another machine under results/campaign/_carry (under way, "carried"), and the rest; totals
    over distinct runs; the training time to come from the recorded runs' train.log clocks (invocations summed), or
    for a run under way with nothing like it recorded, from its own pace (its command's --max-epoch, the last one
    given), or from a recorded run of another arch on the same data, recipe and flags; a run under way counts the
    part of its budget left; the step for a lent GPU is the last with no run begun, with the runbook's steps for it
    (wheels and data here or how to make them, the device tool's call, what follows it); a missing queue file is one
    line and exit 2."""
    queue = tmp_path / "queue.txt"
    queue.write_text("# two steps\nprep scan --split length_cutoff_26 --out data/scan\n"
                     "campaign/park_kim_scan26_5k.yaml scan/*/seed1\ncampaign/park_kim_scan26_5k.yaml scan/*/seed2\n"
                     "campaign/chaabouni_jump_curve.yaml jump/*/seed1\n"
                     "campaign/park_kim_scan26_50k.yaml scan/lt/seed1\n"
                     "campaign/chaabouni_jump_columns.yaml jump/sag/seed1\n")
    results, state = tmp_path / "results", tmp_path / "state"
    (results / "park_kim_scan26_5k/scan/lt/seed1").mkdir(parents=True)
    (results / "park_kim_scan26_5k/scan/lt/seed1/done.json").write_text(json.dumps({  # 1,000 updates in 1.5 h
        "num_updates": 1000, "settings": {"arch": "linear_uni_transformer_scan", "flags": ["--max-update", "1000"],
                                          "data": "/elsewhere/data/scan/length_cutoff_26/bin"}}))
    (results / "park_kim_scan26_5k/scan/lt/seed1/train.log").write_text(  # 1.5 h of training, in two invocations
        '# 2026-11-25T08:00:00 sweep: fairseq-train ...\n'
        '2026-11-25 08:59:59 | INFO | train | {"epoch": 9, "train_loss": "0.5", "train_num_updates": "800", '
        '"train_wall": "3600"}\n'
        '# 2026-11-25T09:00:00 sweep: fairseq-train ... (resumed)\n'
        '2026-11-25 09:30:00 | INFO | train | {"epoch": 12, "train_loss": "0.4", "train_num_updates": "1000", '
        '"train_wall": "1800"}\n')
    run = state / "runs/park_kim_scan26_5k/scan/lt_l2_orth/seed1"
    run.mkdir(parents=True)
    (run / "train.log").write_text(
        '2026-11-25 10:00:00 | INFO | train_inner | {"epoch": 9, "update": 8.5, "loss": "0.5", "num_updates": "700"}\n'
        '# 2026-11-25T11:00:00 sweep: fairseq-train ... (resumed)\n'
        '2026-11-25 11:00:09 | INFO | train_inner | {"epoch": 9, "update": 8.1, "loss": "0.6", "num_updates": "600"}\n')
    carried = results / "_carry/park_kim_scan26_5k/scan/lt/seed2"  # carried from another machine (carry.py save)
    carried.mkdir(parents=True)
    (carried / "train.log").write_text(
        '2026-11-25 12:00:00 | INFO | train_inner | {"epoch": 4, "update": 3.5, "loss": "0.9", "num_updates": "300"}\n')
    # nothing of the Chaabouni sweep recorded: its Transformer under way (its own pace: below), its SAG + T5 run not
    # begun
    chaabouni = state / "runs/chaabouni_jump_curve/jump/transformer/seed1"
    chaabouni.mkdir(parents=True)
    (chaabouni / "command.txt").write_text("fairseq-train DATA --max-epoch 100 --lr 5e-4 --max-epoch 250 --seed 1\n")
    (chaabouni / "train.log").write_text(
        '2026-11-25 08:20:00 | INFO | train | {"epoch": 20, "train_loss": "0.5", "train_num_updates": "1160", '
        '"train_wall": "1440"}\n'
        '# 2026-11-25T09:00:00 sweep: fairseq-train ... (resumed)\n'
        '2026-11-25 09:06:00 | INFO | train | {"epoch": 25, "train_loss": "0.4", "train_num_updates": "1450", '
        '"train_wall": "360"}\n')
    # a run of another sweep and arch on the Chaabouni columns' data, recipe and flags: 2 h (their last resort)
    from fairseq_compgen.pipelines import sweep

    columns = sweep.plan(sweep.load_sweep(REPO / "campaign/chaabouni_jump_columns.yaml"), state, cpu=True)
    alike = results / "other_sweep/jump/transformer/seed1"
    alike.mkdir(parents=True)
    (alike / "done.json").write_text(json.dumps({"num_updates": 14500, "settings": columns[0].settings()
                                                 | {"arch": "chaabouni_transformer_scan"}}))
    (alike / "train.log").write_text('2026-11-25 10:00:00 | INFO | train | {"epoch": 250, "train_loss": "0.1", '
                                     '"train_num_updates": "14500", "train_wall": "7200"}\n')
    # the checkout a lent GPU would get: its wheels are made, the columns' data folder is not, but the lanes' is
    here = tmp_path / "checkout"
    (here / ".whl").mkdir(parents=True)
    (here / ".whl/fairseq_fixed-0.12.3.1-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"")
    (state / "data/scan_jump/addprim_jump/bin").mkdir(parents=True)
    p = subprocess.run([sys.executable, "campaign/status.py", "--queue", str(queue), "--state", str(state),
                        "--results", str(results), "--here", str(here)], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        "queue.txt:",
        "    3 campaign/park_kim_scan26_5k.yaml scan/*/seed1: 1/2 done; under way: scan/lt_l2_orth/seed1 (update 600)",
        "    4 campaign/park_kim_scan26_5k.yaml scan/*/seed2: 0/2 done; under way: scan/lt/seed2 (carried, update 300)"
        "; 1 left",
        "    5 campaign/chaabouni_jump_curve.yaml jump/*/seed1: 0/2 done; under way: jump/transformer/seed1 "
        "(update 1,450); 1 left",
        "    6 campaign/park_kim_scan26_50k.yaml scan/lt/seed1: 0/1 done",
        "    7 campaign/chaabouni_jump_columns.yaml jump/sag/seed1: 0/1 done",
        "distinct runs: 8; done 1, under way 3, left 4",
        # lt seed 2 takes lt seed 1's 1.5 h; lt_l2_orth (seeds 1 and 2) has no run of its own recorded: the
        # dataset's median, 1.5 h each (seed 1 under way has no command.txt: no budget to take its progress from);
        # the 50k sweep's lt, nothing of its sweep recorded: 5k lt's pace, 1.5 h per 1,000 updates, times the
        # recipe's 50,000 updates: 75 h; the Chaabouni runs, nothing of their sweeps or archs' paces recorded: the
        # other sweep's run on their data, recipe and flags, 2 h each (SAG + T5 and the columns' SAG), and for the
        # Transformer under way the 90 % of it left (25 of 250 epochs done): 1.8 h
        "training time to come: about 85.3 core-hours for 7 runs at the median of the recorded runs like them (or "
        "the pace per update of runs of the same model, data and flags, or their own pace so far, or runs of other "
        "models on the same data, recipe and flags; runs under way: the part of their budget left); 0 runs with none "
        "to go by",
        # steps 6 and 7 have no run begun; 7 is the queue's last
        "for a lent GPU (no run begun, the lanes reach it last): campaign/chaabouni_jump_columns.yaml 'jump/sag/seed1' "
        "(1 run)",
        # the runbook for it: the data is copied from the lanes' state folder and goes with the call
        f"  first, here: .whl/ here; data/scan_jump/ missing: cp -r {state}/data/scan_jump data/scan_jump; then, on the "
        "clean checkout: bash campaign/device_tree.sh slim",
        '  the call: carry=[".whl", "data/scan_jump", "commit.manifest"], command: PREP= PACK=1 JOBS=1 SLICE_S=470 '
        "bash scripts/gpu_oneshot.sh campaign/chaabouni_jump_columns.yaml jump/sag/seed1 (a second call on the warm "
        "machine: the same with the SLICE_S its budget leaves)",
        "  after it: bash campaign/device_tree.sh restore; python campaign/gpu_import.py FILES_AT/results.tar.gz "
        "--carried FILES_AT/carry.tar.part00 (FILES_AT: the folder of the call's files, files_at in its reply)"]
    # a step whose data is nowhere yet: its prep command
    without = subprocess.run([sys.executable, "campaign/status.py", "--queue", str(queue), "--state", str(tmp_path),
                              "--results", str(results), "--here", str(tmp_path)], cwd=REPO, capture_output=True,
                             text=True)
    assert ("data/scan_jump/ missing: fairseq-compgen prep scan --split addprim_jump --out data/scan_jump"
            in without.stdout and ".whl/ missing" in without.stdout), without.stdout
    # the Transformer's own pace, had nothing else been recorded: 0.5 h for 25 of its 250 epochs, 5 h in all (the
    # later, resumed invocation's summary counting)
    import importlib.util

    spec = importlib.util.spec_from_file_location("campaign_status", REPO / "campaign/status.py")
    status = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(status)
    assert status.extrapolated_hours(chaabouni) == 5.0 and status.done_fraction(chaabouni) == 0.1
    missing = subprocess.run([sys.executable, "campaign/status.py", "--queue", str(tmp_path / "nope.txt")], cwd=REPO,
                             capture_output=True, text=True)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "nope.txt" in missing.stderr


def test_steps_left_lists_the_steps_with_a_run_not_committed(tmp_path):
    """campaign/status.py --steps-left (what scripts/campaign.sh walks): a step whose runs all have a done.json in the
    repository's HEAD, under results/campaign or results/campaign_gpu, is left out; a step with a run recorded only
    in the working tree (copied, not committed yet) or not at all, or whose glob plans no run, is listed, its words
    one space apart (a line indented or split by tabs too, as bash's `read` splits it)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    for run in ("campaign/park_kim_scan26_5k/scan/lt/seed1", "campaign/park_kim_scan26_5k/scan/lt_l2_orth/seed1",
                "campaign_gpu/chaabouni_jump_columns/jump/sag/seed1", "campaign/park_kim_scan26_5k/scan/lt/seed2"):
        (repo / "results" / run).mkdir(parents=True)
        (repo / "results" / run / "done.json").write_text("{}\n")
    _git(repo, "add", "results/campaign/park_kim_scan26_5k/scan/lt/seed1", "results/campaign_gpu",
         "results/campaign/park_kim_scan26_5k/scan/lt_l2_orth/seed1")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "runs")
    queue = tmp_path / "queue.txt"
    queue.write_text("# a comment\nprep scan --split length_cutoff_26 --out data/scan\n"
                     "campaign/park_kim_scan26_5k.yaml scan/*/seed1\n"
                     "  campaign/park_kim_scan26_5k.yaml \t scan/*/seed2\n"
                     "campaign/chaabouni_jump_columns.yaml jump/sag/seed1\n"
                     "campaign/chaabouni_jump_columns.yaml jump/sag/seed2\n"
                     "campaign/chaabouni_jump_columns.yaml jump/no_such_config/seed1\n")
    p = subprocess.run([sys.executable, "campaign/status.py", "--steps-left", "--queue", str(queue), "--repo",
                        str(repo), "--state", str(tmp_path / "state")], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["campaign/park_kim_scan26_5k.yaml scan/*/seed2",
                                     "campaign/chaabouni_jump_columns.yaml jump/sag/seed2",
                                     "campaign/chaabouni_jump_columns.yaml jump/no_such_config/seed1"]


def test_campaign_waits_for_another_lanes_commit_in_progress(tmp_path):
    """Changes under results/campaign/ or results/campaign_gpu/ alone are another lane (or carry.py, gpu_import.py)
    committing a run: the campaign waits for them (up to 30 s) instead of refusing the tree; here gpu_import's commit
    lands once the campaign says it waits (a change under campaign_gpu/ was refused at once before 2026-11-30)."""
    repo, state, _ = _clone_with(tmp_path, {"campaign/empty_queue.txt": "# nothing to run but a blank line\n\n"})
    other = repo / "results" / "campaign_gpu" / "other_lane.txt"
    other.parent.mkdir(parents=True, exist_ok=True)
    other.write_text("a run's files\n")
    _git(repo, "add", str(other))  # staged, as `git add` leaves them until `git commit` runs
    env = {**os.environ, **GIT_ENV, "STATE": str(state), "PY": sys.executable, "QUEUE": "campaign/empty_queue.txt"}
    p = subprocess.Popen(["bash", "scripts/campaign.sh"], cwd=repo, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    first = p.stdout.readline()  # the campaign saw the other lane's staged files and waits for their commit
    assert "results/campaign*/ has uncommitted changes (another lane committing a run?): waiting" in first, first
    _git(repo, "commit", "-q", "-m", "the other lane's run", "--", str(other))
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0 and "queue finished" in out, first + out + err


def test_a_stale_git_index_lock_is_removed_and_a_fresh_one_left(tmp_path):
    """A .git/index.lock over 10 minutes old was left by a git process stopped mid-commit (a session's end): while it
    stayed, every commit of the lanes failed ("could not commit") and the runs' records stayed uncommitted. The
    campaign removes it at its start, saying so; a younger one (a git command at work) is left alone."""
    repo, state, _ = _clone_with(tmp_path, {"campaign/empty_queue.txt": "# nothing to run\n"})
    lock = repo / ".git" / "index.lock"
    env = {**os.environ, **GIT_ENV, "STATE": str(state), "PY": sys.executable, "QUEUE": "campaign/empty_queue.txt"}
    lock.write_text("")
    p = subprocess.run(["bash", "scripts/campaign.sh"], cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and lock.exists() and "removing" not in p.stdout, p.stdout + p.stderr
    old = time.time() - 11 * 60
    os.utime(lock, (old, old))
    p = subprocess.run(["bash", "scripts/campaign.sh"], cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and not lock.exists(), p.stdout + p.stderr
    assert "campaign: removing .git/index.lock, left over 10 minutes ago" in p.stdout, p.stdout


def test_an_unfinished_run_is_carried_to_a_fresh_machine_and_resumes_there(scan_bin, trained_once, tmp_path):
    """campaign/carry.py: `save` commits an unfinished run's checkpoint and records under results/campaign/_carry/
    (one commit of that folder alone; a checkpoint over --max-mb is left out, one already carried is not committed
    again); on a fresh machine (a new state folder) the campaign restores it and resumes from that checkpoint
    instead of training from scratch, and the commit that records the run removes its carried folder. The unfinished
    run is a finished run of the tiny queue whose done.json and evaluations were removed: resumed, it finds the
    carried checkpoint at update 6, its last, and goes on to evaluation."""
    repo, state, head = _one_run_trained(tmp_path, trained_once)  # as if it had not finished: no results, no done.json
    run = state / "runs" / "tiny" / "scan" / "rel_uni" / "seed1"
    (run / "done.json").unlink()
    shutil.rmtree(run / "eval")
    carry = [sys.executable, "campaign/carry.py", "save", "--state", str(state), "--repo", str(repo)]

    small = subprocess.run(carry + ["--max-mb", "0.01"], cwd=REPO, capture_output=True, text=True)
    assert small.returncode == 0 and "not carried, its checkpoint is" in small.stdout, small.stdout + small.stderr
    assert _git(repo, "rev-parse", "HEAD").strip() == head
    # a save whose commit fails (here a pre-commit hook; on the machine, an index lock held by a lane) says so and
    # goes on to the other runs, exit 1; it gave up on every run left before (helper audit, 2026-11-29)
    carry_module = runpy.run_path(str(REPO / "campaign" / "carry.py"), run_name="carry")
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nexit 1\n")
    hook.chmod(0o755)
    with mock.patch("time.sleep"):
        assert carry_module["save"](repo, state, 16.0) == 1
    assert _git(repo, "rev-parse", "HEAD").strip() == head
    hook.unlink()
    p = subprocess.run(carry, cwd=REPO, capture_output=True, text=True)  # the copy left uncommitted: carried again
    assert p.returncode == 0 and "committed tiny/scan/rel_uni/seed1 at update 6" in p.stdout, p.stdout + p.stderr
    carried = repo / "results" / "campaign" / "_carry" / "tiny" / "scan" / "rel_uni" / "seed1"
    files = _git(repo, "show", "--name-only", "--format=%s", "HEAD").split("\n")
    assert files[0].startswith("Campaign carry: tiny/scan/rel_uni/seed1 at update 6 (training at " + head[:12])
    assert {Path(f).name for f in files[1:] if f} >= {"checkpoint_last.pt", "settings.json", "train.log",
                                                      "commit.txt", "data.json"}
    assert all(f.startswith("results/campaign/_carry/tiny/scan/rel_uni/seed1/") for f in files[1:] if f)
    assert (carried / "checkpoint_last.pt").read_bytes() == (run / "checkpoint_last.pt").read_bytes()
    again = subprocess.run(carry, cwd=REPO, capture_output=True, text=True)
    assert "already carried at this checkpoint" in again.stdout and "0 run(s) carried" in again.stdout, again.stdout
    carry_commit = _git(repo, "rev-parse", "HEAD").strip()

    fresh = tmp_path / "fresh_state"  # a fresh machine: the repository alone
    attempt = fresh / "runs" / "tiny" / "scan" / "rel_uni" / "seed1" / "train.log"  # there an attempt saved nothing
    attempt.parent.mkdir(parents=True)
    attempt.write_text("an attempt that saved no checkpoint\n")
    p = _campaign(repo, fresh)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert f"carry: restored tiny/scan/rel_uni/seed1 into {fresh.resolve()}" in p.stdout, p.stdout
    assert attempt.with_name("train.log.before-carry").read_text() == "an attempt that saved no checkpoint\n"
    assert "committed tiny/scan/rel_uni/seed1" in p.stdout, p.stdout
    log = (fresh / "runs" / "tiny" / "scan" / "rel_uni" / "seed1" / "train.log").read_text()
    resumed = log.rsplit("# ", 1)[-1]  # the fresh machine's invocation: the carried checkpoint, not from scratch
    assert "checkpoint_last.pt is at 6 updates and --max-update is 6: already finished" in resumed, log[-2000:]
    recorded = repo / "results" / "campaign" / "tiny" / "scan" / "rel_uni" / "seed1"
    assert json.loads((recorded / "done.json").read_text())["accuracy"]
    assert (recorded / "train.log").read_text().count(" sweep: ") == 2  # the carried start's log, then the resume
    assert not carried.exists() and not _git(repo, "ls-files", "results/campaign/_carry/tiny")
    changed = _git(repo, "show", "--name-status", "--format=", "HEAD").splitlines()
    assert any(c.startswith("D\tresults/campaign/_carry/tiny/scan/rel_uni/seed1/") for c in changed), changed
    assert _git(repo, "rev-parse", "HEAD~1").strip() == carry_commit  # one commit records the run, removes the carry
    assert _git(repo, "status", "--porcelain", "--untracked-files=no") == ""


def test_carry_saves_past_a_cut_off_checkpoint_never_goes_back_and_restores_over_an_earlier_one(tmp_path):
    """carry.py, on fabricated runs: a checkpoint_last.pt cut off at a session's end is carried as the run's newest
    readable save; a run with nothing readable is reported and the runs after it are still carried (it used to stop
    the whole save with a traceback); a checkpoint behind the one carried already is not carried over it; restore puts
    a carried checkpoint over a state folder's earlier one (its files kept as .before-carry) but not over one as far,
    and takes no folder left by a carry cut short (seed1.tmp) for a run."""
    import runpy

    import torch

    carry = runpy.run_path(str(REPO / "campaign" / "carry.py"), run_name="carry")
    repo, state = tmp_path / "repo", tmp_path / "state"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "start")

    def run(name, **saves):
        folder = state / "runs" / "sw" / "scan" / name / "seed1"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "data.json").write_text("{}\n")
        (folder / "train.log").write_text(f"{name} here\n")
        for file, updates in saves.items():
            torch.save({"optimizer_history": [{"num_updates": updates}], "model": {"w": torch.ones(32, 32)}},
                       folder / f"{file}.pt")
        return folder

    cut = run("a_cut", checkpoint_3_20=20, checkpoint_5_40=40, checkpoint_last=40)
    whole = (cut / "checkpoint_last.pt").read_bytes()
    (cut / "checkpoint_last.pt").write_bytes(whole[: len(whole) // 2])
    lost = run("b_lost", checkpoint_last=10)
    (lost / "checkpoint_last.pt").write_bytes(whole[:100])
    good = run("c_good", checkpoint_last=30)
    assert carry["save"](repo, state, 16.0) == 1  # b_lost not carried: reported, and the exit status says so
    carried = repo / "results" / "campaign" / "_carry" / "sw" / "scan"
    assert carry["num_updates"](carried / "a_cut" / "seed1" / "checkpoint_last.pt") == 40
    assert not (carried / "b_lost" / "seed1").exists() and not list((carried / "b_lost").iterdir())
    assert carry["num_updates"](carried / "c_good" / "seed1" / "checkpoint_last.pt") == 30
    assert "Campaign carry: sw/scan/c_good/seed1 at update 30" in _git(repo, "log", "-1", "--format=%s")

    # a lane began c_good again here (update 5), while the carried one is at 30: not carried over it
    shutil.rmtree(good)
    run("c_good", checkpoint_last=5)
    head = _git(repo, "rev-parse", "HEAD")
    carry["save"](repo, state, 16.0)
    assert _git(repo, "rev-parse", "HEAD") == head
    assert carry["num_updates"](carried / "c_good" / "seed1" / "checkpoint_last.pt") == 30
    # ... and restore puts the carried 30 back over it, keeping this folder's differing files aside
    (carried / "c_good" / "seed1.tmp").mkdir()  # a carry cut short: no run
    shutil.copy2(carried / "c_good" / "seed1" / "checkpoint_last.pt", carried / "c_good" / "seed1.tmp")
    assert carry["restore"](repo, state) == 0
    assert carry["num_updates"](good / "checkpoint_last.pt") == 30
    assert carry["num_updates"](good / "checkpoint_last.pt.before-carry") == 5
    assert not (state / "runs" / "sw" / "scan" / "c_good" / "seed1.tmp").exists()
    # a state folder as far as the carried checkpoint, or further, goes on from its own
    run("a_cut", checkpoint_last=50)
    carry["restore"](repo, state)
    assert carry["num_updates"](cut / "checkpoint_last.pt") == 50 and not (cut / "checkpoint_last.pt.before-carry").exists()


def test_a_run_begun_on_a_gpu_is_handed_to_the_lanes_and_resumes_there(scan_bin, trained_once, tmp_path):
    """campaign/gpu_import.py --carried: an unfinished run from a slice's carry.tar.part00.. (here in two parts),
    whose settings name the GPU machine's data folder, is committed under results/campaign/_carry/ (a dirty one is
    refused, a second import skips); on a fresh machine the campaign restores it, its sweep accepts the run folder
    because the campaign's data folder holds the files of the run's data.json, and it resumes from the GPU's
    checkpoint (update 6, its last) instead of training from scratch."""
    import tarfile

    repo, state, head = _one_run_trained(tmp_path, trained_once)  # as if it had not finished here: the GPU's run now
    tree = tmp_path / "carry"
    for seed, commit in ((1, head), (2, head + " dirty")):
        gpu_run = tree / "tiny" / "scan" / "rel_uni" / f"seed{seed}"
        shutil.copytree(state / "runs" / "tiny" / "scan" / "rel_uni" / "seed1", gpu_run,
                        ignore=shutil.ignore_patterns("done.json", "eval", "*.lock", ".lock"))
        settings = json.loads((gpu_run / "settings.json").read_text())
        (gpu_run / "settings.json").write_text(json.dumps(dict(settings, data="/gpu/main/data/scan/bin", seed=seed)))
        (gpu_run / "commit.txt").write_text(commit + "\n")
        (gpu_run / "commit.history").write_text(f"2026-11-28T01:13:55+00:00 {commit}\n")
        (gpu_run / "machine.txt").write_text(json.dumps({"gpu": "1 x NVIDIA H100 80GB HBM3"}))
    with tarfile.open(tmp_path / "carry.tar", "w") as tar:
        tar.add(tree, arcname=".")
    whole = (tmp_path / "carry.tar").read_bytes()
    parts = tmp_path / "back"
    parts.mkdir()
    (parts / "carry.tar.part00").write_bytes(whole[:len(whole) // 2])
    (parts / "carry.tar.part01").write_bytes(whole[len(whole) // 2:])

    importer = [sys.executable, str(REPO / "campaign" / "gpu_import.py"), "--carried", str(parts / "carry.tar.part00"),
                "--repo", str(repo), "--queue", str(repo / "campaign" / "tiny_queue.txt")]
    p = subprocess.run(importer, capture_output=True, text=True, env=dict(os.environ, **GIT_ENV))
    assert p.returncode == 1 and "tiny/scan/rel_uni/seed2: trained on" in p.stderr, p.stdout + p.stderr
    (message,) = _git(repo, "log", "--format=%s", f"{head}..HEAD").splitlines()
    assert message.startswith(f"Campaign carry: tiny/scan/rel_uni/seed1 at update 6 (training at {head[:12]} on "
                              f"1 x NVIDIA H100 80GB HBM3;"), message
    carried = repo / "results" / "campaign" / "_carry" / "tiny" / "scan" / "rel_uni" / "seed1"
    assert json.loads((carried / "settings.json").read_text())["data"] == "/gpu/main/data/scan/bin"
    again = subprocess.run(importer, capture_output=True, text=True, env=dict(os.environ, **GIT_ENV))
    assert "tiny/scan/rel_uni/seed1: carried already at update 6 (this one: 6), skipped" in again.stdout, again.stdout
    assert len(_git(repo, "log", "--format=%s", f"{head}..HEAD").splitlines()) == 1

    fresh = tmp_path / "fresh_state"  # a fresh machine: the repository alone
    attempt = fresh / "runs" / "tiny" / "scan" / "rel_uni" / "seed1" / "train.log"  # there an attempt saved nothing
    attempt.parent.mkdir(parents=True)
    attempt.write_text("an attempt that saved no checkpoint\n")
    p = _campaign(repo, fresh)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert f"carry: restored tiny/scan/rel_uni/seed1 into {fresh.resolve()}" in p.stdout, p.stdout
    assert attempt.with_name("train.log.before-carry").read_text() == "an attempt that saved no checkpoint\n"
    assert "committed tiny/scan/rel_uni/seed1" in p.stdout, p.stdout[-3000:] + p.stderr[-3000:]
    log = (fresh / "runs" / "tiny" / "scan" / "rel_uni" / "seed1" / "train.log").read_text()
    assert "checkpoint_last.pt is at 6 updates and --max-update is 6: already finished" in log.rsplit("# ", 1)[-1]
    recorded = repo / "results" / "campaign" / "tiny" / "scan" / "rel_uni" / "seed1"
    assert json.loads((recorded / "done.json").read_text())["settings"]["data"] == str(scan_bin)
    assert not carried.exists()


def test_runs_finished_on_a_gpu_are_recorded_apart_and_the_lanes_skip_them(scan_bin, tmp_path):
    """campaign/gpu_import.py: a clean finished run from a one-shot's results.tar.gz is committed, alone, under
    results/campaign_gpu/ with its sweep.json; a dirty one, one whose data differs from the CPU runs', and one of no
    campaign sweep are refused; a second import skips; scripts/campaign.sh then skips the run instead of training it,
    and campaign/status.py counts it done."""
    import tarfile

    repo, state, head = _tiny_clone(tmp_path, scan_bin)
    hashes = "".join(f"{'0' * 64}  {f.name}\n" for f in sorted(scan_bin.iterdir()) if f.is_file())
    tree = tmp_path / "tree"

    def run(sweep, seed, commit, data=hashes):
        d = tree / sweep / "scan" / "rel_uni" / f"seed{seed}"
        (d / "eval").mkdir(parents=True)
        (d / "done.json").write_text(json.dumps({"accuracy": {"valid": 0.5, "gen": 0.25}}))
        (d / "eval" / "gen.json").write_text("{}")
        (d / "eval" / "gen.outputs.gz").write_bytes(b"\x1f\x8b outputs")  # kept with the result
        (d / "eval" / "gen.generate.txt").write_text("the whole generate output: not kept")
        (d / "commit.txt").write_text(commit + "\n")
        (d / "machine.txt").write_text(json.dumps({"gpu": "1 x NVIDIA H100 80GB HBM3"}))
        (d / "data.sha256").write_text(data)
        (d / "checkpoint_last.pt").write_text("not recorded")
        (tree / sweep / "sweep.json").write_text("{}\n")
    run("tiny", 1, head)
    run("tiny", 2, head + " dirty")
    run("elsewhere", 1, head)
    with tarfile.open(tmp_path / "results.tar.gz", "w:gz") as tar:
        tar.add(tree, arcname=".")
    cpu = repo / "results" / "campaign" / "tiny" / "scan" / "other" / "seed9"  # a CPU run's data, to compare with
    cpu.mkdir(parents=True)
    (cpu / "data.sha256").write_text(hashes)
    carried = repo / "results" / "campaign" / "_carry" / "tiny" / "scan" / "rel_uni" / "seed1"  # a CPU lane's carry
    carried.mkdir(parents=True)
    (carried / "checkpoint_last.pt").write_text("carried")
    _git(repo, "add", "results")
    _git(repo, "commit", "-q", "-m", "a CPU run's data hashes")
    head = _git(repo, "rev-parse", "HEAD").strip()

    importer = [sys.executable, str(REPO / "campaign" / "gpu_import.py"), str(tmp_path / "results.tar.gz"),
                "--repo", str(repo), "--queue", str(repo / "campaign" / "tiny_queue.txt")]
    p = subprocess.run(importer, capture_output=True, text=True, env=dict(os.environ, **GIT_ENV))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "tiny/scan/rel_uni/seed2: trained on" in p.stderr and "not a clean commit" in p.stderr, p.stdout + p.stderr
    assert "elsewhere/scan/rel_uni/seed1: not a run of a campaign sweep" in p.stderr
    recorded = repo / "results" / "campaign_gpu" / "tiny" / "scan" / "rel_uni" / "seed1"
    assert {f.name for f in recorded.iterdir()} == {"done.json", "eval", "commit.txt", "machine.txt", "data.sha256"}
    assert {f.name for f in (recorded / "eval").iterdir()} == {"gen.json", "gen.outputs.gz"}
    (message,) = _git(repo, "log", "--format=%s", f"{head}..HEAD").splitlines()
    assert message.startswith("Campaign (lent GPU): tiny/scan/rel_uni/seed1 finished (accuracy: gen 0.2500, valid")
    files = _git(repo, "show", "--name-only", "--format=", "HEAD").split()
    carry = "results/campaign/_carry/tiny/scan/rel_uni/seed1/checkpoint_last.pt"  # removed in the same commit
    assert "results/campaign_gpu/tiny/sweep.json" in files and carry in files and not carried.exists()
    assert all(f.startswith("results/campaign_gpu/tiny/") for f in files if f != carry)
    p = subprocess.run(importer, capture_output=True, text=True, env=dict(os.environ, **GIT_ENV))
    assert "tiny/scan/rel_uni/seed1: already recorded, skipped" in p.stdout
    assert len(_git(repo, "log", "--format=%s", f"{head}..HEAD").splitlines()) == 1
    cut = tmp_path / "cut" / "results.tar.gz"  # a copy cut short: an EOFError traceback before
    cut.parent.mkdir()
    cut.write_bytes((tmp_path / "results.tar.gz").read_bytes()[:-200])
    p = subprocess.run(importer[:2] + [str(cut)] + importer[3:], capture_output=True, text=True,
                       env=dict(os.environ, **GIT_ENV))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stdout + p.stderr
    assert p.stderr.startswith(f"gpu_import: {cut}: the archive cannot be read to its end (") and \
        p.stderr.rstrip().endswith("expected the whole file; copy it again (nothing was recorded from it)"), p.stderr
    assert len(_git(repo, "log", "--format=%s", f"{head}..HEAD").splitlines()) == 1

    (tree / "tiny" / "scan" / "rel_uni" / "seed1" / "data.sha256").write_text(hashes.replace("0", "1", 1))
    _git(repo, "reset", "-q", "--hard", head)  # not recorded any more (a copy alone would not count: HEAD is read)
    p = subprocess.run(importer[:2] + [str(tree)] + importer[3:],
                       capture_output=True, text=True, env=dict(os.environ, **GIT_ENV))
    assert "its data (data.sha256) differs from the CPU runs' of tiny/scan" in p.stderr
    # fairseq-preprocess's log (it names the folder's path) is not data: the same data prepared on the GPU machine
    # is recorded, as the aggregator pools such runs
    data = "".join(line for line in hashes.splitlines(keepends=True) if not line.rstrip().endswith("preprocess.log"))
    (tree / "tiny" / "scan" / "rel_uni" / "seed1" / "data.sha256").write_text(data + f"{'e' * 64}  preprocess.log\n")
    p = subprocess.run(importer[:2] + [str(tree)] + importer[3:],
                       capture_output=True, text=True, env=dict(os.environ, **GIT_ENV))
    assert "Campaign (lent GPU): tiny/scan/rel_uni/seed1 finished" in p.stdout, p.stdout + p.stderr
    assert "tiny/scan/rel_uni/seed1: its data" not in p.stderr
    _git(repo, "checkout", "-q", "--", "results")

    # the lanes skip it: seed 1 is not trained (seed 2 is)
    (repo / "campaign" / "tiny_queue.txt").write_text("campaign/tiny.yaml scan/*/seed1\n")
    _git(repo, "commit", "-q", "-am", "seed 1 only")
    p = _campaign(repo, state)
    assert p.returncode == 0 and "committed" not in p.stdout, p.stdout + p.stderr
    assert not list(state.glob("runs/tiny/scan/*/seed1/checkpoint*"))
    status = subprocess.run([sys.executable, str(repo / "campaign" / "status.py"), "--queue",
                             str(repo / "campaign" / "tiny_queue.txt"), "--state", str(state)],
                            capture_output=True, text=True)
    assert "1/1 done" in status.stdout, status.stdout + status.stderr


def test_a_gpu_run_of_a_sweep_without_cpu_runs_is_checked_against_a_sweep_on_the_same_data(tmp_path):
    """gpu_import.cpu_data: where the GPU run's own sweep has no CPU run to compare its data with (every run of it
    trained on a lent GPU), the CPU runs of another campaign sweep whose file declares the same data folder are the
    reference; a sweep on other data is not."""
    sys.path.insert(0, str(REPO))
    from campaign import gpu_import

    for name, data in (("here", "data/jump/bin"), ("gpu_only", "data/jump/bin"), ("other", "data/length/bin")):
        (tmp_path / "campaign").mkdir(exist_ok=True)
        (tmp_path / "campaign" / f"{name}.yaml").write_text(
            f"name: {name}\nseeds: [1]\ndatasets:\n  jump:\n    data: {data}\n    recipe: csordas/scan\n"
            f"configurations:\n  x:\n    arch: rel_uni_transformer_scan\n")
    sweeps = {n: f"campaign/{n}.yaml" for n in ("here", "gpu_only", "other")}
    cpu = tmp_path / "results" / "campaign" / "here" / "jump" / "x" / "seed1"
    cpu.mkdir(parents=True)
    (cpu / "data.sha256").write_text(f"{'a' * 64}  train.src-tgt.src.bin\n")
    hashes, of = gpu_import.cpu_data(tmp_path, "gpu_only/jump/x/seed1", sweeps)
    assert of == "here/jump" and hashes == gpu_import.recorded_data_key(cpu)
    assert gpu_import.cpu_data(tmp_path, "other/jump/x/seed1", sweeps) == (None, None)
    # `data:` compared with its placeholders filled ({name}: the dataset's name), as the sweep plans it
    (tmp_path / "campaign" / "templated.yaml").write_text(
        "name: templated\nseeds: [1]\ndatasets:\n  length:\n    data: data/{name}/bin\n    recipe: csordas/scan\n"
        "configurations:\n  x:\n    arch: rel_uni_transformer_scan\n")
    (tmp_path / "campaign" / "here.yaml").write_text((tmp_path / "campaign" / "here.yaml").read_text().replace(
        "data/jump/bin", "data/{name}/bin"))
    templated = dict(sweeps, templated="campaign/templated.yaml")
    assert gpu_import.cpu_data(tmp_path, "templated/length/x/seed1", templated) == (None, None)
    assert gpu_import.cpu_data(tmp_path, "gpu_only/jump/x/seed1", templated)[1] == "here/jump"
    run = tmp_path / "gpu" / "gpu_only" / "jump" / "x" / "seed1"
    run.mkdir(parents=True)
    (run / "commit.txt").write_text("0123456789abcdef0123456789abcdef01234567\n")
    (run / "data.sha256").write_text(f"{'b' * 64}  train.src-tgt.src.bin\n")
    why = gpu_import.refusal(tmp_path, "gpu_only/jump/x/seed1", run, sweeps)
    assert why == "gpu_only/jump/x/seed1: its data (data.sha256) differs from the CPU runs' of here/jump"
    (run / "data.sha256").write_text((cpu / "data.sha256").read_text())
    assert gpu_import.refusal(tmp_path, "gpu_only/jump/x/seed1", run, sweeps) is None


def test_status_names_a_bad_queue_line_in_one_line(tmp_path):
    queue = tmp_path / "queue.txt"
    queue.write_text("campaign/no_such_sweep.yaml scan/*/seed1\n")
    p = subprocess.run([sys.executable, str(REPO / "campaign" / "status.py"), "--queue", str(queue)],
                       capture_output=True, text=True)
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stderr.startswith("fairseq_compgen: error: sweep file not found: ") and "no_such_sweep.yaml" in p.stderr


def test_keep_outputs_of_runs_recorded_before_outputs_were_kept(tmp_path):
    """campaign/keep_outputs.py: a recorded run whose state-folder copy holds the same evaluation (its JSON byte for
    byte) and the fairseq-generate output it scored gets eval/<subset>.outputs.gz, that output's S/T/H/D lines;
    another evaluation in the state folder, an output newer than its result (a later decoding), outputs that do not
    give the recorded counts or cannot be scored, and runs the state folder does not hold are left as they are, each
    named; a file written but not committed is committed by the next pass; a committed one is skipped."""
    import gzip

    sys.path.insert(0, str(REPO))
    from campaign import keep_outputs

    generate = ("2026-11-27 | INFO | fairseq_cli.generate | {'common': ...}\n"
                "S-1\twalk\nT-1\tI_WALK\nH-1\t-0.2\tI_RUN\nD-1\t-0.2\tI_RUN\nP-1\t-0.1 -0.1\n"
                "S-0\tjump\nT-0\tI_JUMP\nH-0\t-0.1\tI_JUMP\nD-0\t-0.1\tI_JUMP\nP-0\t-0.0 -0.1\n"
                "Generate gen with beam=1: BLEU4 = 50.0\n")
    result = json.dumps({"n": 2, "correct": 1, "accuracy": 0.5, "checkpoint_sha256": "ab"})
    repo, state = tmp_path / "repo", tmp_path / "state"
    repo.mkdir()
    _git(repo, "init", "-q")

    def run(seed, recorded=result, theirs=result, output=generate, output_newer=False):
        rel = Path("sw") / "scan" / "a" / f"seed{seed}" / "eval"
        (repo / "results" / "campaign" / rel).mkdir(parents=True)
        (repo / "results" / "campaign" / rel / "gen.json").write_text(recorded)
        if theirs is not None:
            (state / "runs" / rel).mkdir(parents=True)
            (state / "runs" / rel / "gen.generate.txt").write_text(output)
            (state / "runs" / rel / "gen.json").write_text(theirs)
            stamp = (state / "runs" / rel / "gen.json").stat().st_mtime  # as eval: the output renamed in first
            os.utime(state / "runs" / rel / "gen.generate.txt", (stamp + (5 if output_newer else -5),) * 2)
        return repo / "results" / "campaign" / rel / "gen.outputs.gz"

    kept = run(1)
    other = run(2, theirs=result.replace('"ab"', '"cd"'))  # the state folder evaluated another checkpoint
    wrong = run(3, recorded=result.replace('"correct": 1', '"correct": 2'),
                theirs=result.replace('"correct": 1', '"correct": 2'))  # counts its outputs do not give
    elsewhere = run(4, theirs=None)  # trained on another machine
    later = run(5, output_newer=True)  # decoded again after the result was written
    cut = run(6, output=generate.replace("H-0\t-0.1\tI_JUMP\n", ""))  # a reference without its hypothesis
    written, refused, absent = keep_outputs.keep(repo, state)
    assert written == [kept.relative_to(repo)] and absent == 1
    assert gzip.decompress(kept.read_bytes()).decode() == (
        "S-1\twalk\nT-1\tI_WALK\nH-1\t-0.2\tI_RUN\nD-1\t-0.2\tI_RUN\n"
        "S-0\tjump\nT-0\tI_JUMP\nH-0\t-0.1\tI_JUMP\nD-0\t-0.1\tI_JUMP\n")
    runs = state / "runs" / "sw" / "scan" / "a"
    assert [(str(rel), why) for rel, why in refused] == [
        ("sw/scan/a/seed2/eval/gen.json", f"{runs}/seed2/eval/gen.json is not the recorded result (another "
                                          "evaluation)"),
        ("sw/scan/a/seed3/eval/gen.json", f"{runs}/seed3/eval/gen.generate.txt: 1 of 2 exactly right, but "
                                          f"{repo}/results/campaign/sw/scan/a/seed3/eval/gen.json records 2 of 2: "
                                          "expected the outputs it was scored from"),
        ("sw/scan/a/seed5/eval/gen.json", f"{runs}/seed5/eval/gen.generate.txt is newer than the result (a later "
                                          "decoding, not the one it scored)"),
        ("sw/scan/a/seed6/eval/gen.json", f"{runs}/seed6/eval/gen.generate.txt: 1 id(s) with a reference (T-) but "
                                          "no hypothesis (H-): 0")]
    assert not any(p.exists() for p in (other, wrong, elsewhere, later, cut))
    assert keep_outputs.keep(repo, state)[0] == [kept.relative_to(repo)]  # written, not committed: still to commit
    _git(repo, "add", "results")
    _git(repo, "commit", "-q", "-m", "kept")
    assert keep_outputs.keep(repo, state)[0] == []  # committed: skipped

    p = subprocess.run([sys.executable, REPO / "campaign" / "keep_outputs.py", "--state", tmp_path / "nothing"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines()[-1].endswith(f"--state {tmp_path / 'nothing'}: no runs/ folder there "
                                                      "(expected the campaign's state folder)")


def test_jump_errors_counts_what_wrong_hypotheses_do_with_jump(tmp_path):
    """campaign/jump_errors.py: per run, the wrong hypotheses of the kept outputs, and among them those with fewer
    I_JUMP than the reference, with none, and of the reference's length; written through --out; a run whose
    outputs miss an example is one line, exit 1."""
    import gzip

    script = REPO / "campaign" / "jump_errors.py"
    ev = tmp_path / "jump" / "sag_t5" / "seed2" / "eval"
    ev.mkdir(parents=True)
    pairs = [("I_JUMP I_JUMP", "I_JUMP I_JUMP"),  # right
             ("I_JUMP I_JUMP", "I_RUN I_RUN"),  # jump as another action: fewer, none, same length
             ("I_TURN_LEFT I_JUMP", "I_TURN_LEFT I_JUMP I_JUMP"),  # one extra: not fewer, not none, longer
             ("I_JUMP I_JUMP I_WALK", "I_JUMP I_WALK")]  # fewer, not none, shorter
    text = "".join(f"S-{i}\tx\nT-{i}\t{t}\nH-{i}\t-0.1\t{h}\n" for i, (t, h) in enumerate(pairs))
    (ev / "test.outputs.gz").write_bytes(gzip.compress(text.encode()))
    copy = tmp_path / "jump" / "sag_t5" / "seed2_old" / "eval"  # a user's copy beside the run: not a run (its name
    copy.mkdir(parents=True)                                     # gave a ValueError traceback before)
    (copy / "test.outputs.gz").write_bytes(gzip.compress(text.encode()))
    out = tmp_path / "errors.md"
    p = subprocess.run([sys.executable, script, tmp_path, "--out", out], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert out.read_text() == p.stdout
    assert p.stdout.splitlines()[-1] == "| jump/sag_t5/seed2 | 3 of 4 | 0.67 | 0.33 | 0.33 |"
    assert "seed2_old" not in p.stdout

    (ev / "test.outputs.gz").write_bytes(gzip.compress(text.replace("H-3\t-0.1\tI_JUMP I_WALK\n", "").encode()))
    p = subprocess.run([sys.executable, script, tmp_path], capture_output=True, text=True)
    assert p.returncode == 1 and p.stderr.strip() == (
        f"jump_errors: error: {ev / 'test.outputs.gz'}: no hypothesis for 1 of 4 examples (e.g. id 3): expected the "
        "whole decoded subset"), p.stderr


def test_length_errors_counts_how_wrong_hypotheses_miss_the_length(tmp_path):
    """campaign/length_errors.py: per run, the wrong hypotheses of the kept outputs, and among them those longer,
    shorter and as long as the reference, the reference followed by more tokens, and a strict beginning of it (with
    --within N, of at most N tokens); --subset picks the file; an empty folder is one line, exit 1."""
    import gzip

    script = REPO / "campaign" / "length_errors.py"
    ev = tmp_path / "scan" / "alibi" / "seed1" / "eval"
    ev.mkdir(parents=True)
    pairs = [("A B", "A B"),  # right
             ("A B", "A B B"),  # the reference, then more: longer
             ("A B C", "A B"),  # a beginning of the reference: shorter
             ("A B C", "A C"),  # shorter, not a beginning
             ("A B", "B A"),  # the reference's length
             ("A", "B B")]  # longer, not the reference then more
    text = "".join(f"S-{i}\tx\nT-{i}\t{t}\nH-{i}\t-0.1\t{h}\n" for i, (t, h) in enumerate(pairs))
    (ev / "valid.outputs.gz").write_bytes(gzip.compress(text.encode()))
    out = tmp_path / "lengths.md"
    p = subprocess.run([sys.executable, script, tmp_path, "--subset", "valid", "--out", out], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    assert out.read_text() == p.stdout and "--subset valid`" in p.stdout.splitlines()[0]
    assert p.stdout.splitlines()[-1] == "| scan/alibi/seed1 | 5 of 6 | 0.40 | 0.40 | 0.20 | 0.20 | 0.20 |"
    for within, share in ((1, "0.00"), (2, "0.20")):  # the early stop is 2 tokens long
        p = subprocess.run([sys.executable, script, tmp_path, "--subset", "valid", "--within", str(within)],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        assert f"--subset valid --within {within}`" in p.stdout.splitlines()[0]
        assert f"| a beginning, at most {within} tokens |" in p.stdout
        assert p.stdout.splitlines()[-1] == f"| scan/alibi/seed1 | 5 of 6 | 0.40 | 0.40 | 0.20 | 0.20 | 0.20 | {share} |"

    p = subprocess.run([sys.executable, script, tmp_path], capture_output=True, text=True)  # no test outputs
    assert p.returncode == 1 and p.stderr.strip() == (
        f"length_errors: error: {tmp_path}: no */*/seed*/eval/test.outputs.gz: expected an exported table or a sweep "
        "folder whose runs kept their outputs"), p.stderr
