"""One line, never a traceback: each misuse below stops the real command with exit status 1
and one last line `fairseq_compgen: error: ...` naming the file or flag and what was expected (Ctrl-C: 130 and
`fairseq_compgen: interrupted: ...` saying what was kept and how to resume), and no Python traceback."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COMPGEN = [sys.executable, "-m", "fairseq_compgen.cli"]
TINY = ("--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 16 --decoder-embed-dim 16 "
        "--encoder-ffn-embed-dim 32 --decoder-ffn-embed-dim 32 --encoder-attention-heads 2 "
        "--decoder-attention-heads 2 --batch-size 64 --num-workers 0 --valid-subset valid").split()
TRAIN = [*COMPGEN, "train", "--recipe", "csordas/scan", "--cpu", "rel_uni_transformer"]


def _env(**extra):
    return dict(os.environ, OMP_NUM_THREADS="1", **extra)


def compgen(*args, code=None, env=None):
    """The command as a user runs it (or, with `code`, that Python first: a patch of what cannot be staged as
    root), its result."""
    args = [str(a) for a in args]
    cmd = ([sys.executable, "-c", f"{code}\nimport sys\nfrom fairseq_compgen import cli\nsys.exit(cli.main({args!r}))"]
           if code else [*COMPGEN, *args])
    return subprocess.run(cmd, cwd=REPO, env=env or _env(), capture_output=True, text=True, timeout=300)


def one_line(p, rc=1, prefix="fairseq_compgen: error: "):
    """The last line of stderr, after checking the exit status, the prefix and that no traceback came first."""
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    assert p.returncode == rc, (p.returncode, p.stderr[-3000:])
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith(prefix), p.stderr[-3000:]
    return last


@pytest.fixture(scope="module")
def run(scan_bin, tmp_path_factory):
    """A run folder with a real checkpoint_last.pt of a tiny model (2 updates)."""
    save = tmp_path_factory.mktemp("run") / "run"
    p = subprocess.run([*TRAIN, str(scan_bin), str(save), *TINY, "--max-update", "2"], cwd=REPO, env=_env(),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    # Hydra's deprecation warnings, about twenty lines that fairseq's use of Hydra raises (cli.HYDRA_DEPRECATIONS), and
    # torch's pin_memory notice on a machine without an accelerator are left out (new-user walkthrough, 2026-11-29);
    # fairseq's other output is not
    assert "hydra" not in p.stderr.lower() and "version_base" not in p.stderr, p.stderr[-3000:]
    assert "pin_memory" not in p.stderr + p.stdout and "| INFO | fairseq_cli.train |" in p.stdout, p.stderr[-3000:]
    return save


# ------------------------------------------------------------------------------------ output folders
def test_prep_out_is_a_file(tmp_path):
    (tmp_path / "data").write_text("the user's file\n")
    last = one_line(compgen("prep", "scan", "--split", "length_cutoff_26", "--out", tmp_path / "data"))
    assert last.endswith(f"--out {tmp_path / 'data'} is a file: expected a folder (or a path where one can be made)")
    assert (tmp_path / "data").read_text() == "the user's file\n"


def test_prep_out_under_a_file(tmp_path):
    """No folder can be made under a file: what root meets instead of a permission error (root writes anywhere)."""
    (tmp_path / "data").write_text("x")
    last = one_line(compgen("prep", "scan", "--split", "length_cutoff_26", "--out", tmp_path / "data" / "scan"))
    assert f"--out {tmp_path / 'data' / 'scan'}: {tmp_path / 'data'} is a file, so no folder can be made" in last


def test_prep_out_without_write_permission(tmp_path):
    """As root a folder cannot be made unwritable, so os.access answers for a user without permission there."""
    patch = (f"import os\nreal = os.access\n"
             f"os.access = lambda p, mode, **k: False if str(p) == {str(tmp_path)!r} else real(p, mode, **k)")
    last = one_line(compgen("prep", "scan", "--split", "length_cutoff_26", "--out", tmp_path / "scan", code=patch))
    assert last.endswith(f"--out {tmp_path / 'scan'}: no write permission on {tmp_path}: expected a folder you can "
                         f"write to")
    assert not (tmp_path / "scan").exists()


def test_a_permission_error_met_later_is_one_line(tmp_path):
    """Past the up-front check (a folder whose permission changes, a read-only disk): the OSError of a path is
    one line naming it."""
    target = tmp_path / "scan" / "length_cutoff_26"
    patch = ("import pathlib\nreal = pathlib.Path.mkdir\n"
             "def mkdir(self, *a, **k):\n"
             f"    if str(self).startswith({str(target)!r}):\n"
             "        raise PermissionError(13, 'Permission denied', str(self))\n"
             "    return real(self, *a, **k)\n"
             "pathlib.Path.mkdir = mkdir")
    last = one_line(compgen("prep", "scan", "--split", "length_cutoff_26", "--out", tmp_path / "scan", code=patch))
    assert last.startswith(f"fairseq_compgen: error: {target}") and "Permission denied (no permission: expected a " \
        "location you can write to" in last, last


def test_train_save_is_a_file(scan_bin, tmp_path):
    (tmp_path / "run").write_text("x")
    last = one_line(compgen(*TRAIN[3:], scan_bin, tmp_path / "run", *TINY, "--max-update", "1"))
    assert last.endswith(f"SAVE (the run's folder) {tmp_path / 'run'} is a file: expected a folder (or a path where "
                         f"one can be made)")
    assert (tmp_path / "run").read_text() == "x"


def test_train_save_under_a_file(scan_bin, tmp_path):
    (tmp_path / "runs").write_text("x")
    last = one_line(compgen(*TRAIN[3:], scan_bin, tmp_path / "runs" / "r1", *TINY, "--max-update", "1"))
    assert f"{tmp_path / 'runs'} is a file, so no folder can be made there" in last


def test_eval_out_is_a_file(scan_bin, tmp_path):
    (tmp_path / "checkpoint_last.pt").write_bytes(b"not read before the folder is checked")
    (tmp_path / "results").write_text("x")
    last = one_line(compgen("eval", tmp_path / "checkpoint_last.pt", scan_bin, "gen", "--cpu",
                            "--out", tmp_path / "results"))
    assert last.endswith(f"--out {tmp_path / 'results'} is a file: expected a folder (or a path where one can be made)")


def test_eval_default_folder_is_a_file(scan_bin, tmp_path):
    (tmp_path / "checkpoint_last.pt").write_bytes(b"x")
    (tmp_path / "eval").write_text("x")
    last = one_line(compgen("eval", tmp_path / "checkpoint_last.pt", scan_bin, "gen", "--cpu"))
    assert last.endswith(f"the evaluation folder (--out's default) {tmp_path / 'eval'} is a file: expected a folder "
                         f"(or a path where one can be made)")
    # another checkpoint's default, RUN/eval/STEM, under the same file
    (tmp_path / "checkpoint_best.pt").write_bytes(b"x")
    last = one_line(compgen("eval", tmp_path / "checkpoint_best.pt", scan_bin, "gen", "--cpu"))
    assert f"{tmp_path / 'eval'} is a file, so no folder can be made there" in last


# --------------------------------------------------------------------------------- not a checkpoint
@pytest.mark.parametrize("kind", ["text", "empty", "truncated", "other"])
def test_eval_of_a_file_that_is_no_checkpoint(kind, run, scan_bin, tmp_path):
    ckpt = tmp_path / "x.pt"
    real = (run / "checkpoint_last.pt").read_bytes()
    if kind == "text":
        ckpt.write_text("hello, I am not a checkpoint\n")
    elif kind == "empty":
        ckpt.write_bytes(b"")
    elif kind == "truncated":
        ckpt.write_bytes(real[: len(real) // 2])
    else:  # a torch file, but not a fairseq checkpoint
        subprocess.run([sys.executable, "-c", f"import torch; torch.save({{'weights': [1, 2]}}, {str(ckpt)!r})"],
                       check=True)
    last = one_line(compgen("eval", ckpt, scan_bin, "gen", "--cpu", "--out", tmp_path / "ev"))
    assert last.startswith(f"fairseq_compgen: error: {ckpt} ") and last.endswith(
        "expected a complete checkpoint written by fairseq-train (fairseq-compgen train)" + (
            "; an interrupted copy or training leaves an incomplete file" if kind in ("text", "truncated") else "")
    ), last
    assert not (tmp_path / "ev").exists()  # no empty output folder left behind either (found by hand, 2026-11-28)


def test_eval_of_a_checkpoint_with_nan_weights(run, scan_bin, tmp_path):
    """Saved after training diverged: refused as a resume is (it was an AssertionError traceback from fairseq's
    generator: helper audit, 2026-11-29)."""
    import torch

    state = torch.load(run / "checkpoint_last.pt", weights_only=False)  # our own file
    name = next(k for k, v in state["model"].items() if v.is_floating_point())
    state["model"][name].fill_(float("nan"))
    torch.save(state, tmp_path / "nan.pt")
    last = one_line(compgen("eval", tmp_path / "nan.pt", scan_bin, "gen", "--cpu", "--out", tmp_path / "ev"))
    assert last.startswith(f"fairseq_compgen: error: {tmp_path / 'nan.pt'} holds NaN/Inf weights (1 tensors, e.g. "
                           f"{name}; saved at update 2)"), last
    assert not (tmp_path / "ev").exists()


# --------------------------------------------------------------------------------- a binary file to score
@pytest.mark.parametrize("scorer", ["exact_match", "bleu", "comp"])
def test_score_of_a_binary_file(scorer, tmp_path):
    log = tmp_path / "generate.txt"
    log.write_bytes(b"S-0\tjump\nT-0\tJUMP\n\x80\x02PK\x03\x04\x00\x00binary")
    meta = tmp_path / "test.comp"
    meta.write_text("big\tcat\tgrand\tchat\n")
    last = one_line(compgen("score", scorer, log, *(["--meta", meta] if scorer == "comp" else [])))
    assert last == (f"fairseq_compgen: error: {log}:3: a binary file, not text: expected fairseq-generate output "
                    f"(S-/T-/H- lines)")


@pytest.mark.parametrize("scorer", ["exact_match", "bleu"])
def test_score_of_gzip_outputs_and_of_a_damaged_one(scorer, tmp_path):
    """A run's eval/SUBSET.outputs.gz (gzip) is read as the text it holds; a cut-off one is one line naming it."""
    import gzip

    text = "S-0\tjump\nT-0\tI_JUMP\nH-0\t-0.1\tI_JUMP\nS-1\twalk\nT-1\tI_WALK\nH-1\t-0.2\tI_RUN\n"
    plain, packed = tmp_path / "generate.txt", tmp_path / "gen.outputs.gz"
    plain.write_text(text)
    packed.write_bytes(gzip.compress(text.encode()))
    assert compgen("score", scorer, packed).stdout == compgen("score", scorer, plain).stdout
    piped = subprocess.run([*COMPGEN, "score", scorer, "-"], cwd=REPO, env=_env(), input=packed.read_bytes(),
                           capture_output=True, timeout=300)  # standard input too
    assert piped.returncode == 0 and piped.stdout.decode() == compgen("score", scorer, plain).stdout, piped.stderr
    cut = tmp_path / "cut.outputs.gz"
    cut.write_bytes(packed.read_bytes()[:-12])
    last = one_line(compgen("score", scorer, cut))
    assert last.startswith(f"fairseq_compgen: error: {cut}:1: a damaged gzip file (") and last.endswith(
        "): expected fairseq-generate output (S-/T-/H- lines)"), last


