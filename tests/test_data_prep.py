"""Data-prep for COGS, CFQ, PCFG SET and Mathematics, on the real copies in shared/data.

COGS: Kim & Linzen (2020); CFQ: Keysers et al. (2020); PCFG SET: Hupkes et al.
(2020); Mathematics: Saxton et al. (2019); statistics: Csordás et al. (2021), Table 10
(Csordás, Irie & Schmidhuber 2021).  Large sets are subsampled where only the
mechanics are tested; counts are checked on the full real files.
"""

import hashlib
import io
import json
import re
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path

import pytest

from fairseq_compgen.data import cfq, cogs, pcfg
from fairseq_compgen.data import mathematics as md
from fairseq_compgen.data.binarize import CountMismatch
from fairseq_compgen.data.io import MANIFEST, DataError, staged_files
from fairseq_compgen.errors import UsageError
from fairseq_compgen.prep import module as prep_module

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
COGS_DIR = SHARED_DATA / "cogs"
CFQ_PRE = SHARED_DATA / "cfq" / "mcd1_preprocessed"
PCFG_DIR = SHARED_DATA / "pcfg"
MATH_DIR = SHARED_DATA / "math"


def _needs(path, what):
    return pytest.mark.skipif(
        not Path(path).exists(),
        reason=f"{what} not found at {path} (expected shared/ as a sibling of the repo checkout)",
    )


needs_cogs = _needs(COGS_DIR / "gen.tsv", "COGS files")
needs_cfq = _needs(CFQ_PRE / "train.query.txt", "preprocessed CFQ MCD1")
needs_pcfg = _needs(PCFG_DIR / "productivity" / "test.src", "PCFG SET files")
needs_math = _needs(MATH_DIR / "train-easy" / "arithmetic__add_or_sub.txt", "Mathematics files")


def _lines(path):
    return Path(path).read_text(encoding="utf-8").split("\n")[:-1]


def _digest(folder):
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(Path(folder).rglob("*"))
        if p.is_file() and p.name != "preprocess.log"
    }


def _bin_files(d, subsets):
    return [d / "bin" / f"{s}.src-tgt.{lang}.{ext}" for s in subsets for lang in ("src", "tgt") for ext in ("bin", "idx")]


# ---------------------------------------------------------------------------
# COGS
# ---------------------------------------------------------------------------


