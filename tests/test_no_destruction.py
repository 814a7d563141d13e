"""Nothing the user made is destroyed without being asked. A prep rerun replaces only what prep
writes (not `fairseq-compgen prep russin`'s russin/ or a file of the user) and refuses a plain file where its
folder goes; an evaluation of another checkpoint does not replace the results aggregate reads, and says which
checkpoint it scored."""
import hashlib
import json
import os
from pathlib import Path

import pytest

from fairseq_compgen.data.io import MANIFEST, staged_files
from fairseq_compgen.errors import UsageError
from fairseq_compgen.prep import module as prep_module


def _algorithmic(out, *extra):
    return prep_module("algorithmic").main(
        ["--out", str(out), "--tasks", "reverse", "--train-size", "40", "--test-size", "8", *extra])


def _digest(folder, skip=()):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(folder).rglob("*")) if p.is_file() and p.name not in skip}


# ------------------------------------------------------------------------------------------------------ prep
def test_a_prep_rerun_keeps_what_prep_did_not_write(tmp_path):
    out = tmp_path / "alg"
    _algorithmic(out, "--seed", "0")
    d = out / "reverse"
    ours = _digest(d, skip=("preprocess.log",))
    assert "bin/dict.src.txt" in ours and "train.src" in ours
    mine = {"russin/train.src": "jump\n", "russin/bin/dict.src.txt": "jump 1\n", "notes.txt": "my notes\n",
            "bin/mine.txt": "a file of the user inside bin/\n"}
    for rel, text in mine.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)
    _algorithmic(out, "--seed", "1")  # the rerun used to replace the whole folder: russin/ and notes.txt gone
    assert {rel: (d / rel).read_text() for rel in mine} == mine
    assert _digest(d, skip=("preprocess.log",)).keys() == ours.keys() | mine.keys() | {MANIFEST}
    assert (d / "train.src").read_text() != "" and _digest(d)["train.src"] != ours["train.src"]  # new data
    assert sorted(p.name for p in out.iterdir()) == ["reverse"], "no staging or old folder may be left"
    # a rerun without binaries removes prep's own stale binaries, and nothing else
    _algorithmic(out, "--seed", "1", "--no-binarize")
    assert not (d / "bin" / "dict.src.txt").exists() and not list((d / "bin").glob("*.idx"))
    assert {rel: (d / rel).read_text() for rel in mine} == mine
    assert sorted(p.name for p in out.iterdir()) == ["reverse"]


def test_prep_refuses_a_plain_file_where_its_folder_goes(tmp_path):
    out = tmp_path / "alg"
    out.mkdir()
    (out / "reverse").write_text("not a folder\n")
    with pytest.raises(UsageError, match=r"alg/reverse is a file, not a folder: expected a folder"):
        _algorithmic(out)
    assert (out / "reverse").read_text() == "not a folder\n"
    assert sorted(p.name for p in out.iterdir()) == ["reverse"], "nothing moved aside, no staging left"


def test_staged_files_puts_everything_back_when_a_rename_fails(tmp_path):
    """A file of the user where the output needs a folder is refused before anything is moved; the old outputs
    stay as they were."""
    d = tmp_path / "x"
    with staged_files(d, "test") as stage:
        (stage / "a.txt").write_text("old a\n")
    (d / "bin").write_text("the user's file named bin\n")
    with pytest.raises(UsageError, match=r"x/bin is a file, but the output needs a folder there \(for bin/dict\.txt\)"):
        with staged_files(d, "test") as stage:
            (stage / "a.txt").write_text("new a\n")
            (stage / "bin").mkdir()
            (stage / "bin" / "dict.txt").write_text("new\n")
    assert (d / "a.txt").read_text() == "old a\n" and (d / "bin").read_text() == "the user's file named bin\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x"]