def test_score_comp_of_binary_metadata(tmp_path):
    log, meta = tmp_path / "generate.txt", tmp_path / "test.comp"
    log.write_text("S-0\tthe big cat\nT-0\tle grand chat\nH-0\t-0.1\tle grand chat\n")
    meta.write_bytes(b"big\tcat\tgrand\tchat\n\x00\x00")
    last = one_line(compgen("score", "comp", log, "--meta", meta))
    assert last == (f"fairseq_compgen: error: {meta}:2: a binary file, not text: expected the COMP metadata "
                    f"(fairseq-compgen prep noun_adj's test.comp)")


# ------------------------------------------------------------------------------------ aggregate and sweep
def _sweep_out(out: Path, done: str = '{"accuracy": {}}') -> Path:
    """A sweep output folder with one finished run (eval/gen.json) whose done.json holds `done`; its run folder."""
    folder = out / "scan" / "c" / "seed1"
    (folder / "eval").mkdir(parents=True)
    (folder / "eval" / "gen.json").write_text(json.dumps({"n": 4, "correct": 3, "accuracy": 0.75}))
    (folder / "done.json").write_text(done)
    run = {"dataset": "scan", "config": "c", "seed": 1, "arch": "a", "dir": "scan/c/seed1", "subsets": None,
           "flags": []}
    (out / "sweep.json").write_text(json.dumps({"spec": {"name": "s", "datasets": {"scan": {}},
                                                         "configurations": {"c": {}}}, "runs": [run]}))
    return folder


def _no_matplotlib(tmp_path) -> dict:
    """An environment in which `import matplotlib` fails as when it is not installed."""
    fake = tmp_path / "no_matplotlib" / "matplotlib"
    fake.mkdir(parents=True, exist_ok=True)
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'matplotlib'\", name='matplotlib')\n")
    return _env(PYTHONPATH=os.pathsep.join([str(fake.parent), str(REPO), os.environ.get("PYTHONPATH", "")]))


