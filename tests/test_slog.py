"""SLOG (Li et al., EMNLP 2023) prepared by `fairseq-compgen prep slog` from the shared copy, its errors, the
one-file dataset registry (fairseq_compgen/data/dataset.py, prep/__init__.py) with a toy dataset outside the
package, and a tiny end to end: train a few updates on a SLOG subsample, `fairseq-compgen eval` per type."""
import json
import os
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from fairseq_compgen import prep
from fairseq_compgen.data import slog
from fairseq_compgen.data.binarize import CountMismatch
from fairseq_compgen.data.io import ArchiveError, DataError
from fairseq_compgen.errors import UsageError

REPO = Path(__file__).resolve().parents[1]
SLOG_DIR = REPO.parent / "shared" / "data" / "slog"
COMPGEN = [sys.executable, "-m", "fairseq_compgen.cli"]
TINY = ("--encoder-layers 2 --decoder-layers 2 --encoder-embed-dim 32 --decoder-embed-dim 32 "
        "--encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 4 "
        "--decoder-attention-heads 4").split()
# the 17 generalization types of the release (Li et al. 2023, Table 1), 1,000 examples each
TYPES = {"PP_3", "PP_5-12", "CP_3", "CP_5-12", "center_embed_3", "center_embed_5-12", "PP_modif_subj",
         "PP_modif_iobj", "RC_modif_subj", "RC_modif_iobj", "RC_iobj_extracted", "Q_subj_active", "Q_subj_passive",
         "Q_dobj_ditransV", "Q_iobj_ditransV", "Q_modified_NPs", "Q_long_mv"}


def run(cmd, env=None, ok=True, cwd=REPO):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
               **(env or {}))
    p = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True)
    if ok:
        assert p.returncode == 0, f"{cmd[:4]} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


def rows(text):
    """The (sentence, logical form, category) rows of the authors' TSV text, read here independently."""
    return [tuple(" ".join(f.split()) for f in line.split("\t")) for line in text.splitlines() if line]


def zip_rows(name):
    with zipfile.ZipFile(SLOG_DIR / "generalization_sets.zip") as z:
        return rows(z.read(f"generalization_sets/{name}", pwd=b"SLOG").decode("utf-8"))


def lines(path):
    return Path(path).read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    out = tmp_path_factory.mktemp("slog")
    p = run([*COMPGEN, "prep", "slog", "--out", out, "--slog-dir", SLOG_DIR])
    return out / "varfree_LF", p.stdout


def test_slog_prep_counts_types_and_alignment(prepared):
    split, stdout = prepared
    counts = {s: len(lines(split / f"{s}.src")) for s in ("train", "valid", "test", "gen")}
    assert counts == {"train": 32755, "valid": 4046, "test": 4046, "gen": 17000}
    assert all(len(lines(split / f"{s}.tgt")) == n for s, n in counts.items())
    gen = zip_rows("gen_varfreeLF.tsv")
    cats = lines(split / "gen.cat")
    assert Counter(cats) == {t: 1000 for t in TYPES}
    # gen.cat is aligned with gen: line k is the type of the zip's line k, whose sentence and form are gen's line k
    assert cats == [c for _, _, c in gen]
    assert lines(split / "gen.src") == [s for s, _, _ in gen] and lines(split / "gen.tgt") == [t for _, t, _ in gen]
    assert (split / "bin" / "gen.cat").read_bytes() == (split / "gen.cat").read_bytes()
    dev = rows((SLOG_DIR / "varfree_LF" / "dev.tsv").read_text(encoding="utf-8"))
    assert lines(split / "valid.tgt") == [t for _, t, _ in dev]
    assert json.loads((split / "bin" / "dataset.json").read_text()) == {
        "dataset": "slog", "metric": "exact_match", "categories": {"gen": "gen.cat"}}
    assert "gen categories: 17 (gen.cat)" in stdout


def test_slog_dictionaries_cover_every_subset(prepared):
    split, stdout = prepared
    for side, col in (("src", 0), ("tgt", 1)):
        words = set()
        for name in ("train", "dev", "test"):
            words |= {w for r in rows((SLOG_DIR / "varfree_LF" / f"{name}.tsv").read_text(encoding="utf-8"))
                      for w in r[col].split()}
        words |= {w for r in zip_rows("gen_varfreeLF.tsv") for w in r[col].split()}
        assert {l.split()[0] for l in lines(split / "bin" / f"dict.{side}.txt")} == words
        for subset in ("train", "valid", "test", "gen"):
            assert (split / "bin" / f"{subset}.src-tgt.{side}.bin").stat().st_size > 0
    table = [l.split() for l in stdout.splitlines() if l.split()[:1] == ["gen"] and l.split()[1].isdigit()]
    assert [r[1:6] for r in table] == [["17000", "17000", "17000", "0", "0"]]  # in, out, expected, unk_src, unk_tgt