# ------------------------------------------------------------------------------------------------------ eval
def test_eval_records_wall_and_cpu_seconds_apart(scan_bin, tmp_path, monkeypatch):
    """An evaluation's `seconds` are wall-clock and count a time the process did not run (a campaign lane stopped
    by SIGSTOP while it decoded); `cpu_seconds` do not: a decoding that waits 0.5 s records 0.5 s or more, and less
    CPU time."""
    import time

    from fairseq_compgen.pipelines import evaluate

    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint_last.pt").write_bytes(b"last")
    fake = _fake_generate(right=True)

    def waiting(*args):
        time.sleep(0.5)
        return fake(*args)
    without_model(monkeypatch, evaluate, waiting)
    evaluate.evaluate(run / "checkpoint_last.pt", scan_bin, ["gen"], cpu=True, echo=lambda s: None)
    where = json.loads((run / "eval" / "gen.json").read_text())["evaluated"]
    assert where["seconds"] >= 0.5 and where["cpu_seconds"] < where["seconds"] - 0.3, where


def without_model(monkeypatch, evaluate, generate):
    """eval with no model: the checkpoint's stand-in bytes pass its check, and `generate` stands for
    fairseq-generate."""
    monkeypatch.setattr(evaluate, "check_checkpoint", lambda ckpt: None)
    monkeypatch.setattr(evaluate, "generate_seq2seq", generate)


def _fake_generate(right: bool = True, fail: bool = False):
    """fairseq-generate's output for `subset` without a model: each reference as the hypothesis (or a wrong one);
    `fail`: half the output written, then an error (a crash while decoding)."""
    def generate(ckpt, data, subset, maxlen, cpu, batch_size, extra, out):
        tgt = (Path(data).parent / f"{subset}.tgt").read_text().splitlines()
        with open(out, "w") as f:
            for i, t in enumerate(tgt):
                f.write(f"T-{i}\t{t}\nH-{i}\t-0.1\t{t if right else 'I_WALK'}\n")
                if fail and i == len(tgt) // 2:
                    f.flush()
                    raise RuntimeError("decoding crashed")
    return generate


def test_eval_records_its_checkpoint_and_keeps_another_checkpoints_results(scan_bin, tmp_path, monkeypatch):
    from fairseq_compgen.pipelines import evaluate

    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint_last.pt").write_bytes(b"last")
    (run / "checkpoint_best.pt").write_bytes(b"best")
    sha = {name: hashlib.sha256(name.encode()).hexdigest() for name in ("last", "best")}
    without_model(monkeypatch, evaluate, _fake_generate(right=True))
    evaluate.evaluate(run / "checkpoint_last.pt", scan_bin, ["gen"], cpu=True, echo=lambda s: None)
    last = json.loads((run / "eval" / "gen.json").read_text())
    assert last["accuracy"] == 1.0 and last["checkpoint"] == "checkpoint_last.pt"
    assert last["checkpoint_sha256"] == sha["last"]
    # where it was evaluated: a run trained on a lent GPU may be evaluated on another machine
    where = last["evaluated"]
    assert where["machine"]["cores"] == os.cpu_count() and where["machine"]["gpu"] is None and where["seconds"] >= 0
    assert where["cpu_seconds"] >= 0
    # another checkpoint used to overwrite eval/gen.json, which the sweep and aggregate read
    without_model(monkeypatch, evaluate, _fake_generate(right=False))
    evaluate.evaluate(run / "checkpoint_best.pt", scan_bin, ["gen"], echo=lambda s: None)
    assert json.loads((run / "eval" / "gen.json").read_text()) == last
    best = json.loads((run / "eval" / "checkpoint_best" / "gen.json").read_text())
    assert best["accuracy"] == 0.0 and (best["checkpoint"], best["checkpoint_sha256"]) == ("checkpoint_best.pt",
                                                                                          sha["best"])
    # into the default checkpoint's folder on purpose: refused before decoding unless --overwrite
    with pytest.raises(UsageError, match=r"eval/gen\.json holds the result of checkpoint_last\.pt \(sha256 "
                                         rf"{sha['last'][:12]}\), not of .*checkpoint_best\.pt .*--overwrite"):
        evaluate.main([str(run / "checkpoint_best.pt"), str(scan_bin), "gen", "--out", str(run / "eval")])
    assert json.loads((run / "eval" / "gen.json").read_text()) == last
    evaluate.main([str(run / "checkpoint_best.pt"), str(scan_bin), "gen", "--out", str(run / "eval"), "--overwrite"])
    assert json.loads((run / "eval" / "gen.json").read_text())["checkpoint"] == "checkpoint_best.pt"
    # a file of the same bytes under another name (a copy, or a last checkpoint that is also the best): said so, not
    # as two equal hashes
    (run / "checkpoint_copy.pt").write_bytes(b"best")
    with pytest.raises(UsageError, match=r"eval/gen\.json holds the result of checkpoint_best\.pt, a file with the "
                                         rf"same bytes as .*checkpoint_copy\.pt \(sha256 {sha['best'][:12]}\) and this "
                                         r"result's under its own name: pass --overwrite"):
        evaluate.main([str(run / "checkpoint_copy.pt"), str(scan_bin), "gen", "--out", str(run / "eval")])
    # the same checkpoint again needs no --overwrite
    evaluate.evaluate(run / "checkpoint_best.pt", scan_bin, ["gen"], echo=lambda s: None)