@pytest.mark.parametrize("flag", ["--export", "--tables", "--plots"])
def test_aggregate_checks_its_output_folders_before_writing(flag, tmp_path):
    """`--export FILE` failed after the tables were written ("Not a directory", found by hand, 2026-11-28): every
    output folder is checked first, so a misuse leaves OUT as it was."""
    out = tmp_path / "out"
    _sweep_out(out)
    (tmp_path / "a file").write_text("x")
    before = sorted(out.rglob("*"))
    last = one_line(compgen("aggregate", out, flag, tmp_path / "a file"))
    assert last == (f"fairseq_compgen: error: {flag} {tmp_path / 'a file'} is a file: expected a folder (or a path "
                    f"where one can be made)")
    assert sorted(out.rglob("*")) == before and (tmp_path / "a file").read_text() == "x"


def test_aggregate_exports_only_into_a_new_folder_or_an_earlier_export(tmp_path):
    """`--export DIR` into a folder of the user's removed its files named like a view (compare_*.md) and replaced
    table.md (found by an audit, 2026-11-28): a folder with files but no aggregate.json is refused before anything
    is written."""
    out = tmp_path / "out"
    _sweep_out(out)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "compare_notes.md").write_text("my notes\n")
    before = sorted(out.rglob("*"))
    last = one_line(compgen("aggregate", out, "--no-plots", "--export", mine))
    assert last == (f"fairseq_compgen: error: --export {mine}: the folder holds files but no aggregate.json, so it is "
                    f"no earlier export: expected a new or empty folder, or an export to write again")
    assert sorted(out.rglob("*")) == before and [p.name for p in mine.iterdir()] == ["compare_notes.md"]
    (mine / "compare_notes.md").unlink()  # empty: taken
    assert compgen("aggregate", out, "--no-plots", "--export", mine).returncode == 0
    assert (mine / "aggregate.json").is_file()


def test_aggregate_without_matplotlib_writes_the_tables(tmp_path):
    out = tmp_path / "out"
    _sweep_out(out)
    p = compgen("aggregate", out, env=_no_matplotlib(tmp_path))
    last = one_line(p, rc=0, prefix="aggregate: no plots: ")
    assert last == ("aggregate: no plots: matplotlib is not installed (pip install 'fairseq_compgen[plots]', or "
                    "--no-plots to skip them without this line); the tables are written")
    assert "0.75" in (out / "table.md").read_text() and (out / "runs.md").is_file() and not (out / "plots").exists()
    # plots asked for by name: an error, the tables written first
    (out / "table.md").unlink()
    last = one_line(compgen("aggregate", out, "--plots", tmp_path / "p", env=_no_matplotlib(tmp_path)))
    assert last == ("fairseq_compgen: error: --plots needs matplotlib, which is not installed: expected "
                    "`pip install 'fairseq_compgen[plots]'` (the tables are written)")
    assert (out / "table.md").is_file()


@pytest.mark.parametrize("flags, expected", [
    (["--scale", "0"], "--scale 0: expected a positive number (100 for percent)"),  # every value tabulated as 0
    (["--digits", "-1"], "--digits -1: expected 0 or more"),  # a traceback from the number format
    (["--metric", "nosuch"], None),  # refused by collect (its own line); the --tables folder is not made
])
def test_aggregate_flags_out_of_range(flags, expected, tmp_path):
    out = tmp_path / "out"
    _sweep_out(out)
    last = one_line(compgen("aggregate", out, "--no-plots", "--tables", tmp_path / "tables", *flags))
    assert expected is None or last == f"fairseq_compgen: error: {expected}"
    assert not (tmp_path / "tables").exists()


@pytest.mark.parametrize("done", ['{"accuracy": {"gen": 0.7', "", "[1, 2]"])
def test_aggregate_names_a_broken_done_json(done, tmp_path):
    folder = _sweep_out(tmp_path / "out", done)
    last = one_line(compgen("aggregate", tmp_path / "out", "--no-plots"))
    assert last.startswith(f"fairseq_compgen: error: {folder / 'done.json'}") and last.endswith(
        "expected the JSON object a sweep writes when a run has finished; move it away and rerun the sweep to redo "
        "the run's evaluation"), last
    if done.startswith("{"):
        assert last.startswith(f"fairseq_compgen: error: {folder / 'done.json'}:1: not valid JSON ("), last


def test_aggregate_names_a_machine_record_that_is_no_json_before_writing_any_table(tmp_path):
    """A machine.txt that is not JSON was a JSONDecodeError traceback, after table.md and table.csv were written
    (helper audit, 2026-11-29)."""
    folder = _sweep_out(tmp_path / "out")
    (folder / "machine.txt").write_text("host1 Intel 2 cores\n")
    last = one_line(compgen("aggregate", tmp_path / "out", "--no-plots"))
    assert last.startswith(f"fairseq_compgen: error: {folder / 'machine.txt'}:1: not valid JSON"), last
    assert not (tmp_path / "out" / "table.md").exists()


def test_a_cut_binarized_subset_is_named(scan_bin, tmp_path):
    """A truncated .idx or .bin failed in numpy ("buffer is smaller than requested size"), naming no file, in
    eval and in training (helper audit, 2026-11-29); the check reads fairseq's index layout."""
    import shutil

    from fairseq_compgen.data.binarize import check_binarized
    from fairseq_compgen.errors import UsageError
    from fairseq_compgen.pipelines.evaluate import reference_stats

    for f in scan_bin.glob("valid.*"):
        check_binarized(str(f)[: -len(f.suffix)])  # whole: nothing to say
    for suffix, cut, expected in ((".idx", 7, r": \d+ bytes where an index of \d+ examples has \d+ \(cut short"),
                                  (".bin", 3, r": \d+ bytes where its index \(valid\.src-tgt\.tgt\.idx\) needs \d+"),
                                  (".idx", 10_000, r": a fairseq index cut short or damaged in its header")):
        data = tmp_path / f"bin{suffix}{cut}"
        shutil.copytree(scan_bin, data)
        f = data / f"valid.src-tgt.tgt{suffix}"
        f.write_bytes(f.read_bytes()[:-cut] if cut < f.stat().st_size else f.read_bytes()[:20])
        with pytest.raises(UsageError, match=re.escape(str(f)) + expected + r".*rerun the data folder's"):
            reference_stats(data, "valid")
    # training: the task's load_dataset checks each subset it loads
    p = subprocess.run([*TRAIN, str(data), str(tmp_path / "save"), *TINY, "--max-update", "1"], cwd=REPO,
                       env=_env(), capture_output=True, text=True, timeout=300)
    assert "a fairseq index cut short" in one_line(p), p.stderr[-2000:]


def test_train_names_a_data_record_that_is_no_json(scan_bin, tmp_path, run):
    """A run with a checkpoint resumes only on its data (data.json); a cut data.json was a JSONDecodeError
    traceback."""
    import shutil

    save = tmp_path / "run"
    shutil.copytree(run, save)
    (save / "data.json").write_text('{"sha256": "ab')
    p = subprocess.run([*TRAIN, str(scan_bin), str(save), *TINY, "--max-update", "3"], cwd=REPO, env=_env(),
                       capture_output=True, text=True, timeout=300)
    assert one_line(p).startswith(f"fairseq_compgen: error: {save / 'data.json'}:1: not valid JSON"), p.stderr[-2000:]