def _copy(tmp_path, train_n=None, dev_edit=None):
    """A SLOG data/ copy in tmp_path: train cut to train_n lines, dev's lines changed by dev_edit."""
    d = tmp_path / "slog"
    (d / "varfree_LF").mkdir(parents=True)
    for name in ("train", "dev", "test"):
        text = (SLOG_DIR / "varfree_LF" / f"{name}.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
        if name == "train" and train_n is not None:
            text = text[:train_n]
        if name == "dev" and dev_edit is not None:
            text = dev_edit(text)
        (d / "varfree_LF" / f"{name}.tsv").write_text("".join(text), encoding="utf-8")
    (d / "generalization_sets.zip").symlink_to(SLOG_DIR / "generalization_sets.zip")
    return d


def test_count_mismatch_is_one_line_naming_the_file(tmp_path, capsys):
    d = _copy(tmp_path, train_n=100)
    with pytest.raises(CountMismatch) as e:
        prep.main(["slog", "--out", str(tmp_path / "out"), "--slog-dir", str(d), "--no-binarize"])
    msg = str(e.value)
    assert "\n" not in msg and f"train ({d / 'varfree_LF' / 'train.tsv'}): 100 examples, expected 32755" in msg
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").rglob("*.src"))
    prep.main(["slog", "--out", str(tmp_path / "out"), "--slog-dir", str(d), "--no-binarize", "--no-count-check"])
    assert "warning: slog varfree_LF: counts differ" in capsys.readouterr().err
    assert len(lines(tmp_path / "out" / "varfree_LF" / "train.src")) == 100


def test_a_malformed_line_is_one_line_naming_file_and_line(tmp_path):
    def edit(text):
        text[2] = text[2].replace("\t", " ", 1)  # line 3: 2 fields
        return text

    d = _copy(tmp_path, dev_edit=edit)
    with pytest.raises(DataError) as e:
        prep.main(["slog", "--out", str(tmp_path / "out"), "--slog-dir", str(d), "--no-binarize"])
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"{d / 'varfree_LF' / 'dev.tsv'}:3: expected 3 tab-separated fields (sentence, logical "
                          f"form, category), got 2")
    assert not (tmp_path / "out").exists()