def test_eval_keeps_a_result_of_the_same_checkpoint_made_with_other_flags_or_metric(scan_bin, tmp_path,
                                                                                     monkeypatch):
    """An earlier eval of the same checkpoint by another --metric or with other --generate-flags is not replaced
    in silence (it used to be: a beam's or BLEU's result over the greedy exact match); the same flags again are
    (a rerun); a JSON from before the "metric" field is judged by its scorer's key."""
    from fairseq_compgen.pipelines import evaluate

    ckpt = tmp_path / "checkpoint_last.pt"
    ckpt.write_bytes(b"last")
    without_model(monkeypatch, evaluate, _fake_generate(right=True))
    gen = tmp_path / "eval" / "gen.json"
    evaluate.main([str(ckpt), str(scan_bin), "gen", "--generate-flags", "--beam 1"])
    first = json.loads(gen.read_text())
    assert (first["metric"], first["generate_flags"]) == ("exact_match", "--beam 1")
    with pytest.raises(UsageError, match=r"eval/gen\.json holds this checkpoint's result decoded with "
                                         r"--generate-flags '--beam 1', not '--beam 3': .*--overwrite"):
        evaluate.main([str(ckpt), str(scan_bin), "gen", "--generate-flags", "--beam 3"])
    with pytest.raises(UsageError, match=r"eval/gen\.json holds this checkpoint's result by --metric exact_match, "
                                         r"not bleu: .*--overwrite"):
        evaluate.main([str(ckpt), str(scan_bin), "gen", "--generate-flags", "--beam 1", "--metric", "bleu"])
    assert json.loads(gen.read_text())["generate_flags"] == "--beam 1"
    evaluate.main([str(ckpt), str(scan_bin), "gen", "--generate-flags", "--beam  1"])  # the same flags: replaced
    legacy = {k: v for k, v in first.items() if k != "metric"}
    gen.write_text(json.dumps(legacy))
    with pytest.raises(UsageError, match=r"by --metric exact_match, not bleu"):
        evaluate.main([str(ckpt), str(scan_bin), "gen", "--generate-flags", "--beam 1", "--metric", "bleu"])
    evaluate.main([str(ckpt), str(scan_bin), "gen", "--generate-flags", "--beam 3", "--overwrite"])
    assert json.loads(gen.read_text())["generate_flags"] == "--beam 3"


