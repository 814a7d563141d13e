"""scripts/gpu_oneshot.sh, run on CPU with a tiny budget as the test of the GPU command: a slice that ends
mid-training brings back the run's records, its checkpoint to carry and its steps/s (packed into a few files, as the
device tool brings them back); a fresh machine given the carried parts resumes from that checkpoint; a run that finishes within its slice is evaluated and its results come back;
nothing that names a run folder outlives the slice."""
import json
import os
import re
import shutil
import subprocess
import tarfile
import sys
from pathlib import Path

from fairseq_compgen import checkpoint_loading

REPO = Path(__file__).resolve().parents[1]
TINY = ("--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 16 --decoder-embed-dim 16 "
        "--encoder-ffn-embed-dim 32 --decoder-ffn-embed-dim 32 --encoder-attention-heads 2 "
        "--decoder-attention-heads 2 --batch-size 32 --log-interval 5 --save-interval-updates 5")


def _sweep(path: Path, data: Path, updates: int) -> Path:
    path.write_text(f"""name: {path.stem}
seeds: [1]
datasets:
  scan:
    data: {data}
    recipe: csordas/scan
    subsets: [valid, gen]
    flags: "--max-update {updates} --validate-interval-updates 1000000"
configurations:
  rel_uni:
    arch: rel_uni_transformer_scan
    flags: "{TINY}"
""")
    return path


def _oneshot(sweep: Path, out: Path, runs: Path, slice_s: int, carry: Path = None, pack: bool = False, **settings):
    env = dict(os.environ, CPU="1", JOBS="2", SLICE_S=str(slice_s), OUT=str(out), RUNS=str(runs), PREP="",
               CARRY=str(carry or runs / "no-carry"), OMP_NUM_THREADS="1", PACK="1" if pack else "0", **settings)
    fresh = not out.exists()
    p = subprocess.run(["bash", "scripts/gpu_oneshot.sh", str(sweep), "scan/*"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=slice_s + 240)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    if fresh:  # the script waits for its tee: the log holds every line, the last ones included, when it returns
        assert (out / "oneshot.log").read_text() == p.stdout
    return p.stdout


def test_slices_stop_carry_resume_and_finish(scan_bin, tmp_path):
    # packed, as the device tool brings files back (PACK=1): a few flat files, the carry in parts
    long = _sweep(tmp_path / "long.yaml", scan_bin, 1_000_000)
    log = _oneshot(long, tmp_path / "out1", tmp_path / "machine1", slice_s=30, pack=True)
    assert "status 124" in log and "carried long/scan/rel_uni/seed1" in log  # the slice ended the training
    out1 = tmp_path / "out1"
    assert {p.name for p in out1.iterdir()} == {"oneshot.log", "results.tar.gz", "steps_per_s.json",
                                                "carry.tar.part00"}
    unpacked = tmp_path / "unpacked"
    for name in ("results.tar.gz", "carry.tar.part00"):
        with tarfile.open(out1 / name) as tar:
            tar.extractall(unpacked, filter="data")
    carried = unpacked / "long" / "scan" / "rel_uni" / "seed1"  # carry/<sweep>/...: restored into that sweep only
    state = checkpoint_loading.load(carried / "checkpoint_last.pt")
    first = state["optimizer_history"][-1]["num_updates"]
    assert first >= 5 and (carried / "command.txt").is_file()
    rates = json.loads((out1 / "steps_per_s.json").read_text())
    assert rates["runs"] == 1 and rates["done"] == 0 and rates["sum_ups"] > 0 and rates["mps"] is False
    assert (unpacked / "long" / "scan" / "rel_uni" / "seed1" / "train.log").is_file()

    # a fresh machine: only the carried parts, as they came back; the run resumes from the carried checkpoint
    carry = tmp_path / "gpu_carry"
    carry.mkdir()
    shutil.copy2(out1 / "carry.tar.part00", carry)
    log = _oneshot(long, tmp_path / "out2", tmp_path / "machine2", slice_s=30, carry=carry)
    assert "restored scan/rel_uni/seed1" in log
    train_log = (tmp_path / "machine2" / "long" / "scan" / "rel_uni" / "seed1" / "train.log").read_text()
    resumed = re.search(r"[Ll]oaded checkpoint .*checkpoint_last\.pt \(epoch \d+ @ (\d+) updates\)", train_log)
    assert resumed and int(resumed.group(1)) == first, train_log[-2000:]

    # a run that finishes inside its slice: done, evaluated, results brought back; and a process that names a run
    # folder, as a trainer its killed sweep left running would, is stopped before the results are copied
    short = _sweep(tmp_path / "short.yaml", scan_bin, 10)
    stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)",
                              f"{tmp_path / 'machine1' / 'short' / 'scan' / 'rel_uni' / 'seed1'}/"])
    try:
        log = _oneshot(short, tmp_path / "out3", tmp_path / "machine1", slice_s=200, carry=carry)
        assert stray.wait(timeout=10) is not None and "stopping 1 process(es) the sweep left running" in log, log
        assert "restored" not in log  # the carry holds the sweep long's run of the same name, not this sweep's
    finally:
        stray.kill()
    run = tmp_path / "out3" / "short" / "scan" / "rel_uni" / "seed1"
    done = json.loads((run / "done.json").read_text())
    assert set(done["accuracy"]) == {"valid", "gen"}
    assert {p.name for p in (run / "eval").glob("*.json")} >= {"valid.json", "gen.json"}
    assert {p.name for p in (run / "eval").glob("*.outputs.gz")} == {"valid.outputs.gz", "gen.outputs.gz"}
    assert "gen      n=" in (run / "eval.log").read_text()  # the evaluation's log comes back too
    # what campaign/gpu_import.py checks and pools with: the data it trained on, hashed, and the sweep's plan
    hashes = dict(line.split()[::-1] for line in (run / "data.sha256").read_text().splitlines())
    assert set(hashes) == {f.name for f in scan_bin.iterdir() if f.is_file()}
    assert json.loads((tmp_path / "out3" / "short" / "sweep.json").read_text())["spec"]["name"] == "short"
    assert json.loads((tmp_path / "out3" / "steps_per_s.json").read_text())["done"] == 1
    assert not (tmp_path / "out3" / "carry").exists()

    # packed, the finished run's outputs travel in results.tar.gz; past RESULTS_MIB it is packed without them, saying so
    def packed(out):
        with tarfile.open(out / "results.tar.gz") as tar:
            return {Path(n).name for n in tar.getnames() if "/eval/" in n}

    _oneshot(short, tmp_path / "out4", tmp_path / "machine1", slice_s=60, pack=True)
    assert {"gen.json", "gen.outputs.gz", "valid.outputs.gz"} <= packed(tmp_path / "out4")
    log = _oneshot(short, tmp_path / "out5", tmp_path / "machine1", slice_s=60, pack=True, RESULTS_MIB="0")
    assert "packed without them" in log and "short/scan/rel_uni/seed1/eval/gen.outputs.gz" in log, log
    assert "gen.json" in packed(tmp_path / "out5") and not any(
        n.endswith(".outputs.gz") for n in packed(tmp_path / "out5"))