def test_sweep_names_a_broken_done_json(scan_bin, tmp_path):
    """A half-written done.json used to count as a finished run: the sweep skipped it and printed it as done."""
    from fairseq_compgen.pipelines import sweep

    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\ndatasets:\n  d:\n    data: {scan_bin}\n    recipe: csordas/scan\n"
                    "configurations:\n  c:\n    arch: rel_uni_transformer\n")
    (r,) = sweep.plan(sweep.load_sweep(path), tmp_path / "out")
    r.path.mkdir(parents=True)
    (r.path / "done.json").write_text('{"run": "d/c/seed1", "accu')
    last = one_line(compgen("sweep", path, "--out", tmp_path / "out", "--cpu", "--dry-run"))
    assert last.startswith(f"fairseq_compgen: error: {r.path / 'done.json'}:1: not valid JSON (")
    assert (r.path / "done.json").read_text() == '{"run": "d/c/seed1", "accu'


# --------------------------------------------------------------------------------- Ctrl-C
def _sigint_default():
    """In the child: Ctrl-C as at a terminal. A command started with `&` by a non-interactive shell (CI runners,
    nohup ... &) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt_when(cmd, ready, timeout=240, sig=signal.SIGINT):
    """Start `cmd`, send it `sig` once a line of its stdout satisfies `ready`; (returncode, stdout, stderr)."""
    p = subprocess.Popen([str(c) for c in cmd], cwd=REPO, env=_env(PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=_sigint_default)
    out, start = [], time.monotonic()
    try:
        for line in p.stdout:
            out.append(line)
            if ready(line):
                p.send_signal(sig)
                break
            assert time.monotonic() - start < timeout, "".join(out[-20:])
        else:
            raise AssertionError(f"ended before it was ready:\n{''.join(out[-20:])}\n{p.stderr.read()[-3000:]}")
        rest, err = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
    return subprocess.CompletedProcess(cmd, p.returncode, "".join(out) + rest, err)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_during_prep(tmp_path, sig):
    """Interrupted after the first of the generated splits is written: one line, 130; every split folder there
    is complete (a split is written whole), none half-written. SIGTERM (`kill`) does the same: it used to end the
    prep at once, leaving its fairseq-preprocess child writing on, orphaned (helper audit, 2026-11-29)."""
    out = tmp_path / "scan"
    p = _interrupt_when([*COMPGEN, "prep", "scan", "--split", "all-generated", "--out", out],
                        lambda line: line.startswith("vocab"), sig=sig)
    time.sleep(1)
    left = subprocess.run(["pgrep", "-f", f"fairseq_cli.preprocess.*{out}"], capture_output=True, text=True).stdout
    assert not left, f"a fairseq-preprocess of this prep is still running: {left}"
    last = one_line(p, rc=130, prefix="fairseq_compgen: interrupted: ")
    assert last == (f"fairseq_compgen: interrupted: fairseq-compgen prep scan stopped; a split is written into {out} "
                    f"only when complete, so it keeps the splits finished before and none half-written; rerun the "
                    f"same command to prepare the rest")
    for split in (d for d in out.iterdir() if not d.name.startswith(".")):
        assert (split / "bin" / "dict.src.txt").is_file(), split


def test_kill_during_a_sweeps_prep_stops_its_fairseq_preprocess(tmp_path):
    """`sweep --prep` prepares in-process: SIGTERM ended it at once and left fairseq-preprocess writing on,
    orphaned (sweep audit, 2026-11-29); now it stops as `prep` does, in one line."""
    out = tmp_path / "scan"
    path = tmp_path / "s.yaml"
    path.write_text(f"datasets:\n  scan:\n    data: {out}/simple/bin\n"
                    f"    prep: fairseq-compgen prep scan --split all-generated --out {out}\n"
                    f"configurations:\n  t:\n    arch: compgen_transformer_scan\n")
    p = _interrupt_when([*COMPGEN, "sweep", path, "--prep", "--cpu", "--dry-run"],
                        lambda line: line.startswith("vocab"), sig=signal.SIGTERM)
    time.sleep(1)
    left = subprocess.run(["pgrep", "-f", f"fairseq_cli.preprocess.*{out}"], capture_output=True, text=True).stdout
    assert not left, f"a fairseq-preprocess of this sweep's prep is still running: {left}"
    last = one_line(p, rc=130, prefix="fairseq_compgen: interrupted: ")
    assert last.startswith("fairseq_compgen: interrupted: fairseq-compgen prep scan stopped; "), last


def test_ctrl_c_during_training(scan_bin, tmp_path):
    """Interrupted after a checkpoint was saved: one line naming the update of the checkpoint kept, 130; a rerun
    of the same command resumes from it."""
    import torch

    save = tmp_path / "run"
    cmd = [*TRAIN, scan_bin, save, *TINY, "--max-update", "100000", "--save-interval-updates", "3",
           "--validate-interval-updates", "1000000", "--keep-interval-updates", "1", "--disable-validation"]
    p = _interrupt_when(cmd, lambda line: "saved checkpoint" in line.lower())
    last = one_line(p, rc=130, prefix="fairseq_compgen: interrupted: ")
    state = torch.load(save / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    n = state["optimizer_history"][-1]["num_updates"]
    assert n >= 3 and last == (f"fairseq_compgen: interrupted: checkpoints up to update {n} kept in {save} "
                               f"(checkpoint_last.pt); rerun the same command to resume")


def test_a_process_ends_with_its_status_while_a_thread_is_inside_torch():
    """`exit_before_finalizing` (Ctrl-C's 130, a torchrun rank's 0): with a daemon thread still running torch
    operations, as fairseq's prefetching thread may be, the process ends with the status given, after its exit
    handlers and with its output flushed (a line without a newline, to a pipe)."""
    script = """if True:
        import atexit, sys, threading, time, torch
        from fairseq_compgen.errors import exit_before_finalizing
        def busy():
            x = torch.randn(64, 64)
            while True:
                x = torch.tanh(x @ x.T / 64)
        threading.Thread(target=busy, daemon=True).start()
        atexit.register(lambda: print("handler ran", file=sys.stderr))
        time.sleep(0.3)
        print("no newline", end="")
        exit_before_finalizing(7)
        print("not reached")"""
    for _ in range(3):
        p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert (p.returncode, p.stdout) == (7, "no newline") and p.stderr.strip().endswith("handler ran"), p.stderr


# -------------------------------------------------------------------------------------- found while hunting
def test_max_update_0_is_refused_without_an_epoch_limit(scan_bin, tmp_path):
    """fairseq reads --max-update 0 as no limit: with the recipe's epoch limit absent it trained until killed."""
    last = one_line(compgen(*TRAIN[3:], scan_bin, tmp_path / "run", *TINY, "--max-update", "0"))
    assert last == ("fairseq_compgen: error: --max-update 0 is no limit to fairseq-train and no --max-epoch is set: "
                    "it would train until stopped; expected a positive --max-update (or a --max-epoch)")
    assert not (tmp_path / "run").exists()
    p = compgen(*TRAIN[3:], scan_bin, tmp_path / "run", "--max-update=0", "--max-epoch", "1", "--dry-run")
    assert p.returncode == 0 and "--max-update=0 --max-epoch 1" in p.stdout, p.stderr
    # neither given (no recipe): fairseq's defaults, 0 and 0, trained until killed, at its default lr of 0.25 (the
    # walkthrough audit of 2026-11-29)
    last = one_line(compgen("train", "--cpu", "rel_uni_transformer_scan", scan_bin, tmp_path / "run", *TINY,
                            "--batch-size", "8"))
    assert last == ("fairseq_compgen: error: no --max-update or --max-epoch: fairseq-train would train until stopped "
                    "(its defaults are 0, no limit); expected a budget (a --recipe sets one: fairseq-compgen recipes "
                    "lists them)")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("flags, expected", [
    # fairseq stopped after the first update, with status 0
    (["--max-update", "-5"], "--max-update -5: expected a positive number (0 is no limit, and --max-update 0 needs "
                             "a --max-epoch)"),
    # a traceback (ValueError) before fairseq's parser saw it
    (["--max-update=abc"], "--max-update abc: expected a whole number"),
    # fairseq batched the whole data set, in silence
    (["--batch-size", "-3"], "--batch-size -3: expected a positive number"),
    (["--max-tokens", "0"], "--max-tokens 0: expected a positive number"),
])
def test_budget_and_batch_flags_fairseq_would_misread(flags, expected, scan_bin, tmp_path):
    """Found by hand on 2026-11-28, each with `fairseq-compgen train` on the tiny SCAN data: refused in one line,
    before the run folder is made (with the recipe, which sets a batch size and a budget, the user's flag last)."""
    assert one_line(compgen(*TRAIN[3:], scan_bin, tmp_path / "run", *flags)) == f"fairseq_compgen: error: {expected}"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("flags, expected", [
    (["--self-atn-pos", "rope"], "fairseq-train: unrecognized arguments: --self-atn-pos rope"),
    # fairseq's list options eval() their text: a SyntaxError escaped argparse as a traceback
    (["--lr", "1e-3x"], "fairseq-train: argument --lr: invalid value '1e-3x' (SyntaxError: invalid decimal literal"),
    (["--self-attn-pos", "rotary"], "fairseq-train: argument --self-attn-pos: invalid choice: 'rotary' (choose from "),
])
def test_what_fairseq_trains_parser_refuses_is_one_line(flags, expected, scan_bin, tmp_path):
    """fairseq-train printed its whole usage (a few hundred lines) above its error, after `fairseq-compgen train`
    had made the run folder and its records (found by hand, 2026-11-28): now fairseq's parser runs first, and its
    refusal is our one line, before the folder is made."""
    last = one_line(compgen(*TRAIN[3:], scan_bin, tmp_path / "run", *TINY, "--max-update", "2", *flags))
    assert last.startswith(f"fairseq_compgen: error: {expected}"), last
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("flags, expected", [
    # found by an audit (2026-11-28): a ZeroDivisionError traceback
    (["--encoder-attention-heads", "0"], "--encoder-attention-heads 0: expected a positive whole number"),
    (["--encoder-embed-dim", "0", "--decoder-embed-dim", "0"], "--encoder-embed-dim 0: expected a positive whole number"),
    # trained without a word
    (["--attention-dropout", "1.5"], "--attention-dropout 1.5: expected a probability, 0 <= p < 1"),
    (["--dropout", "nan"], "--dropout nan: expected a probability, 0 <= p < 1"),
    (["--rope-theta", "500"], "--rope-theta 500.0 changes nothing: it is an option of rope, xpos only, which no "
                              "position flag here chooses (--absolute-positions, --self-attn-pos, --cross-attn-pos)"),
    (["--learned-max-positions", "64"], "--learned-max-positions 64 changes nothing: it is an option of learned only"),
    (["--share-all-embeddings", "True", "--share-decoder-input-output-embed", "False"],
     "--share-all-embeddings True shares the decoder's input and output embeddings too: expected no "
     "--share-decoder-input-output-embed False with it"),
    (["--self-attn-type", "linear", "--attention-dropout", "0.2"], "--attention-dropout changes nothing with --arch "
     "rel_uni_transformer: linear attention (self and cross) forms no attention weights to drop"),
    # the task's flags: refused only after the run folder and its records were made (an audit, 2026-11-29)
    (["--batch-chunks", "-3"], "--batch-chunks -3: expected a positive whole number (1: no chunks)"),
    (["--eval-comp-subset", "gen"], "--eval-comp-subset gen names the subset that --eval-comp's metadata is for"),
    (["--batch-chunks", "4", "--random-positions", "64"], "--batch-chunks 4 with --random-positions 64: each chunk "
     "would draw its own positions for its own length, not the batch's: expected one of the two"),
])
def test_flags_a_model_cannot_train_with_or_would_ignore_are_one_line(flags, expected, scan_bin, tmp_path):
    """The model's and the task's own checks of the parsed flags (check_training_flags), before the run folder is
    made. In this process (a UsageError is printed as one line by the CLI: the tests above)."""
    from fairseq_compgen.errors import UsageError
    from fairseq_compgen.pipelines import train

    with pytest.raises(UsageError) as e:
        train.main([*TRAIN[4:], str(scan_bin), str(tmp_path / "run"), *TINY, "--max-update", "2", *flags])
    assert str(e.value).startswith(expected), str(e.value)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("task, arch, flags, expected", [
    # a traceback in the first training step (found by an audit, 2026-11-28)
    ("compgen", "compgen_tagger", [], "--arch compgen_tagger is a COGS tagger (compgen_tagger): it trains with "
     "--task cogs_tagging --criterion cogs_tagging on a folder of `fairseq-compgen prep cogs_tagging`"),
    ("compgen", "compgen_transformer", ["--criterion", "cogs_tagging"],
     "--criterion cogs_tagging needs --task cogs_tagging (and --arch compgen_tagger), got --task compgen"),
    # NaN at update 1, blamed on --lr
    ("compgen", "compgen_transformer", ["--decoder-self-attn-pos", "xpos", "--xpos-scale-base", "1e-6"],
     "--xpos-scale-base 1e-06: too small for positions up to 1025: zeta^(n/B) leaves float32's range; expected at "
     "least 17"),
    ("compgen", "compgen_transformer", ["--self-attn-type", "linear", "--criterion",
                                        "label_smoothed_cross_entropy_with_orthogonality", "--orthogonality-lambda",
                                        "nan"],
     "--orthogonality-lambda nan: expected a finite weight >= 0 (the paper's 1e-4; 0 trains without the loss)"),
    ("compgen", "compgen_transformer", ["--eval-comp-subset", "gen"],
     "--eval-comp-subset gen names the subset that --eval-comp's metadata is for: expected --eval-comp FILE with it"),
    # chunks drew their own randomized positions, for their own lengths (an audit, 2026-11-29)
    ("compgen", "rel_uni_transformer", ["--batch-chunks", "4", "--random-positions", "64"],
     "--batch-chunks 4 with --random-positions 64: each chunk would draw its own positions for its own length, not "
     "the batch's: expected one of the two"),
])
def test_fairseq_train_with_a_task_criterion_or_value_that_cannot_work_is_one_line(task, arch, flags, expected,
                                                                                   scan_bin, tmp_path):
    """As fairseq-train builds them, in this process: task, model, criterion (tests/model_helpers.py); the CLI
    prints a UsageError as one line (the tests above)."""
    from model_helpers import build_task

    from fairseq_compgen.errors import UsageError

    with pytest.raises(UsageError) as e:
        build_task(scan_bin, arch, ["--save-dir", str(tmp_path / "s"), *flags], task=task)
    assert str(e.value) == expected


