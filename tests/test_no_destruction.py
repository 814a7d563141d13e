"""Issue 23: nothing the user made is destroyed without being asked. A prep rerun replaces only what prep
writes (not `fairseq-compgen prep russin`'s russin/ or a file of the user) and refuses a plain file where its
folder goes; an evaluation of another checkpoint does not replace the results aggregate reads, and says which
checkpoint it scored."""
import hashlib
import json
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
    with staged_files(d) as stage:
        (stage / "a.txt").write_text("old a\n")
    (d / "bin").write_text("the user's file named bin\n")
    with pytest.raises(UsageError, match=r"x/bin is a file, but the output needs a folder there \(for bin/dict\.txt\)"):
        with staged_files(d) as stage:
            (stage / "a.txt").write_text("new a\n")
            (stage / "bin").mkdir()
            (stage / "bin" / "dict.txt").write_text("new\n")
    assert (d / "a.txt").read_text() == "old a\n" and (d / "bin").read_text() == "the user's file named bin\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x"]