def test_eval_removes_what_a_killed_evaluation_left_under_temporary_names(scan_bin, tmp_path, monkeypatch):
    """SIGKILL skips every cleanup: its SUBSET.*.tmp-PID files stayed for good (helper audit, 2026-11-29). The next
    evaluation into the folder removes those of processes no longer running, and leaves a live one's alone."""
    import subprocess
    import sys

    from fairseq_compgen.pipelines import evaluate

    ckpt = tmp_path / "checkpoint_last.pt"
    ckpt.write_bytes(b"last")
    without_model(monkeypatch, evaluate, _fake_generate(right=True))
    (tmp_path / "eval").mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()  # a process that has ended
    left = [tmp_path / "eval" / f"gen{ext}.tmp-{dead}" for ext in (".json", ".generate.txt", ".outputs.gz")]
    live = tmp_path / "eval" / f"gen.json.tmp-{os.getppid()}"  # a running process's (pytest's parent)
    for f in (*left, live):
        f.write_text("half")
    evaluate.evaluate(ckpt, scan_bin, ["gen"], cpu=True, echo=lambda s: None)
    assert not any(f.exists() for f in left) and live.exists()


def test_a_failed_evaluation_leaves_no_temporary_file(scan_bin, tmp_path, monkeypatch):
    from fairseq_compgen.pipelines import evaluate

    (tmp_path / "checkpoint_last.pt").write_bytes(b"last")
    without_model(monkeypatch, evaluate, _fake_generate(fail=True))
    with pytest.raises(RuntimeError, match="decoding crashed"):
        evaluate.evaluate(tmp_path / "checkpoint_last.pt", scan_bin, ["gen"], echo=lambda s: None)
    assert not (tmp_path / "eval").exists()  # nothing, not even the folder it made
    # a folder that was there before stays, and so does what it held
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "notes.txt").write_text("the user's\n")
    with pytest.raises(RuntimeError, match="decoding crashed"):
        evaluate.evaluate(tmp_path / "checkpoint_last.pt", scan_bin, ["gen"], echo=lambda s: None)
    assert sorted(p.name for p in (tmp_path / "eval").iterdir()) == ["notes.txt"]
    (tmp_path / "eval" / "notes.txt").unlink()
    with pytest.raises(RuntimeError, match="decoding crashed"):  # an empty folder the user made is not ours
        evaluate.evaluate(tmp_path / "checkpoint_last.pt", scan_bin, ["gen"], echo=lambda s: None)
    assert (tmp_path / "eval").is_dir()


def test_staged_files_of_an_empty_stage_into_a_new_folder(tmp_path):
    with staged_files(tmp_path / "new", "test") as stage:
        assert stage.is_dir()
    assert json.loads((tmp_path / "new" / MANIFEST).read_text()) == {"by": {"test": []}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new"]


def test_a_manifest_of_an_earlier_version_names_no_writer(tmp_path):
    """Its files are replaced when rewritten and kept otherwise (whose stale outputs they are is unknown)."""
    d = tmp_path / "x"
    d.mkdir()
    (d / "a.txt").write_text("old a\n")
    (d / "b.txt").write_text("old b\n")
    (d / MANIFEST).write_text(json.dumps({"files": ["a.txt", "b.txt"]}))
    with staged_files(d, "prep test") as stage:
        (stage / "a.txt").write_text("new a\n")
    assert (d / "a.txt").read_text() == "new a\n" and (d / "b.txt").read_text() == "old b\n"
    assert json.loads((d / MANIFEST).read_text()) == {"by": {"prep test": ["a.txt"]}}
    (d / MANIFEST).write_text(json.dumps({"by": ["a.txt"]}))
    with pytest.raises(UsageError, match=r"x/\.prep-files\.json: expected the JSON object of the files each prep "
                                         r"wrote"):
        with staged_files(d, "prep test") as stage:
            (stage / "a.txt").write_text("newer a\n")
    assert (d / "a.txt").read_text() == "new a\n"


def test_a_file_no_prep_wrote_is_never_replaced(tmp_path):
    """A user's file (or a link) of the name an output takes, in a folder without a manifest or beside one that does
    not list it, is refused before anything is moved; once moved away, the prep writes."""
    d = tmp_path / "x"
    d.mkdir()
    (d / "train.src").write_text("the user's own data\n")
    (d / "notes.txt").write_text("kept\n")
    with pytest.raises(UsageError, match=r"x/train\.src is not a file that a prep wrote \(.*x/\.prep-files\.json does "
                                         r"not list it\); `prep test` would replace it: move it away"):
        with staged_files(d, "prep test") as stage:
            (stage / "train.src").write_text("new\n")
            (stage / "train.tgt").write_text("new\n")
    assert sorted(p.name for p in d.iterdir()) == ["notes.txt", "train.src"]
    assert (d / "train.src").read_text() == "the user's own data\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x"], "no staging or old folder left"
    (d / "train.src").rename(d / "mine.src")
    with staged_files(d, "prep test") as stage:
        (stage / "train.src").write_text("new\n")
    with staged_files(d, "prep test") as stage:  # its own file now: rewritten
        (stage / "train.src").write_text("newer\n")
    assert (d / "train.src").read_text() == "newer\n" and (d / "mine.src").read_text() == "the user's own data\n"
    (d / "bin").mkdir()
    (d / "bin" / "dict.txt").symlink_to(d / "mine.src")  # a link is the user's too, even to a file of theirs
    (d / "a.txt").write_text("another\n")
    with pytest.raises(UsageError, match=r"x/a\.txt \(and 1 more\) is not a file that a prep wrote"):
        with staged_files(d, "prep test") as stage:
            (stage / "a.txt").write_text("new\n")
            (stage / "bin").mkdir()
            (stage / "bin" / "dict.txt").write_text("new\n")
    assert (d / "bin" / "dict.txt").is_symlink() and (d / "a.txt").read_text() == "another\n"