def test_cogs_tagging_with_another_criterion_or_arch_is_one_line(tmp_path):
    """fairseq's default criterion raised a bare NotImplementedError in the first step; a seq2seq arch a traceback."""
    import argparse

    import fairseq_compgen
    from fairseq_compgen.errors import UsageError
    from fairseq_compgen.tasks.checkpoint_guard import model_name
    from fairseq_compgen.tasks.cogs_tagging import CogsTaggingTask

    fairseq_compgen.register()
    task = CogsTaggingTask.__new__(CogsTaggingTask)
    with pytest.raises(UsageError, match=r"^--task cogs_tagging trains with --criterion cogs_tagging, got --criterion "
                                         r"cross_entropy$"):
        task.build_criterion(argparse.Namespace(_name="cross_entropy"))
    cfg = argparse.Namespace(arch="rel_uni_transformer_scan")
    assert model_name(cfg) == "compgen_transformer"
    with pytest.raises(UsageError, match=r"^--task cogs_tagging trains a tagger: expected --arch compgen_tagger \(or "
                                         r"one of its presets, ontanon_tagging_\*\), got --arch rel_uni_transformer_scan$"):
        task.build_model(cfg)


def test_decoder_flags_given_to_the_encoder_only_tagger_are_refused(tmp_path):
    """compgen_tagger took --decoder-layers 3 and the other decoder flags without a word (an audit, 2026-11-28);
    its encoder flags stay accepted."""
    from fairseq_compgen.errors import UsageError
    from fairseq_compgen.pipelines.train import check_fairseq_options

    tagger = [str(tmp_path), "--arch", "compgen_tagger", "--task", "cogs_tagging", "--criterion", "cogs_tagging"]
    check_fairseq_options(tagger + ["--encoder-layers", "3"])
    for flag, value in (("--decoder-layers", "3"), ("--cross-attn-pos", "rel-b"), ("--copy-decoder", "True")):
        with pytest.raises(UsageError, match=rf"^{flag} changes nothing with --arch compgen_tagger: compgen_tagger "
                                             r"has no decoder \(it tags with the encoder alone\)$"):
            check_fairseq_options(tagger + [flag, value])