def test_an_archive_zipfile_cannot_decrypt_or_read_says_what_to_do(tmp_path):
    path = tmp_path / "generalization_sets.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr("generalization_sets/gen_varfreeLF.tsv", "a\tb\tc\n")
    data = bytearray(path.read_bytes())  # method 99 (AES), which zipfile does not implement
    for sig, off in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        i = data.index(sig)
        data[i + off:i + off + 2] = (99).to_bytes(2, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(UsageError) as e:
        slog.read_gen_zip(path, "varfree")
    assert "\n" not in str(e.value) and "cannot decrypt gen_varfreeLF.tsv" in str(e.value)
    assert "unzip -P SLOG" in str(e.value) and "--gen-file" in str(e.value)
    path.write_bytes(b"not a zip\n")
    with pytest.raises(ArchiveError, match=r"generalization_sets.zip: corrupt or truncated archive"):
        slog.read_gen_zip(path, "varfree")


def test_cogs_lf_needs_a_train_file_and_reads_the_cogs_gen_set(tmp_path):
    with pytest.raises(UsageError) as e:
        prep.main(["slog", "--out", str(tmp_path / "out"), "--slog-dir", str(SLOG_DIR), "--lf", "cogs"])
    msg = str(e.value)
    assert "\n" not in msg and "the COGS-LF train set is not in the authors' release copy we have" in msg
    assert "--train-file" in msg
    train = tmp_path / "train.tsv"  # a user's COGS-LF train file (here: a piece of dev)
    train.write_text("".join((SLOG_DIR / "cogs_LF" / "dev.tsv").read_text().splitlines(keepends=True)[:50]))
    prep.main(["slog", "--out", str(tmp_path / "out"), "--slog-dir", str(SLOG_DIR), "--lf", "cogs",
               "--train-file", str(train), "--no-binarize", "--no-count-check"])
    split = tmp_path / "out" / "cogs_LF"
    gen = zip_rows("gen_cogsLF.tsv")
    assert lines(split / "gen.tgt") == [t for _, t, _ in gen] and len(gen) == 17000
    assert Counter(lines(split / "gen.cat")) == {t: 1000 for t in TYPES}
    assert len(lines(split / "train.src")) == 50 and len(lines(split / "test.src")) == 4046


def test_without_a_local_copy_the_authors_files_are_downloaded(tmp_path, monkeypatch):
    """No network in tests: urlopen serves the shared copy, by the path after the authors' raw URL."""
    import io

    from fairseq_compgen.data import download

    asked = []

    def fake_urlopen(url, timeout=None):
        asked.append(url)
        assert url.startswith("https://raw.githubusercontent.com/bingzhilee/SLOG/main/data/")
        return io.BytesIO((SLOG_DIR / url[len(slog.RAW_URL):]).read_bytes())

    monkeypatch.setattr(download.urllib.request, "urlopen", fake_urlopen)
    monkeypatch.setenv("FAIRSEQ_COMPGEN_CACHE", str(tmp_path / "cache"))
    prep.main(["slog", "--out", str(tmp_path / "out"), "--no-binarize"])
    assert sorted(u[len(slog.RAW_URL):] for u in asked) == [
        "generalization_sets.zip", "varfree_LF/dev.tsv", "varfree_LF/test.tsv", "varfree_LF/train.tsv"]
    assert (tmp_path / "cache" / "slog" / "generalization_sets.zip").read_bytes() == \
        (SLOG_DIR / "generalization_sets.zip").read_bytes()
    assert len(lines(tmp_path / "out" / "varfree_LF" / "gen.cat")) == 17000


# ---- the one-file registry ------------------------------------------------------------------------------------

TOY = '''"""Toy: reverse three-letter words (a one-file dataset for the tests).

Nothing else: the registry reads this first paragraph for `fairseq-compgen prep --help`.
"""
from fairseq_compgen.data.dataset import Dataset

WORDS = ["a b c", "b c a", "c a b", "a a b", "b b c", "c c a", "a c b", "b a c"]


def add_arguments(p):
    p.add_argument("--copies", type=int, default=4, help="copies of the word list in train")


def read(args):
    rev = lambda w: " ".join(reversed(w.upper().split()))
    return {"train": [(w, rev(w)) for w in WORDS] * args.copies,
            "valid": [(w, rev(w)) for w in WORDS[:3]],
            "gen": [(w, rev(w), "starts_" + w[0]) for w in WORDS]}


DATASET = Dataset(read=read, add_arguments=add_arguments, expected={"valid": 3, "gen": 8},
                  categories={"gen": 3}, folder=lambda args: "default")
'''


def test_a_one_file_dataset_outside_the_package_is_prepared(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "toy.py").write_text(TOY)
    # by path
    run([*COMPGEN, "prep", folder / "toy.py", "--out", tmp_path / "a", "--copies", "2"])
    split = tmp_path / "a" / "default"
    assert lines(split / "train.src") == ["a b c", "b c a", "c a b", "a a b", "b b c", "c c a", "a c b", "b a c"] * 2
    assert lines(split / "gen.tgt")[0] == "C B A" and lines(split / "bin" / "gen.cat")[:3] == ["starts_a", "starts_b",
                                                                                              "starts_c"]
    assert {l.split()[0] for l in lines(split / "bin" / "dict.tgt.txt")} == {"A", "B", "C"}
    assert (split / "bin" / "gen.src-tgt.src.idx").is_file()
    # by name, found through $FAIRSEQ_COMPGEN_DATASETS; listed without importing fairseq or torch (or the toy)
    env = {prep.ENV: str(folder)}
    code = ("import json, sys\nfrom fairseq_compgen import prep\nprep.main(['--help'])\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('fairseq', 'torch', 'fairseq_compgen_datasets'))))")
    p = run([sys.executable, "-c", code], env=env)
    *listing, last = p.stdout.splitlines()
    assert json.loads(last) == []
    assert any(l.split()[:4] == ["toy", "Toy:", "reverse", "three-letter"] for l in listing), p.stdout
    assert any(l.split()[:1] == ["slog"] for l in listing)
    run([*COMPGEN, "prep", "toy", "--out", tmp_path / "b", "--no-binarize"], env=env)
    assert len(lines(tmp_path / "b" / "default" / "train.src")) == 32
    # a declared count that differs is refused, naming the dataset
    run([*COMPGEN, "prep", "toy", "--out", tmp_path / "c", "--no-binarize"], env={prep.ENV: str(folder / "toy.py")})
    assert len(lines(tmp_path / "c" / "default" / "valid.tgt")) == 3
    (folder / "toy.py").write_text(TOY.replace('expected={"valid": 3', 'expected={"valid": 4'))
    p = run([*COMPGEN, "prep", "toy", "--out", tmp_path / "d", "--no-binarize"], env=env, ok=False)
    assert p.returncode != 0 and "toy default: counts differ from the published statistics: valid: 3 examples, " \
                                 "expected 4" in p.stderr
    assert not (tmp_path / "d").exists() or not list((tmp_path / "d").rglob("*.src"))


def test_registry_refuses_a_taken_name_and_a_module_without_a_dataset(tmp_path, monkeypatch):
    (tmp_path / "cogs.py").write_text(TOY)
    monkeypatch.setenv(prep.ENV, str(tmp_path))
    with pytest.raises(UsageError, match=r"cogs.py: dataset name 'cogs' is already taken by .*data/cogs.py"):
        prep.names()
    (tmp_path / "cogs.py").unlink()
    (tmp_path / "bad.py").write_text('"""Bad."""\nDATASET = {"read": None}\n')
    with pytest.raises(UsageError, match=r"bad.py: DATASET is a dict: expected fairseq_compgen.data.dataset.Dataset"):
        prep.module("bad")
    (tmp_path / "plain.py").write_text('"""Not a dataset."""\nX = 1\n')
    assert "plain" not in prep.names() and "bad" in prep.names()
    with pytest.raises(UsageError, match=r"plain.py: not a dataset"):
        prep.module(str(tmp_path / "plain.py"))
    (tmp_path / "broken.py").write_text('"""Broken."""\nDATASET = Dataset(\n')
    with pytest.raises(UsageError, match=r"broken.py:2: expected Python \(a one-file dataset\)"):
        prep.names()


def test_the_documented_toy_goes_through_prep_train_and_eval(tmp_path):
    """The example of fairseq_compgen/data/dataset.py's docstring, its file and its three commands as written (the
    model made tiny and trained 2 updates)."""
    import shlex
    import textwrap

    from fairseq_compgen.data import dataset

    doc = dataset.__doc__
    code = textwrap.dedent(doc.split("A minimal one::\n")[1].split("\nThen,")[0])
    (tmp_path / "toy.py").write_text(code)
    commands = [l.split("#")[0].split() for l in doc.split("names)::\n")[1].split("\n\n")[0].splitlines()]
    commands = [shlex.split(" ".join(c)) for c in commands if c]
    assert [c[:2] for c in commands] == [["fairseq-compgen", "prep"], ["fairseq-compgen", "train"],
                                         ["fairseq-compgen", "eval"]]
    extra = {"train": [*TINY, "--max-update", "2", "--validate-interval-updates", "2", "--save-interval-updates", "2",
                       "--num-workers", "0"]}
    for c in commands:
        run([*COMPGEN, *c[1:], *extra.get(c[1], [])], cwd=tmp_path)
    result = json.loads((tmp_path / "runs" / "toy" / "eval" / "gen.json").read_text())
    assert result["n"] == 1 and set(result["per_category"]) == {"x"}


# ---- end to end: a tiny model on a SLOG subsample ----------------------------------------------------------------


def test_tiny_train_and_eval_per_type_on_a_slog_subsample(tmp_path):
    d = tmp_path / "slog" / "varfree_LF"
    d.mkdir(parents=True)
    for name, n in (("train", 200), ("dev", 20), ("test", 20)):
        text = (SLOG_DIR / "varfree_LF" / f"{name}.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
        (d / f"{name}.tsv").write_text("".join(text[::len(text) // n][:n]), encoding="utf-8")
    with zipfile.ZipFile(SLOG_DIR / "generalization_sets.zip") as z:
        gen = z.read("generalization_sets/gen_varfreeLF.tsv", pwd=b"SLOG").decode("utf-8").splitlines(keepends=True)
    gen = gen[::200]  # 5 of each type (the file is sorted by type)
    (tmp_path / "gen.tsv").write_text("".join(gen), encoding="utf-8")
    run([*COMPGEN, "prep", "slog", "--out", tmp_path / "data", "--slog-dir", tmp_path / "slog",
         "--gen-file", tmp_path / "gen.tsv", "--no-count-check"])
    data = tmp_path / "data" / "varfree_LF" / "bin"
    save = tmp_path / "run"
    run([*COMPGEN, "train", "--recipe", "slog/transformer", "--cpu", "compgen_transformer_cogs", data, save, *TINY,
         "--batch-size", "32", "--max-update", "3", "--validate-interval-updates", "3", "--save-interval-updates", "3",
         "--valid-subset", "valid", "--num-workers", "0"])
    p = run([*COMPGEN, "eval", save / "checkpoint_last.pt", data, "gen", "--cpu"])
    result = json.loads((save / "eval" / "gen.json").read_text())
    cats = [l.split("\t")[2].strip() for l in gen]
    assert set(result["per_category"]) == TYPES and result["n"] == len(gen) == 85
    assert all(result["per_category"][t]["n"] == cats.count(t) == 5 for t in TYPES)
    assert sum(c["correct"] for c in result["per_category"].values()) == result["correct"]
    assert "gen" in p.stdout + p.stderr and "exact-match accuracy" in p.stdout + p.stderr