def test_an_unknown_decode_is_one_line(tmp_path):
    env = dict(os.environ, CPU="1", DECODE="GPU", OUT=str(tmp_path / "out"), RUNS=str(tmp_path / "runs"), PREP="")
    p = subprocess.run(["bash", "scripts/gpu_oneshot.sh", "positions_length", "scan/rope/seed1"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "oneshot: DECODE=GPU: expected cpu or gpu" in p.stdout, p.stdout + p.stderr
    assert not (tmp_path / "runs").exists()  # refused before any run started


def test_mps_that_serves_no_cuda_process_is_stopped_and_the_slice_goes_on_without_it(tmp_path):
    """MPS=1 on a machine whose daemon starts but serves no CUDA process (here: no CUDA at all; a fake
    nvidia-cuda-mps-control records how it is called): the daemon is told to quit, its log's tail is printed,
    the slice goes on without MPS and steps_per_s.json says so."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    fake = bin_dir / "nvidia-cuda-mps-control"
    fake.write_text(f"""#!/bin/bash
echo "args=$* stdin=$( [ -t 0 ] || timeout 1 cat )" >> {calls}
echo "a line of the server's log" > "$CUDA_MPS_LOG_DIRECTORY/control.log"
""")
    fake.chmod(0o755)
    env = dict(os.environ, MPS="1", SLICE_S="20", OUT=str(tmp_path / "out"), RUNS=str(tmp_path / "runs"), PREP="",
               PATH=f"{bin_dir}:{os.environ['PATH']}")
    env.pop("CPU", None)
    p = subprocess.run(["bash", "scripts/gpu_oneshot.sh", "positions_length", "no/such/run"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert calls.read_text().splitlines() == ["args=-d stdin=", "args= stdin=quit"]
    assert "mps: a line of the server's log" in p.stdout
    assert "oneshot: MPS daemon did not serve a CUDA process; without MPS" in p.stdout
    assert json.loads((tmp_path / "out" / "steps_per_s.json").read_text())["mps"] is False


def test_the_default_prep_makes_the_default_sweeps_data(tmp_path):
    """Without PREP, the script prepares the data its default sweep and runs (SWEEP, ONLY) train on: each
    ';'-separated step is one `fairseq-compgen prep` command line (an option given twice would keep its last)."""
    from fairseq_compgen.pipelines.sweep_schema import load_spec

    text = (REPO / "scripts" / "gpu_oneshot.sh").read_text()
    sweep, only, prep = (re.search(rf"^{name}=\$\{{{arg}(.+)\}}$", text, re.M).group(1)
                         for name, arg in (("SWEEP", "1:-"), ("ONLY", "2:-"), ("PREP", "PREP-")))
    for step in prep.split(";"):
        p = subprocess.run([sys.executable, "-m", "fairseq_compgen.cli", "prep", *step.split()], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
    data = tmp_path / load_spec(sweep)["datasets"][only.split("/")[0]]["data"]
    assert {"dict.src.txt", "train.src-tgt.src.bin", "gen.src-tgt.tgt.idx"} <= {f.name for f in data.iterdir()}


def test_a_tree_that_is_not_its_manifests_commit_stops_before_training(tmp_path):
    """A tree sent with a commit.manifest that does not describe it (a file missing or changed: 2026-11-28, a tree sent
    without results/ and a manifest listing them) stops before anything trains, naming the file, since its runs would
    record "dirty" and campaign/gpu_import.py would refuse them."""
    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "gpu_oneshot.sh", tree / "scripts")
    (tree / "fairseq_compgen").symlink_to(REPO / "fairseq_compgen")
    (tree / ".venv").symlink_to(REPO / ".venv")
    (tree / "commit.manifest").write_text(f"{'a' * 40}\n100644 blob {'b' * 40}\tscripts/gpu_oneshot.sh\n"
                                          f"100644 blob {'c' * 40}\tresults/campaign/x/done.json\n")
    env = dict(os.environ, CPU="1", OUT=str(tmp_path / "out"), RUNS=str(tmp_path / "runs"), PREP="")
    p = subprocess.run(["bash", "scripts/gpu_oneshot.sh", "no_such_sweep.yaml", "scan/*"], cwd=tree, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "oneshot: this tree is not the commit that commit.manifest names (scripts/gpu_oneshot.sh: differs)" in p.stdout
    assert f"\"{'a' * 40} dirty\"" in p.stdout and not (tmp_path / "runs").exists()


def test_a_slim_tree_goes_without_results_and_is_its_manifests_commit(tmp_path):
    """campaign/device_tree.sh: `slim` leaves results/ behind (out of the index, ignored) and writes the manifest of
    what is sent, which a copy of exactly those files passes; `restore` gives back the index, the exclude file and
    no manifest; a checkout with uncommitted changes is refused."""
    from fairseq_compgen.pipelines.train import manifest_mismatch

    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(REPO), str(repo)], check=True)
    shutil.copy2(REPO / "campaign" / "device_tree.sh", repo / "campaign")  # this tree's script, committed there
    git = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True, text=True).stdout
    git("add", "campaign/device_tree.sh")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "this tree's script")
    exclude = (repo / ".git" / "info" / "exclude").read_bytes()
    slim = subprocess.run(["bash", "campaign/device_tree.sh", "slim"], cwd=repo, capture_output=True, text=True)
    assert slim.returncode == 0 and "results/ stays behind" in slim.stdout, slim.stdout + slim.stderr
    sent = git("ls-files").split("\n") + git("ls-files", "--others", "--exclude-standard").split("\n")
    assert not any(f.startswith("results/") for f in sent) and "commit.manifest" not in sent
    copy = tmp_path / "sent"  # what the device tool copies, with the manifest carried along
    for f in filter(None, sent):
        (copy / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / f, copy / f, follow_symlinks=False)
    shutil.copy2(repo / "commit.manifest", copy)
    assert manifest_mismatch(copy) is None
    assert (repo / "commit.manifest").read_text().split("\n")[0] == git("rev-parse", "HEAD").strip()
    again = subprocess.run(["bash", "campaign/device_tree.sh", "slim"], cwd=repo, capture_output=True, text=True)
    assert again.returncode == 1 and "already slim" in again.stderr
    restore = subprocess.run(["bash", "campaign/device_tree.sh", "restore"], cwd=repo, capture_output=True, text=True)
    assert restore.returncode == 0, restore.stderr
    assert git("status", "--porcelain") == "" and (repo / ".git" / "info" / "exclude").read_bytes() == exclude
    (repo / "README.md").write_text("changed\n")
    dirty = subprocess.run(["bash", "campaign/device_tree.sh", "slim"], cwd=repo, capture_output=True, text=True)
    assert dirty.returncode == 1 and "uncommitted changes" in dirty.stderr and not (repo / "commit.manifest").exists()
