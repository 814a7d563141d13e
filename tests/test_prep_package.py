"""`fairseq-compgen prep DATASET ...` (fairseq_compgen/prep/, the datasets of fairseq_compgen/data/): the dataset listing,
unknown names, each dataset's parser, and the Russin et al. held-out split (fairseq_compgen/data/russin.py) on a tiny
synthetic SCAN split."""
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from fairseq_compgen import prep
from fairseq_compgen.data.io import DataError
from fairseq_compgen.errors import MissingFileError, UsageError
from fairseq_compgen.data import russin

REPO = Path(__file__).resolve().parents[1]


DATASETS = ("scan", "cogs", "cogs_tagging", "cfq", "pcfg", "mathematics", "algorithmic", "noun_adj", "iwslt14",
            "flores", "russin", "slog")


def test_every_dataset_is_one_module_of_data():
    """Each dataset is one file, fairseq_compgen/data/<name>.py declaring DATASET; prep/ holds only the registry."""
    assert sorted(prep.names()) == sorted(DATASETS)
    assert {n: p.resolve() for n, p in prep.one_file_datasets().items()} == {
        n: (REPO / "fairseq_compgen" / "data" / f"{n}.py").resolve() for n in DATASETS}
    assert [p.name for p in (REPO / "fairseq_compgen" / "prep").glob("*.py")] == ["__init__.py"]


def test_listing_names_every_dataset_without_importing_fairseq_or_torch():
    code = ("import json, sys\nfrom fairseq_compgen import prep\nrc = prep.main(['--help'])\n"
            "print(json.dumps([rc, sorted(m for m in sys.modules if m.split('.')[0] in ('fairseq', 'torch'))]))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0, p.stderr
    *listing, last = p.stdout.splitlines()
    assert json.loads(last) == [0, []], "listing the datasets imported fairseq/torch"
    text = "\n".join(listing)
    for name in DATASETS:
        line = next((l for l in listing if l.split()[:1] == [name]), None)
        assert line is not None, f"{name} missing from:\n{text}"
        assert prep.description(name).split()[:3] == line.split()[1:4]  # its docstring's summary beside it
    assert "Prepare SCAN splits as fairseq text and binary data." in text
    assert prep.main([]) == 0


def test_unknown_dataset_is_one_usage_error_naming_the_known_ones():
    with pytest.raises(UsageError) as e:
        prep.main(["scna", "--out", "x"])
    msg = str(e.value)
    assert "\n" not in msg and "'scna'" in msg
    assert all(name in msg for name in DATASETS)
    with pytest.raises(UsageError):
        prep.module("__init__")


@pytest.mark.parametrize("name", ["scan", "cogs", "russin", "algorithmic"])
def test_each_dataset_parser_is_named_compgen_prep(name, capsys):
    with pytest.raises(SystemExit) as e:
        prep.main([name, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: fairseq-compgen prep {name} ") and prep.description(name)[:30] in " ".join(out.split())


# ---- russin -------------------------------------------------------------------------------------------------


def _split(folder: Path, n_train: int = 10) -> Path:
    """A tiny SCAN-like split: train/test text and the split's dictionaries (fairseq's 'word count' lines)."""
    (folder / "bin").mkdir(parents=True)
    src = [f"jump w{i}" for i in range(n_train)]
    tgt = [f"JUMP W{i}" for i in range(n_train)]
    (folder / "train.src").write_text("".join(s + "\n" for s in src))
    (folder / "train.tgt").write_text("".join(t + "\n" for t in tgt))
    (folder / "test.src").write_text("jump w1 w2\njump\n")
    (folder / "test.tgt").write_text("JUMP W1 W2\nJUMP\n")
    (folder / "bin" / "dict.src.txt").write_text("".join(f"{w} 1\n" for w in ["jump"] + [f"w{i}" for i in range(n_train)]))
    (folder / "bin" / "dict.tgt.txt").write_text("".join(f"{w} 1\n" for w in ["JUMP"] + [f"W{i}" for i in range(n_train)]))
    return folder


def _lines(path):
    return path.read_text().splitlines()


def test_russin_split_80_20_seeded_test_copied_and_binarized(tmp_path, capsys):
    split = _split(tmp_path / "addprim_jump")
    data = russin.ensure(split)
    assert data == split / "russin" / "bin"
    out = split / "russin"
    order = list(range(10))
    random.Random(0).shuffle(order)  # the authors' split: last 20% of a seed-0 shuffle, cut at int(0.8 n)
    src, tgt = _lines(split / "train.src"), _lines(split / "train.tgt")
    assert _lines(out / "train.src") == [src[i] for i in order[:8]]
    assert _lines(out / "valid.src") == [src[i] for i in order[8:]]
    assert _lines(out / "train.tgt") == [tgt[i] for i in order[:8]] and _lines(out / "valid.tgt") == [tgt[i] for i in order[8:]]
    for side in ("src", "tgt"):
        assert (out / f"test.{side}").read_bytes() == (split / f"test.{side}").read_bytes()
        assert (data / f"dict.{side}.txt").read_bytes() == (split / "bin" / f"dict.{side}.txt").read_bytes()
    for subset in ("train", "valid", "test"):
        for side in ("src", "tgt"):
            assert (data / f"{subset}.src-tgt.{side}.bin").stat().st_size > 0
    log = (out / "preprocess.log").read_text()
    assert "valid.src: 2 sents" in log and "train.src: 8 sents" in log and "0.0% replaced" in log
    assert "8 train / 2 valid lines" in capsys.readouterr().out
    assert sorted(p.name for p in split.iterdir()) == ["bin", "russin", "test.src", "test.tgt", "train.src", "train.tgt"]
    # already there: one line, nothing rewritten
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    assert prep.main(["russin", str(split)]) == 0
    assert capsys.readouterr().out.strip() == f"russin: {out} already exists (delete it to rebuild)"
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before


def test_russin_refuses_an_incomplete_split(tmp_path):
    split = _split(tmp_path / "s")
    (split / "bin" / "dict.src.txt").unlink()
    with pytest.raises(MissingFileError, match=r"lacks bin/dict.src.txt: .*fairseq-compgen prep scan --split s --out"):
        russin.ensure(split)
    with pytest.raises(MissingFileError, match=r"lacks train.src"):
        russin.ensure(tmp_path / "nothing")
    # a split of other subsets (length_cutoff_26: train, valid, gen), made by the command the message used to suggest
    cutoff = _split(tmp_path / "length_cutoff_26")
    for ext in ("src", "tgt"):
        (cutoff / f"test.{ext}").rename(cutoff / f"gen.{ext}")
        (cutoff / f"valid.{ext}").write_text("walk\n" if ext == "src" else "WALK\n")
    with pytest.raises(MissingFileError, match=r"length_cutoff_26 lacks test.src: prep russin holds out a validation set "
                                               r"from a SCAN split of train and test \(e.g. fairseq-compgen prep scan "
                                               r"--split addprim_jump --out .*\); this split's subsets are gen, train, "
                                               r"valid$"):
        russin.ensure(cutoff)
    split = _split(tmp_path / "t")
    (split / "train.tgt").write_text("JUMP\n")
    with pytest.raises(DataError, match=r"train.tgt:2: expected as many lines as train.src \(10\), got 1"):
        russin.ensure(split)
    assert not (split / "russin").exists() and not list(split.glob(".russin*"))