def test_fairseq_train_refuses_a_flag_its_arch_ignores_where_the_command_line_gives_it(scan_bin, tmp_path,
                                                                                      monkeypatch):
    """Plain fairseq-train (not only fairseq-compgen train) refuses --attention-dropout with linear attention when
    its command line (sys.argv) gives it; the preset's own default of the same flag is no reason to refuse."""
    from model_helpers import build_task

    from fairseq_compgen.errors import UsageError

    linear = ["--save-dir", str(tmp_path / "s"), "--self-attn-type", "linear"]
    monkeypatch.setattr(sys, "argv", ["fairseq-train", str(scan_bin), "--arch", "compgen_transformer", *linear])
    build_task(scan_bin, "compgen_transformer", linear)  # not given: trains
    given = linear + ["--attention-dropout", "0.2"]
    monkeypatch.setattr(sys, "argv", ["fairseq-train", str(scan_bin), "--arch", "compgen_transformer", *given])
    with pytest.raises(UsageError) as e:
        build_task(scan_bin, "compgen_transformer", given)
    assert str(e.value) == ("--attention-dropout changes nothing with --arch compgen_transformer: linear attention "
                            "(self and cross) forms no attention weights to drop")


def test_generate_print_alignment_is_one_line(run, scan_bin, tmp_path):
    """fairseq-generate --print-alignment failed on our models' attn=[None] with a traceback (an audit, 2026-11-28)."""
    p = subprocess.run([sys.executable, "-m", "fairseq_cli.generate", str(scan_bin), "--user-dir",
                        str(REPO / "fairseq_compgen"), "--task", "compgen", "--path", str(run / "checkpoint_last.pt"),
                        "--gen-subset", "gen", "--cpu", "--print-alignment"],
                       cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300)
    assert one_line(p) == ("fairseq_compgen: error: --print-alignment hard: this task's models return no attention "
                           "weights to align with; leave it out")


def test_a_sweeps_generate_flags_typo_is_refused_before_any_run(scan_bin, tmp_path):
    """generate_flags were not checked: a typo passed the dry run, the runs trained, their evaluation failed
    ("evaluation exited with 2"), and after the fix the trained runs were refused as made with other settings (the
    sweep audit of 2026-11-29). Now fairseq-generate's parser reads them first; good ones pass."""
    for flags, expected in (("--beamx 5", "fairseq-generate: unrecognized arguments: --beamx 5"),
                            ("--beam five", "fairseq-generate: argument --beam: invalid int value: 'five'"),
                            ("--beam 5 --beam-stop bound --cpu", None)):
        path = tmp_path / "s.yaml"
        path.write_text(f"""name: s
seeds: [1]
generate_flags: "{flags}"
datasets:
  scan: {{data: {scan_bin}, recipe: csordas/scan, subsets: [valid]}}
configurations:
  tiny: {{arch: rel_uni_transformer, flags: [{", ".join([*TINY, "--max-update", "2"])}]}}
""")
        p = compgen("sweep", path, "--cpu", "--out", tmp_path / "out", "--dry-run")
        if expected is None:
            assert p.returncode == 0, p.stdout + p.stderr
        else:
            assert one_line(p) == (f"fairseq_compgen: error: {path}: configuration 'tiny' on dataset 'scan': "
                                   f"generate_flags '{flags}': {expected}")
        assert not (tmp_path / "out").exists()