@needs_cogs
def test_cogs_end_to_end_with_categories(tmp_path, capsys):
    """Full real files (text only: counts, gen.cat, per-category scoring) ..."""
    out = tmp_path / "cogs"
    summary = prep_module("cogs").main(["--out", str(out), "--cogs-dir", str(COGS_DIR), "--no-binarize"])
    d = out / "default"
    expected = {"train": 24155, "valid": 3000, "test": 3000, "gen": 21000}
    assert {s: summary[s]["n_in"] for s in expected} == expected
    assert (summary["train"]["max_len_src"], summary["train"]["max_len_tgt"]) == (22, 153)  # Table 10
    assert (summary["gen"]["max_len_src"], summary["gen"]["max_len_tgt"]) == (61, 480)
    gen = cogs.read_tsv(COGS_DIR / "gen.tsv")
    assert _lines(d / "gen.src") == [s for s, _, _ in gen]
    assert _lines(d / "gen.tgt") == [t for _, t, _ in gen]
    cats = _lines(d / "gen.cat")
    assert cats == [c for _, _, c in gen]
    assert len(set(cats)) == 21 and set(Counter(cats).values()) == {1000}
    sections = json.loads((COGS_DIR / "gen_cases_to_paper_sections.json").read_text())
    assert set(cats) <= set(sections)
    assert "21000" in capsys.readouterr().out

    # per-category scoring on a fake generate log: every 2nd example of 'cp_recursion' is wrong
    refs = _lines(d / "gen.tgt")
    log = []
    for i, ref in enumerate(refs):
        hyp = ref + " extra" if (cats[i] == "cp_recursion" and i % 2 == 0) else ref
        log += [f"S-{i}\tx", f"T-{i}\t{ref}", f"H-{i}\t-0.1\t{hyp}"]
    (tmp_path / "gen.log").write_text("\n".join(log) + "\n")
    res_path = tmp_path / "res.json"
    proc = subprocess.run(
        [sys.executable, "-m", "fairseq_compgen.scoring.exact_match", str(tmp_path / "gen.log"),
         "--categories", str(d / "gen.cat"), "--json", str(res_path), "--expected-count", "21000"],
        cwd=REPO, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    res = json.loads(res_path.read_text())
    assert len(res["per_category"]) == 21
    n_wrong = sum(1 for i, c in enumerate(cats) if c == "cp_recursion" and i % 2 == 0)
    assert res["per_category"]["cp_recursion"]["correct"] == 1000 - n_wrong
    assert all(v["accuracy"] == 1.0 for k, v in res["per_category"].items() if k != "cp_recursion")
    assert res["correct"] == 21000 - n_wrong


def _cogs_sample(folder: Path, every: int) -> Path:
    """Every `every`-th line of each real COGS file, written as a COGS folder."""
    folder.mkdir()
    for stem in ("train", "dev", "test", "gen"):
        _tsv(folder / f"{stem}.tsv", cogs.read_tsv(COGS_DIR / f"{stem}.tsv")[::every])
    return folder


@needs_cogs
def test_cogs_binaries_with_gen_cat(tmp_path):
    """... and binaries on every 10th line of the real files (fast): bin/gen.cat, no <unk> with --dict-from all."""
    small = _cogs_sample(tmp_path / "small", every=10)
    out = tmp_path / "cogs"
    prep = prep_module("cogs")
    args = ["--out", str(out), "--cogs-dir", str(small), "--no-count-check", "--joined-dictionary"]
    summary = prep.main(args)
    d = out / "default"
    for subset, n in {"train": 2416, "valid": 300, "test": 300, "gen": 2100}.items():
        assert summary[subset]["n_in"] == summary[subset]["n_out"] == n
        assert summary[subset]["unk_src"] == summary[subset]["unk_tgt"] == 0
    assert all(p.is_file() for p in _bin_files(d, ("train", "valid", "test", "gen")))
    assert _lines(d / "bin" / "gen.cat") == _lines(d / "gen.cat") == [c for _, _, c in cogs.read_tsv(small / "gen.tsv")]
    assert not list((d / "bin").glob("test1*")), "fairseq's test1.* files must be renamed"
    before = _digest(d)
    prep.main(args)  # rerun: identical files, no temporary leftovers
    assert _digest(d) == before
    assert sorted(p.name for p in d.iterdir()) == sorted(
        [f"{s}.{l}" for s in ("train", "valid", "test", "gen") for l in ("src", "tgt")] + ["gen.cat", "bin",
                                                                                         ".prep-files.json"]
    )


def _tsv(path, rows):
    path.write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")


@needs_cogs
def test_cogs_train_100_count_mismatch_and_atomicity(tmp_path):
    src = {s: cogs.read_tsv(COGS_DIR / f"{s}.tsv") for s in ("train", "dev", "test", "gen")}
    small = tmp_path / "small"
    small.mkdir()
    for stem, rows in src.items():
        _tsv(small / f"{stem}.tsv", rows[:50] if stem != "gen" else rows[::500])
    prep = prep_module("cogs")
    out = tmp_path / "out"
    # not the official counts: stops before writing anything
    with pytest.raises(CountMismatch, match="train: 50 examples, expected 24155"):
        prep.main(["--out", str(out), "--cogs-dir", str(small)])
    assert not list(out.rglob("*.*")), "nothing may be written when the counts are wrong"
    # train_100 is used when asked for (and absent -> clear error)
    with pytest.raises(FileNotFoundError, match="train_100.tsv"):
        prep.main(["--out", str(out), "--cogs-dir", str(small), "--train", "train_100", "--no-count-check"])
    _tsv(small / "train_100.tsv", src["train"][:80])
    prep.main(["--out", str(out), "--cogs-dir", str(small), "--train", "train_100", "--no-count-check",
               "--no-binarize"])
    assert len(_lines(out / "train_100" / "train.src")) == 80
    assert len(_lines(out / "train_100" / "gen.cat")) == 42


def test_cogs_wrong_field_count_names_file_and_line(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("A cat ran .\tcat ( x _ 1 )\tin_distribution\nA dog ran .\tdog ( x _ 1 )\n")
    with pytest.raises(DataError) as e:
        cogs.read_tsv(path)
    assert f"{path}:2: expected 3 tab-separated fields" in str(e.value) and "got 2" in str(e.value)
    path.write_text("a\tb\tc\td\n")
    with pytest.raises(DataError, match=r"train.tsv:1: .*got 4"):
        cogs.read_tsv(path)


def test_cogs_missing_file(tmp_path):
    _tsv(tmp_path / "train.tsv", [("a", "b", "c")])
    with pytest.raises(FileNotFoundError, match=r"dev.tsv"):
        cogs.load(cogs_dir=tmp_path)


# ---------------------------------------------------------------------------
# CFQ
# ---------------------------------------------------------------------------


@needs_cfq
def test_cfq_preprocessed_mcd1_counts(tmp_path, capsys):
    out = tmp_path / "cfq"
    summary = prep_module("cfq").main(
        ["--split", "mcd1", "--out", str(out), "--preprocessed-dir", str(CFQ_PRE), "--no-binarize"]
    )["mcd1"]
    assert {s: summary[s]["n_in"] for s in ("train", "valid", "test")} == {"train": 95743, "valid": 11968, "test": 11968}
    assert (summary["train"]["max_len_src"], summary["train"]["max_len_tgt"]) == (29, 95)  # Table 10
    d = out / "mcd1"
    assert (d / "train.tgt").read_bytes() == (CFQ_PRE / "train.query.txt").read_bytes()
    assert (d / "valid.src").read_bytes() == (CFQ_PRE / "dev.question.txt").read_bytes()
    assert "95743" in capsys.readouterr().out


@needs_cfq
def test_cfq_preprocessing_is_idempotent_on_the_released_preprocessed_text():
    """Our reimplementation leaves google-research's output unchanged (a fixed point) on real lines."""
    qs = _lines(CFQ_PRE / "dev.question.txt")[:2000]
    ys = _lines(CFQ_PRE / "dev.query.txt")[:2000]
    assert all(cfq.tokenize_punctuation(q) == q for q in qs)
    assert all(cfq.preprocess_sparql(y) == y for y in ys)


def test_cfq_preprocessing_examples():
    assert cfq.tokenize_punctuation("Did M0 's sibling marry M1,M2?") == "Did M0 ' s sibling marry M1 , M2 ?"
    q = "SELECT count(*) WHERE {\n?x0 a ns:people.person .\n?x0 ns:people.person.gender ns:m.05zppz .\nM1 ns:a.b/ns:c.d ?x0\n}"
    assert cfq.preprocess_sparql(q) == (
        "SELECT count ( * ) WHERE { ?x0 a people.person . ?x0 people.person.gender m_05zppz . M1 a.b/ns:c.d ?x0 }"
    )


RECORDS = [
    {"questionPatternModEntities": f"Did M0 direct M{i}?", "sparqlPatternModEntities":
     f"SELECT count(*) WHERE {{\nM0 ns:film.director.film M{i} .\nM0 ns:people.person.gender ns:m.05zppz\n}}",
     "question": "unused", "complexityMeasures": {"recursionDepth": i}}
    for i in range(8)
]


def _tarball(path, records=RECORDS, split=None, raw=None):
    split = split or {"trainIdxs": [0, 1, 2, 3], "devIdxs": [4, 5], "testIdxs": [6, 7]}
    data = raw if raw is not None else json.dumps(records, indent=2).encode()
    with tarfile.open(path, "w:gz") as tar:
        for name, blob in [("cfq/splits/mcd1.json", json.dumps(split).encode()), ("cfq/dataset.json", data)]:
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return path


def test_cfq_tarball_streaming_end_to_end(tmp_path):
    tb = _tarball(tmp_path / "cfq1.1.tar.gz")
    out = tmp_path / "out"
    summary = prep_module("cfq").main(
        ["--split", "mcd1", "--out", str(out), "--cfq-tarball", str(tb), "--no-count-check"]
    )["mcd1"]
    d = out / "mcd1"
    assert _lines(d / "train.src") == [f"Did M0 direct M{i} ?" for i in range(4)]
    assert _lines(d / "test.tgt")[1] == "SELECT count ( * ) WHERE { M0 film.director.film M7 . M0 people.person.gender m_05zppz }"
    assert summary["valid"]["n_out"] == 2 and summary["test"]["n_out"] == 2
    assert all(p.is_file() for p in _bin_files(d, ("train", "valid", "test")))
    # the default count check refuses a non-official release, writing nothing
    with pytest.raises(CountMismatch, match="expected 95743"):
        prep_module("cfq").main(["--split", "mcd1", "--out", str(tmp_path / "o2"), "--cfq-tarball", str(tb)])
    assert not (tmp_path / "o2" / "mcd1" / "train.src").exists()


def test_cfq_json_streaming_small_chunks():
    blob = json.dumps(RECORDS).encode()
    got = list(cfq.iter_json_list(io.BytesIO(blob), chunk_chars=7))
    assert got == RECORDS
    assert list(cfq.iter_json_list(io.BytesIO(b" [ 1 , 23 ,\n456 ] "), chunk_chars=2)) == [1, 23, 456]
    assert list(cfq.iter_json_list(io.BytesIO(b"[]"))) == []
    with pytest.raises(ValueError, match="truncated"):
        list(cfq.iter_json_list(io.BytesIO(blob[:-40]), chunk_chars=64))
    with pytest.raises(ValueError, match="expected a JSON list"):
        list(cfq.iter_json_list(io.BytesIO(b'{"a": 1}')))


def test_cfq_index_past_the_dataset(tmp_path):
    tb = _tarball(tmp_path / "cfq.tar.gz", split={"trainIdxs": [0, 1], "devIdxs": [2], "testIdxs": [3, 8]})
    with pytest.raises(UsageError, match=r"testIdxs\[1\] = 8 points past the dataset \(dataset.json has 8 records\)"):
        cfq.load_from_tarball(tb, ["mcd1"])


def test_cfq_missing_split_and_preprocessed_files(tmp_path):
    tb = _tarball(tmp_path / "cfq.tar.gz")
    with pytest.raises(FileNotFoundError, match=r"mcd2.*cfq/splits/mcd2.json"):
        cfq.load_from_tarball(tb, ["mcd2"])
    with pytest.raises(FileNotFoundError, match=r"train.question.txt"):
        cfq.load_preprocessed(tmp_path)
    (tmp_path / "x").mkdir()
    for stem in ("train", "dev", "test"):
        (tmp_path / "x" / f"{stem}.question.txt").write_text("a\nb\n")
        (tmp_path / "x" / f"{stem}.query.txt").write_text("a\nb\n" if stem != "dev" else "a\n")
    with pytest.raises(DataError, match=r"dev.query.txt:2: expected as many lines"):
        cfq.load_preprocessed(tmp_path / "x")


def test_cfq_extracted_dir(tmp_path):
    (tmp_path / "splits").mkdir()
    (tmp_path / "dataset.json").write_text(json.dumps(RECORDS))
    (tmp_path / "splits" / "mcd1.json").write_text(json.dumps({"trainIdxs": [7], "devIdxs": [0], "testIdxs": [1]}))
    data = cfq.load_from_dir(tmp_path, ["mcd1"])["mcd1"]
    assert data["train"] == [("Did M0 direct M7 ?", cfq.preprocess_sparql(RECORDS[7]["sparqlPatternModEntities"]))]


# ---------------------------------------------------------------------------
# PCFG SET
# ---------------------------------------------------------------------------


def test_pcfg_interpreter_semantics():
    assert pcfg.interpret("reverse copy O14 O4 C12 J14 W3") == "W3 J14 C12 O4 O14"
    assert pcfg.interpret("shift A B C") == "B C A"
    assert pcfg.interpret("echo A B") == "A B B"
    assert pcfg.interpret("swap_first_last A B C D") == "D B C A"
    assert pcfg.interpret("swap_first_last A") == "A"
    assert pcfg.interpret("repeat A B") == "A B A B"
    assert pcfg.interpret("append A , B C") == "A B C"
    assert pcfg.interpret("prepend A , B C") == "B C A"
    assert pcfg.interpret("remove_first A , B C") == "B C"
    assert pcfg.interpret("remove_second A , B C") == "A"
    assert pcfg.interpret("append append A , B , C") == "A B C"
    assert pcfg.interpret("prepend A , append B , C") == "B C A"
    for bad in ["", "append A B", "copy", "A , B", "copy A , B", "reverse A copy B", "append A ,"]:
        with pytest.raises(pcfg.ProgramError, match="not a PCFG SET program"):
            pcfg.interpret(bad)


@needs_pcfg
@pytest.mark.parametrize("stem", ["pcfgset/dev", "productivity/test"])
def test_pcfg_interpreter_agrees_with_every_real_pair(stem):
    srcs, tgts = _lines(PCFG_DIR / f"{stem}.src"), _lines(PCFG_DIR / f"{stem}.tgt")
    assert len(srcs) == len(tgts) == {"pcfgset/dev": 4860, "productivity/test": 11333}[stem]
    wrong = [(i, s) for i, (s, t) in enumerate(zip(srcs, tgts)) if pcfg.interpret(s) != t]
    assert wrong == []


@needs_pcfg
def test_pcfg_prep_from_a_folder(tmp_path, capsys):
    """train.src is not in shared/data: train = the real dev set, test = the real productivity test set."""
    folder = tmp_path / "pcfgset"
    (folder / "productivity").mkdir(parents=True)
    for ext in ("src", "tgt"):
        (folder / "productivity" / f"train.{ext}").write_bytes((PCFG_DIR / "pcfgset" / f"dev.{ext}").read_bytes())
        lines = _lines(PCFG_DIR / "productivity" / f"test.{ext}")[:2000]
        (folder / "productivity" / f"test.{ext}").write_text("\n".join(lines) + "\n")
    prep = prep_module("pcfg")
    out = tmp_path / "out"
    args = ["--split", "productivity", "--out", str(out), "--pcfg-dir", str(folder), "--joined-dictionary"]
    with pytest.raises(CountMismatch, match="expected 81010"):
        prep.main(args)
    summary = prep.main(args + ["--no-count-check"])["productivity"]
    d = out / "productivity"
    assert summary["train"]["n_out"] == 4860 and summary["test"]["n_out"] == 2000
    assert summary["_vocab"]["src"] == summary["_vocab"]["tgt"]  # joined
    assert all(p.is_file() for p in _bin_files(d, ("train", "test")))
    assert "targets checked by the interpreter" in capsys.readouterr().out
    before = _digest(d)
    prep.main(args + ["--no-count-check"])
    assert _digest(d) == before
    assert sorted(p.name for p in d.iterdir()) == [".prep-files.json", "bin", "test.src", "test.tgt", "train.src",
                                                   "train.tgt"]

    # a wrong target stops the prep with file:line, and leaves the prepared data as it was
    tgt = folder / "productivity" / "test.tgt"
    lines = _lines(tgt)
    lines[41] = lines[41] + " A1"
    tgt.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=rf"{tgt}:42: target differs from the interpretation"):
        prep.main(args + ["--no-count-check"])
    assert _digest(d) == before
    with pytest.raises(FileNotFoundError, match="systematicity/train.src"):
        prep.main(["--split", "systematicity", "--out", str(out), "--pcfg-dir", str(folder)])


# ---------------------------------------------------------------------------
# Mathematics
# ---------------------------------------------------------------------------


def test_math_char_tokens():
    assert md.char_tokens("What is -5 - 11?") == "W h a t _ i s _ - 5 _ - _ 1 1 ?"
    assert md.detokenize(md.char_tokens("What is -5 - 11?")) == "What is -5 - 11?"
    with pytest.raises(ValueError, match="stands for a space"):
        md.char_tokens("a_b")


@needs_math
def test_math_real_counts_and_tokens():
    for module in md.MODULES:
        data = md.load(module, MATH_DIR)
        counts = {s: sum(1 for _ in it) for s, it in data.items()}
        assert counts == {"train": 3 * 66666, "valid": 10000, "gen": 10000}
    q, a = next(md.load("arithmetic__add_or_sub", MATH_DIR)["train"])
    raw_q, raw_a = _lines(MATH_DIR / "train-easy" / "arithmetic__add_or_sub.txt")[:2]
    assert q == " ".join("_" if c == " " else c for c in raw_q) and a == " ".join(raw_a)
    assert md.detokenize(q) == raw_q


def _math_subsample(root, n_lines=200):
    for module in md.MODULES:
        for rels in md.files_of(module).values():
            for rel in rels:
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text("\n".join(_lines(MATH_DIR / rel)[:n_lines]) + "\n")


@needs_math
def test_math_prep_character_level(tmp_path):
    small = tmp_path / "math"
    _math_subsample(small)
    out = tmp_path / "out"
    summary = prep_module("mathematics").main(["--module", "numbers__place_value", "--out", str(out), "--math-dir", str(small)])
    res = summary["numbers__place_value"]
    assert {s: res[s]["n_out"] for s in ("train", "valid", "gen")} == {"train": 300, "valid": 100, "gen": 100}
    d = out / "numbers__place_value"
    src = _lines(d / "train.src")
    assert all(len(t) == 1 for line in src for t in line.split())
    assert md.detokenize(src[0]) == _lines(MATH_DIR / "train-easy" / "numbers__place_value.txt")[0]
    assert "_" in _lines(d / "bin" / "dict.src.txt")[0].split()[0] or any(
        line.split()[0] == "_" for line in _lines(d / "bin" / "dict.src.txt")
    )
    assert all(p.is_file() for p in _bin_files(d, ("train", "valid", "gen")))


@needs_math
def test_math_odd_line_count_is_an_error(tmp_path):
    small = tmp_path / "math"
    _math_subsample(small, n_lines=20)
    bad = small / "interpolate" / "arithmetic__add_or_sub.txt"
    bad.write_text("\n".join(_lines(bad)[:7]) + "\n")
    out = tmp_path / "out"
    with pytest.raises(DataError, match=rf"{bad}:7: expected an answer after the question"):
        prep_module("mathematics").main(["--module", "arithmetic__add_or_sub", "--out", str(out), "--math-dir", str(small)])
    assert not list(out.rglob("*.*")), "nothing may be written"
    (small / "extrapolate" / "arithmetic__add_or_sub_big.txt").unlink()
    with pytest.raises(FileNotFoundError, match="arithmetic__add_or_sub_big.txt"):
        md.load("arithmetic__add_or_sub", small)


def test_math_tarball_extracts_only_needed_members(tmp_path):
    tb = tmp_path / "m.tar.gz"
    with tarfile.open(tb, "w:gz") as tar:
        for module in md.MODULES + ("algebra__linear_1d",):
            for level in md.TRAIN_LEVELS + ("interpolate",):
                blob = f"What is {level}?\n1\n".encode()
                info = tarfile.TarInfo(f"{md.TAR_ROOT}/{level}/{module}.txt")
                info.size = len(blob)
                tar.addfile(info, io.BytesIO(blob))
            blob = b"What is 1 + 1?\n2\n"
            info = tarfile.TarInfo(f"{md.TAR_ROOT}/extrapolate/{module}_big.txt")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    dest = md.extract_members(tb, tmp_path / "x", ["arithmetic__add_or_sub"])
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert files == sorted(r for rels in md.files_of("arithmetic__add_or_sub").values() for r in rels)
    data = md.load("arithmetic__add_or_sub", dest)
    assert list(data["gen"]) == [("W h a t _ i s _ 1 _ + _ 1 ?", "2")]
    empty = tmp_path / "empty.tar.gz"
    with tarfile.open(empty, "w:gz"):
        pass
    with pytest.raises(FileNotFoundError, match="members not found.*numbers__place_value"):
        md.extract_members(empty, tmp_path / "y", ["numbers__place_value"])


# ---------------------------------------------------------------------------
# Atomic replacement, empty subsets
# ---------------------------------------------------------------------------


def _algorithmic(out, *extra):
    return prep_module("algorithmic").main(
        ["--out", str(out), "--tasks", "reverse", "--train-size", "40", "--test-size", "8", *extra])


def test_interrupted_prep_leaves_old_text_binaries_and_no_staging(tmp_path, monkeypatch):
    """An interrupt during fairseq-preprocess used to leave the new text beside the old bin/ (and a
    .bin.tmp-* folder): now text and binaries stay the old ones and no staging folder is left."""
    from fairseq_compgen.data import binarize

    out = tmp_path / "alg"
    _algorithmic(out, "--seed", "0")
    d = out / "reverse"
    before = _digest(d)
    real = binarize._run_preprocess

    def interrupted(*a, **kw):
        real(*a, **kw)
        raise KeyboardInterrupt

    monkeypatch.setattr(binarize, "_run_preprocess", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _algorithmic(out, "--seed", "1")
    assert _digest(d) == before
    assert sorted(p.name for p in out.iterdir()) == ["reverse"], "no staging folder may be left"
    assert not [p for p in d.rglob("*") if "tmp" in p.name]
    monkeypatch.setattr(binarize, "_run_preprocess", real)
    _algorithmic(out, "--seed", "1")
    assert _digest(d) != before and sorted(p.name for p in out.iterdir()) == ["reverse"]


def test_empty_subset_is_refused_before_anything_is_replaced(tmp_path):
    """--train-size 0 crashed in fairseq-preprocess after the old text had been replaced."""
    from fairseq_compgen.data.binarize import EmptySubset

    out = tmp_path / "alg"
    _algorithmic(out)
    before = _digest(out / "reverse")
    with pytest.raises(EmptySubset, match=r"reverse .*: train has 0 examples"):
        prep_module("algorithmic").main(["--out", str(out), "--tasks", "reverse", "--train-size", "0"])
    assert _digest(out / "reverse") == before
    assert sorted(p.name for p in out.iterdir()) == ["reverse"]


def test_staging_folders_of_a_killed_process_are_removed(tmp_path):
    from fairseq_compgen.data.io import staged_dir

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / f".x.tmp-{dead.pid}").mkdir()
    (tmp_path / f".x.tmp-{dead.pid}" / "train.src").write_text("half written\n")
    (tmp_path / f".x.old-{dead.pid}").mkdir()  # moved aside just before the kill: x is missing
    (tmp_path / f".x.old-{dead.pid}" / "train.src").write_text("old\n")
    with pytest.raises(RuntimeError):
        with staged_dir(tmp_path / "x"):
            assert (tmp_path / "x" / "train.src").read_text() == "old\n"
            raise RuntimeError("boom")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x"]
    with staged_dir(tmp_path / "x") as stage:
        (stage / "train.src").write_text("new\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x"] and (tmp_path / "x" / "train.src").read_text() == "new\n"


@needs_cogs
def test_cogs_tagging_checks_counts_and_replaces_files_together(tmp_path):
    """cogs_tagging had no count check (a COGS copy with missing lines was accepted)."""
    small = _cogs_sample(tmp_path / "small", every=100)
    out = tmp_path / "out"
    prep = prep_module("cogs_tagging")
    counts = prep.main(["--out", str(out), "--cogs-dir", str(small), "--no-count-check"])
    assert counts == {"train": 242, "valid": 30, "test": 30, "gen": 210}
    (out / "mine.txt").write_text("a file of the user\n")
    before = _digest(out)
    _tsv(small / "train.tsv", cogs.read_tsv(COGS_DIR / "train.tsv")[::50])
    with pytest.raises(CountMismatch, match=r"train: 484 examples, expected 24155"):
        prep.main(["--out", str(out), "--cogs-dir", str(small)])
    assert _digest(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["out", "small"]
    prep.main(["--out", str(out), "--cogs-dir", str(small), "--no-count-check"])
    assert len(_lines(out / "train.src")) == 484 and (out / "mine.txt").is_file()
    with pytest.raises(CountMismatch, match="COGS gen: 20 categories, expected 21"):
        cogs.check_categories([f"c{i}" for i in range(20)])


@needs_cogs
def test_a_second_prep_into_the_same_folder_keeps_the_first_ones_files(tmp_path):
    """`prep cogs_tagging` into the folder of `prep cogs` treated cogs' manifest as its own stale outputs: it
    deleted bin/ and the *.tgt files, and replaced train.src and gen.cat. Each prep now owns the files it wrote."""
    small = _cogs_sample(tmp_path / "small", every=100)
    prep_module("cogs").main(["--out", str(tmp_path / "out"), "--cogs-dir", str(small), "--no-count-check"])
    d = tmp_path / "out" / "default"
    before = _digest(d)
    assert "bin/dict.src.txt" in before and "train.tgt" in before
    with pytest.raises(UsageError, match=r"default/gen\.cat was written by `prep cogs`; `prep cogs_tagging` would "
                                         r"replace it and mix their data: write into another folder"):
        prep_module("cogs_tagging").main(["--out", str(d), "--cogs-dir", str(small), "--no-count-check"])
    assert _digest(d) == before
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["default"], "no staging or old folder left"
    # a writer that shares no file with the first: both keep theirs, and each rerun removes only its own stale files
    with staged_files(d, "mine") as stage:
        (stage / "a.txt").write_text("a\n")
        (stage / "b.txt").write_text("b\n")
    prep_module("cogs").main(["--out", str(tmp_path / "out"), "--cogs-dir", str(small), "--no-count-check"])
    with staged_files(d, "mine") as stage:
        (stage / "a.txt").write_text("a2\n")
    assert not (d / "b.txt").exists() and (d / "a.txt").read_text() == "a2\n"
    assert {k: v for k, v in _digest(d).items() if k not in ("a.txt", MANIFEST)} == \
        {k: v for k, v in before.items() if k != MANIFEST}
    assert json.loads((d / MANIFEST).read_text())["by"]["mine"] == ["a.txt"]


# ---------------------------------------------------------------------------
# Files cut short, invalid UTF-8, corrupt archives and downloads name the file
# ---------------------------------------------------------------------------


def _write_cfq_pre(folder, cut=None, bad_bytes=False):
    """A small preprocessed-CFQ folder (real lines); ``cut``: the file whose last line loses its newline."""
    folder.mkdir(parents=True, exist_ok=True)
    for stem in ("train", "dev", "test"):
        for kind in ("question", "query"):
            name = f"{stem}.{kind}.txt"
            data = "\n".join(_lines(CFQ_PRE / name)[:20]).encode() + b"\n"
            if name == cut:
                data = data[:-10]
            if bad_bytes and name == "dev.query.txt":
                data = data.replace(b"SELECT", b"SEL\xe9CT", 1)
            (folder / name).write_bytes(data)
    return folder


@needs_cfq
def test_cfq_query_cut_mid_line_and_invalid_utf8(tmp_path):
    d = _write_cfq_pre(tmp_path / "a", cut="test.query.txt")
    with pytest.raises(DataError, match=r"test\.query\.txt:20: a last line ending with a newline"):
        cfq.load_preprocessed(d)
    d = _write_cfq_pre(tmp_path / "b", bad_bytes=True)
    with pytest.raises(DataError, match=r"dev\.query\.txt:1: UTF-8 text"):
        cfq.load_preprocessed(d)


def test_cfq_corrupt_tarball_and_bad_utf8_json_name_the_file(tmp_path):
    from fairseq_compgen.data.io import ArchiveError

    tb = _tarball(tmp_path / "cfq.tar.gz")
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(tb.read_bytes()[: tb.stat().st_size // 2])
    with pytest.raises(ArchiveError, match=rf"{cut}: corrupt or truncated archive"):
        cfq.load_from_tarball(cut, ["mcd1"])
    bad = _tarball(tmp_path / "bad.tar.gz", raw=json.dumps(RECORDS).encode().replace(b"Did", b"D\xffd", 1))
    with pytest.raises(ValueError, match=r"dataset\.json: not UTF-8 text \(byte \d+ of the file, in JSON element 0\)"):
        cfq.load_from_tarball(bad, ["mcd1"])
    lacking = [dict(r) for r in RECORDS]
    del lacking[3]["sparqlPatternModEntities"]  # a bare KeyError before (found by an audit, 2026-11-28)
    with pytest.raises(UsageError, match=rf"^{tmp_path / 'lacks.tar.gz'}:cfq/dataset\.json: element 3: expected an "
                                         r"object with the string field 'sparqlPatternModEntities' \(CFQ 1\.1's "
                                         r"dataset\.json\), got no such string$"):
        cfq.load_from_tarball(_tarball(tmp_path / "lacks.tar.gz", records=lacking), ["mcd1"])
    (tmp_path / "splits").mkdir()
    (tmp_path / "splits" / "mcd1.json").write_bytes(b'{"trainIdxs": [0], "devIdxs": [1], "testIdxs": [2\xff]}')
    with pytest.raises(DataError, match=r"mcd1\.json:1: UTF-8 text"):
        cfq.load_from_dir(tmp_path, ["mcd1"])


@needs_pcfg
def test_pcfg_empty_target_without_validation_names_the_input(tmp_path):
    """With --no-validate an empty target is found when the text is written: it was named by the output folder,
    a path that did not exist (helper audit, 2026-11-29); now by the input files and the example (= line) number."""
    folder = tmp_path / "pcfgset" / "productivity"
    folder.mkdir(parents=True)
    for subset in ("train", "test"):
        (folder / f"{subset}.src").write_text("copy A B\nreverse A B\ncopy B\n")
        (folder / f"{subset}.tgt").write_text("A B\n\nB\n" if subset == "test" else "A B\nB A\nB\n")
    with pytest.raises(UsageError, match=rf"{re.escape(str(folder / 'test.src'))} / test\.tgt: example 2 of test "
                                         r"\(target\): empty after tokenization"):
        prep_module("pcfg").main(["--split", "productivity", "--out", str(tmp_path / "out"), "--pcfg-dir",
                                  str(tmp_path / "pcfgset"), "--no-validate", "--no-count-check"])


def test_pcfg_cut_mid_line(tmp_path):
    for ext in ("src", "tgt"):
        (tmp_path / f"t.{ext}").write_text("\n".join(_lines(PCFG_DIR / "pcfgset" / f"dev.{ext}")[:30]) + "\n")
    (tmp_path / "t.tgt").write_text((tmp_path / "t.tgt").read_text()[:-4])
    with pytest.raises(DataError, match=r"t\.tgt:30: a last line ending with a newline"):
        pcfg.read_pairs(tmp_path / "t.src", tmp_path / "t.tgt")


@needs_math
def test_math_cut_mid_line_and_invalid_utf8(tmp_path):
    p = tmp_path / "m.txt"
    p.write_text("\n".join(_lines(MATH_DIR / "interpolate" / "arithmetic__add_or_sub.txt")[:10]) + "\n")
    p.write_text(p.read_text()[:-2])
    with pytest.raises(DataError, match=r"m\.txt:10: a last line ending with a newline"):
        list(md.read_pairs(p))
    p.write_bytes(b"What is 1 + 1?\n2\nWhat is \xff?\n3\n")
    with pytest.raises(DataError, match=r"m\.txt:3: UTF-8 text"):
        list(md.read_pairs(p))


def test_math_corrupt_tarball_names_it(tmp_path):
    from fairseq_compgen.data.io import ArchiveError

    tb = tmp_path / "m.tar.gz"
    tb.write_bytes(b"<html>not found</html>\n")
    with pytest.raises(ArchiveError, match=rf"{tb}: corrupt or truncated archive"):
        md.extract_members(tb, tmp_path / "x", ["arithmetic__add_or_sub"])


@needs_cogs
def test_cogs_cut_mid_line_and_invalid_utf8(tmp_path):
    p = tmp_path / "dev.tsv"
    p.write_bytes((COGS_DIR / "dev.tsv").read_bytes()[:2000])  # cut inside a line
    with pytest.raises(DataError, match=r"dev\.tsv:\d+: "):
        cogs.read_tsv(p)
    p.write_bytes(b"A cat ran .\tcat ( x _ 1 )\tin_distribution\nA d\xf6g ran .\tdog ( x _ 1 )\tin_distribution\n")
    with pytest.raises(DataError, match=r"dev\.tsv:2: UTF-8 text"):
        cogs.read_tsv(p)


def test_download_refuses_a_corrupt_archive_and_a_corrupt_cached_copy(tmp_path, monkeypatch):
    """A download that is not an archive never enters the cache; a cached copy whose bytes changed since it
    was downloaded is refused with the advice to delete it (it used to be reused forever)."""
    from fairseq_compgen.data import download

    good = _tarball(tmp_path / "good.tar.gz").read_bytes()
    served = {"data": b"<html>rate limited</html>"}
    monkeypatch.setattr(download.urllib.request, "urlopen", lambda url, timeout=None: io.BytesIO(served["data"]))
    monkeypatch.setenv("FAIRSEQ_COMPGEN_CACHE", str(tmp_path / "cache"))
    cache = tmp_path / "cache" / "cfq"
    with pytest.raises(download.DownloadError, match=r"not a readable archive.*nothing was cached; .*--cfq"):
        cfq.download_tarball()
    assert not cache.exists() or not list(cache.iterdir())
    served["data"] = good
    tb = cfq.download_tarball()
    assert tb.read_bytes() == good and (cache / "cfq1.1.tar.gz.sha256").is_file()
    assert cfq.download_tarball() == tb  # reused
    tb.write_bytes(good[:-100])
    with pytest.raises(download.DownloadError, match=r"cfq1\.1\.tar\.gz: the cached download is corrupt.*delete"):
        cfq.download_tarball()
    record = (cache / "cfq1.1.tar.gz.sha256").read_text()
    (cache / "cfq1.1.tar.gz.sha256").write_text("")  # a disk that filled up: an IndexError before
    with pytest.raises(download.DownloadError, match=r"cfq1\.1\.tar\.gz\.sha256: expected the SHA-256 recorded when "
                                                     r"cfq1\.1\.tar\.gz was downloaded, found an empty file; delete"):
        cfq.download_tarball()
    (cache / "cfq1.1.tar.gz.sha256").write_text(record)
    from fairseq_compgen.data.io import ArchiveError

    (cache / "cfq1.1.tar.gz.sha256").unlink()  # a copy cached by an older version: no record
    with pytest.raises(ArchiveError, match=r"corrupt or truncated archive.*cached download: delete it"):
        cfq.load_from_tarball(tb, ["mcd1"])


# ------------------------------------------------------------------- line numbers that point at the right place
def test_math_error_in_an_answer_names_the_answer_line(tmp_path):
    """The position in a bad answer used to be reported at its question's line."""
    path = tmp_path / "m.txt"
    path.write_text("What is 1 + 1?\n2\nWhat is 2 + 2?\nfour_4\n")
    with pytest.raises(DataError, match=rf"{path}:4: expected no '_'.*got: 'four_4'"):
        list(md.tokenized_pairs([path]))


def test_count_mismatch_points_at_the_first_missing_line_of_the_shorter_file(tmp_path):
    from fairseq_compgen.data import flores

    (tmp_path / "train.ne").write_text("a\nb\nc\n")
    (tmp_path / "train.en").write_text("a\nb\n")
    with pytest.raises(DataError, match=rf"{tmp_path / 'train.en'}:3: expected as many lines as train.ne \(3\), got 2"):
        flores.read_train_dir(tmp_path, "ne", "en")


def test_flores_training_pairs_with_an_empty_side_are_left_out_and_counted(tmp_path, capsys):
    """They were dropped in silence (found by an audit, 2026-11-28)."""
    from fairseq_compgen.data import flores

    (tmp_path / "train.ne").write_text("a\n\nc\nd\n")
    (tmp_path / "train.en").write_text("A\nB\n \nD\n")
    assert flores.read_train_dir(tmp_path, "ne", "en") == [("a", "A"), ("d", "D")]
    assert capsys.readouterr().err == (f"flores: left out 2 of 4 training pairs of {tmp_path / 'train.ne'} and "
                                       f"train.en with an empty side (line 2, line 3)\n")


def test_an_empty_example_is_named_by_its_input_file_not_the_staging_folder(tmp_path):
    """The error named `.split.tmp-<pid>/train example 2` (found by an audit, 2026-11-28)."""
    from fairseq_compgen.data.binarize import prepare_split

    data = {"train": [("a b", "A B"), ("c", "  ")], "valid": [("a", "A")]}
    with pytest.raises(UsageError, match=rf"^{tmp_path / 'in.tsv'}: example 2 of train \(target\): empty after "
                                         r"tokenization$"):
        prepare_split("t", tmp_path / "split", data, binarize_data=False, sources={"train": str(tmp_path / "in.tsv")})
    with pytest.raises(UsageError, match=rf"^{tmp_path / 'split' / 'train'}: example 2 of train \(target\)"):
        prepare_split("t", tmp_path / "split", data, binarize_data=False)
    assert not list(tmp_path.iterdir()), "no staging folder left"


def test_cogs_tagging_error_names_the_tag_file_that_is_wrong(tmp_path):
    """A role line with the wrong number of tags used to be reported in the .parent file."""
    from fairseq_compgen.tasks.cogs_tagging import CogsTaggingConfig, CogsTaggingTask

    from fairseq_compgen.data import cogs_tagging as ct

    files = {"src": "A dog ran .", "lf": "x", "parent": "-1 -1 -1 -1", "role": "_ agent _", "category": "_ CNOUN VERB _",
             "noun_type": "_ _ _ _", "verb_name": "_ _ run _"}
    assert set(files) - {"src", "lf"} == set(ct.FIELDS)
    for name, line in files.items():
        (tmp_path / f"train.{name}").write_text(line + "\n")
    task = CogsTaggingTask.__new__(CogsTaggingTask)
    task.cfg = CogsTaggingConfig(data=str(tmp_path))
    task.datasets = {}
    with pytest.raises(DataError, match=rf"{tmp_path / 'train.role'}:1: 4 tags \(one per token"):
        task.load_dataset("train")