def test_train_keeps_a_record_file_it_did_not_write(scan_bin, tmp_path):
    """SAVE with no checkpoint: record() rewrites command.txt, data.json, ... (a failed start's records give way
    to the next start's), so a file of that name that no call wrote (its *.history does not hold it) is refused
    before anything is written (it was replaced: helper audit, 2026-11-29)."""
    from fairseq_compgen.pipelines import train

    save = tmp_path / "run"
    save.mkdir()
    (save / "data.json").write_text('{"my": "precious"}\n')
    with pytest.raises(UsageError, match=r"run/data\.json was not written by fairseq-compgen train \(data\.history "
                                         r"does not record it\), .*choose another SAVE"):
        train.main(["--cpu", "rel_uni_transformer_scan", str(scan_bin), str(save), "--max-update", "1",
                    "--batch-size", "8"])
    assert sorted(p.name for p in save.iterdir()) == ["data.json"]
    assert (save / "data.json").read_text() == '{"my": "precious"}\n'
    # records an earlier call wrote (a start that failed before its first checkpoint) are its own to replace
    other = tmp_path / "other"
    train.record(other, "command.txt", "fairseq-train a")
    train.record(other, "command.txt", "fairseq-train b")
    train.check_records_are_ours(other)
    (other / "command.txt").write_text("my notes\n")
    with pytest.raises(UsageError, match="command.txt was not written"):
        train.check_records_are_ours(other)


def test_prep_into_the_current_folder_and_a_byte_order_mark(tmp_path, monkeypatch):
    """`--out .` was a ValueError traceback ("PosixPath('.') has an empty name": the staging folder is named after
    the output's; `prep cogs_tagging --out .`); a UTF-8 byte-order mark at a file's start became part of its first
    word, a dictionary entry of its own (helper audit, 2026-11-29): it is read as the encoding mark it is."""
    from fairseq_compgen.data.io import decode_utf8, staged_dir

    assert decode_utf8("f", b"\xef\xbb\xbfjump\tI_JUMP\n") == "jump\tI_JUMP\n"
    with pytest.raises(Exception, match=r"f:2: .*UTF-8"):
        decode_utf8("f", b"\xef\xbb\xbfok\nbad \xff\n")
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    for out in (".", "./"):
        with staged_files(Path(out), "test") as stage:
            (stage / "train.src").write_text(f"written into {out}\n")
        assert (here / "train.src").read_text() == f"written into {out}\n"
    monkeypatch.chdir(tmp_path)
    with staged_dir(Path("here/")) as stage:
        (stage / "x").write_text("x\n")
    assert sorted(os.listdir(here)) == ["x"]
    assert not [n for n in os.listdir(tmp_path) if ".tmp-" in n or ".old-" in n]