def test_a_sweeps_flag_typo_is_refused_before_any_run_and_a_failed_run_says_why(scan_bin, tmp_path):
    """A typo in a sweep file's flags failed each run as it started ("training exited with 1; see train.log", the
    reason only in the log): on Slurm, after the queue; locally, maybe hours into the sweep. Now the sweep checks each
    configuration with fairseq-train's parser first, dry run included. A run that fails when it starts (here: its
    examples are longer than its positions) says why on its FAILED line."""
    def sweep_file(flags):
        (tmp_path / "s.yaml").write_text(f"""name: s
seeds: [1]
datasets:
  scan: {{data: {scan_bin}, recipe: csordas/scan, subsets: [valid]}}
configurations:
  tiny: {{arch: rel_uni_transformer, flags: [{", ".join([*TINY, "--max-update", "2", *flags])}]}}
""")
        return tmp_path / "s.yaml"
    for dry_run in (["--dry-run"], []):
        last = one_line(compgen("sweep", sweep_file(["--self-atn-pos", "rope"]), "--cpu", "--out", tmp_path / "out",
                                *dry_run))
        assert last == (f"fairseq_compgen: error: {tmp_path / 's.yaml'}: configuration 'tiny' on dataset 'scan': "
                        f"fairseq-train: unrecognized arguments: --self-atn-pos rope")
        assert not (tmp_path / "out").exists()
    p = compgen("sweep", sweep_file(["--max-source-positions", "3"]), "--cpu", "--threads", "1", "--out", tmp_path / "out")
    assert p.returncode == 1, p.stdout + p.stderr
    failed = next(line for line in p.stdout.splitlines() if line.startswith("FAILED"))
    log = tmp_path / "out" / "scan" / "tiny" / "seed1" / "train.log"
    assert re.fullmatch(  # the example's size in plain numbers (it read "(np.int32(5), np.int32(4))")
        r"FAILED scan/tiny/seed1: training exited with 1: \d+ of \d+ train examples are longer than max positions "
        r"\(3, 1024\) \(e\.g\. example \d+, size \(\d+, \d+\)\): raise --max-source-positions / "
        r"--max-target-positions, or pass --allow-dropping-train-examples to drop them; see " + re.escape(str(log)),
        failed), failed


def test_trains_own_options_after_save_are_one_line(scan_bin, tmp_path):
    """`--recipe` after SAVE went to fairseq-train: the dry run said no batch size was given (as if no recipe), the
    run "unrecognized arguments: --recipe" (the walkthrough audit of 2026-11-29)."""
    for flags in (["--recipe", "csordas/scan", "--dry-run"], ["--nprocs=2", "--max-update", "2"]):
        last = one_line(compgen("train", "--cpu", "rel_uni_transformer_scan", scan_bin, tmp_path / "run", *flags))
        assert last == (f"fairseq_compgen: error: {flags[0]} comes after SAVE, where flags go to fairseq-train: put "
                        "fairseq-compgen train's own options (--gpus, --nprocs, --recipe, -r) before ARCH")
    assert not (tmp_path / "run").exists()


def test_no_batch_size_is_one_line(scan_bin, tmp_path):
    """Without a recipe and without --batch-size or --max-tokens, fairseq-train fails an assertion (a traceback)."""
    last = one_line(compgen("train", "--cpu", "rel_uni_transformer_scan", scan_bin, tmp_path / "run",
                            "--max-update", "2"))
    assert last == ("fairseq_compgen: error: no --batch-size or --max-tokens: fairseq-train needs one (a --recipe sets "
                    "it; fairseq-compgen recipes lists them)")
    assert not (tmp_path / "run").exists()


def test_sweep_only_matching_no_run_and_jobs_0_are_one_line(tmp_path):
    """A typo in --only ran nothing (or less than asked) with status 0; --jobs 0 ran one at a time."""
    last = one_line(compgen("sweep", "campaign/chaabouni_jump_columns.yaml", "--dry-run", "--only", "jump/*/seed1",
                            "--only", "jmup/*"))
    assert last == ("fairseq_compgen: error: --only jmup/*: no run of campaign/chaabouni_jump_columns.yaml matches it "
                    "(runs are named DATASET/CONFIG/seedK: e.g. jump/sag/seed1)")
    last = one_line(compgen("sweep", "campaign/chaabouni_jump_columns.yaml", "--dry-run", "--jobs", "0"))
    assert last == "fairseq_compgen: error: --jobs 0: expected positive numbers"  # the runner took it as 1


@pytest.mark.parametrize("dataset", ["scan", "russin"])
def test_prep_workers_below_1_is_one_line(dataset, tmp_path):
    """--workers 0 or -2 was taken as 1 in silence; both ways --workers is declared refuse it before any work."""
    first = ["--out", tmp_path / "out"] if dataset == "scan" else [tmp_path / "split"]
    for value in ("0", "-2", "two"):
        last = one_line(compgen("prep", dataset, *first, "--workers", value), rc=2,
                        prefix=f"fairseq-compgen prep {dataset}: error: ")
        assert last.endswith(f"argument --workers: expected a whole number of fairseq-preprocess workers, "
                             f"at least 1, not {value!r}")
    assert not (tmp_path / "out").exists()


def test_eval_batch_size_below_1_is_one_line(run, scan_bin, tmp_path):
    """fairseq-generate took --batch-size 0 and -4 without a word (found by hand, 2026-11-28)."""
    last = one_line(compgen("eval", run / "checkpoint_last.pt", scan_bin, "gen", "--cpu", "--batch-size", "0",
                            "--out", tmp_path / "ev"))
    assert last == "fairseq_compgen: error: --batch-size 0: expected a positive number"
    assert not (tmp_path / "ev").exists()


def test_eval_generate_flags_with_an_unpaired_quote_is_one_line(run, scan_bin, tmp_path):
    """A ValueError traceback from shlex, after the evaluation folder was made (found by an audit, 2026-11-28)."""
    last = one_line(compgen("eval", run / "checkpoint_last.pt", scan_bin, "gen", "--cpu", "--generate-flags",
                            "--beam '5", "--out", tmp_path / "ev"))
    assert last == ("fairseq_compgen: error: --generate-flags \"--beam '5\": no closing quotation: expected flags split "
                    "like a shell (quotes in pairs)")
    assert not (tmp_path / "ev").exists()


def test_a_run_folder_given_for_its_checkpoint_names_the_checkpoint(run, scan_bin, tmp_path):
    """`eval RUN DATA gen` said only "no checkpoint at RUN", with the checkpoint right inside (found by hand,
    2026-11-28); eval and plot t5-biases share the check (checkpoint_loading.checkpoint_file)."""
    expected = f"fairseq_compgen: error: {run} is a folder: expected a checkpoint file, e.g. {run / 'checkpoint_last.pt'}"
    assert one_line(compgen("eval", run, scan_bin, "gen", "--cpu", "--out", tmp_path / "ev")) == expected
    assert one_line(compgen("plot", "t5-biases", run, "-o", tmp_path / "b.png")) == expected
    assert one_line(compgen("eval", tmp_path, scan_bin, "gen", "--cpu")) == (
        f"fairseq_compgen: error: {tmp_path} is a folder: expected a checkpoint file (.pt)")
    assert not (tmp_path / "ev").exists()


def test_eval_on_a_folder_with_no_data_says_so(run, tmp_path):
    """A DATA folder with no subset at all printed "(it has: )" (found by hand, 2026-11-28)."""
    (tmp_path / "notdata").mkdir()
    assert one_line(compgen("eval", run / "checkpoint_last.pt", tmp_path / "notdata", "gen", "--cpu")) == (
        f"fairseq_compgen: error: no binarized subset 'gen' in {tmp_path / 'notdata'} (it has none: expected a data "
        f"folder made by fairseq-compgen prep)")


@pytest.mark.parametrize("case", ["unknown subset", "comp without metadata"])
def test_eval_checks_every_subset_before_decoding(case, run, scan_bin, tmp_path):
    """A wrong subset (or a missing SUBSET.comp) after a good one used to be found only after the good one was
    decoded and its result written."""
    subsets, metric = (["gen", "tset"], []) if case == "unknown subset" else (["gen"], ["--metric", "comp"])
    last = one_line(compgen("eval", run / "checkpoint_last.pt", scan_bin, *subsets, *metric, "--cpu",
                            "--out", tmp_path / "ev"))
    assert last == (f"fairseq_compgen: error: no binarized subset 'tset' in {scan_bin} (it has: valid, gen)"
                    if case == "unknown subset" else
                    f"fairseq_compgen: error: {scan_bin / 'gen.comp'}: COMP needs the subset's metadata "
                    f"(fairseq-compgen prep noun_adj writes it)")
    assert not (tmp_path / "ev").exists()


def test_a_second_training_in_the_same_folder_is_refused(scan_bin, tmp_path):
    """Two `fairseq-compgen train` in one SAVE used to train side by side, each writing its checkpoints over the
    other's; the second is refused (the sweep's own trainer, given the sweep's lock, is not: test_pipelines)."""
    save = tmp_path / "run"
    cmd = [*TRAIN, scan_bin, save, *TINY, "--max-update", "100000", "--disable-validation"]
    p = subprocess.Popen([str(c) for c in cmd], cwd=REPO, env=_env(PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=_sigint_default)
    try:
        for line in p.stdout:
            if "Start iterating over samples" in line:
                break
        second = compgen(*TRAIN[3:], scan_bin, save, *TINY, "--max-update", "5")
        command = (save / "command.txt").read_text()
    finally:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
    last = one_line(second)
    assert last == (f"fairseq_compgen: error: {save} is in use by another training or sweep (it holds "
                    f"{save / '.lock'}): expected one writer per run folder; wait for it to end or stop it, or choose "
                    f"another SAVE")
    # (fairseq's prefetching daemon thread, caught inside a torch call while Python finalized, made this SIGABRT (-6)
    # about once in six Ctrl-Cs on a loaded machine; the command now exits before finalizing: cli.py)
    assert "--max-update 100000" in command and p.returncode == 130, f"rc {p.returncode}: {err[-2000:]}"


def test_aggregate_keeps_the_last_tables_when_writing_fails(tmp_path, monkeypatch):
    """The tables were written in place: a failure (or Ctrl-C) while writing table.csv left a truncated table
    where the last complete one was. Now each is written under a temporary name and renamed when whole."""
    from fairseq_compgen.pipelines import aggregate, tables

    out = tmp_path / "out"
    _sweep_out(out)
    assert aggregate.main([str(out), "--no-plots"]) == 0
    before = (out / "table.csv").read_text()
    assert "0.75" in before

    def broken(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(tables, "verdict", broken)  # called while table.csv's first row is written
    with pytest.raises(KeyboardInterrupt):
        aggregate.main([str(out), "--no-plots"])
    assert (out / "table.csv").read_text() == before
    assert sorted(p.name for p in out.iterdir()) == ["runs.csv", "runs.md", "scan", "sweep.json", "table.csv",
                                                     "table.md"]


def test_help_of_an_unknown_arch():
    """It printed its own line without the `fairseq_compgen: error:` every other misuse starts with."""
    last = one_line(compgen("help", "rel_uni_transformer_sacn"))
    assert last == ("fairseq_compgen: error: fairseq-compgen help: unknown architecture 'rel_uni_transformer_sacn': "
                    "expected a registered one (fairseq-compgen help lists them)")


@pytest.mark.parametrize("code", ["ENOSPC", "EDQUOT", "EFBIG"])
def test_a_full_disk_or_a_file_size_limit_is_one_line_naming_the_file(code):
    """EFBIG (a file over the file system's or ulimit's size limit) kept its traceback (found by an audit,
    2026-11-28); ENOSPC and EDQUOT did not."""
    import errno

    from fairseq_compgen.errors import _path_error_line

    line = _path_error_line(OSError(getattr(errno, code), os.strerror(getattr(errno, code)), "/out/run/train.log"))
    assert line.startswith(f"/out/run/train.log: {os.strerror(getattr(errno, code))} (") and "expected room" in line


def test_the_main_job_refuses_an_argument_it_would_ignore_before_setting_up():
    """scripts/main.sh takes MAIN_* variables, and fairseq-train flags for both models only after `--`: a flag given
    without `--` (as `bash scripts/main.sh --random-batches`) once ran the default job and said nothing."""
    p = subprocess.run(["bash", "scripts/main.sh", "--random-batches"], cwd=REPO, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and p.stdout == "", p.stdout + p.stderr
    assert p.stderr.splitlines() == ["main: unexpected argument '--random-batches': expected none, or -- and "
                                     "fairseq-train flags for both models (e.g. -- --random-batches); settings are "
                                     "MAIN_* variables (this script's header)"]


def test_half_precision_weights_on_cpu_or_under_autocast_are_refused_in_one_line(scan_bin):
    """--bf16 / --fp16 with --cpu, and with --autocast-bf16, ended in fairseq tracebacks after the run folder was
    written (TPU lookup, CUDA assertion; the walkthrough audit of 2026-11-29); now refused before anything is."""
    from fairseq_compgen.errors import UsageError
    from fairseq_compgen.pipelines.train import check_fairseq_options

    base = [str(scan_bin), "--task", "compgen", "--arch", "rel_uni_transformer_scan", "--optimizer", "adam"]
    for flags, expected in (
            (["--bf16", "--cpu"], "--bf16 with --cpu: fairseq's half-precision training needs a GPU; on CPU, "
                                  "--autocast-bf16 trains with bf16 autocast and float32 weights"),
            (["--fp16", "--cpu"], "--fp16 with --cpu"),
            (["--autocast-bf16", "--bf16"], "--autocast-bf16 needs float32 weights: leave out --bf16"),
            (["--autocast-bf16", "--memory-efficient-fp16", "--cpu"],
             "--autocast-bf16 needs float32 weights: leave out --fp16 / --memory-efficient-fp16")):  # fairseq sets both
        with pytest.raises(UsageError, match=re.escape(expected)):
            check_fairseq_options(base + flags)
    check_fairseq_options(base + ["--autocast-bf16", "--cpu"])  # CPU mixed precision: fine
