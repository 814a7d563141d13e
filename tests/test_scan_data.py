"""Tests for the SCAN generator, reader, splits and data-prep (Lake & Baroni 2018; Csordás et al. 2021).

The official files are read from the ``shared/data/scan`` folder next to the
repository checkout (no network access).
"""

import hashlib
from collections import Counter
from pathlib import Path

import pytest

from fairseq_compgen.data.io import DataError, atomic_write_lines
from fairseq_compgen.data.scan import (
    CUTOFF_LENGTHS,
    OFFICIAL_SPLITS,
    build_split,
    generate_all,
    interpret,
    output_length,
    read_scan_file,
    split_names,
)
from fairseq_compgen.prep import module as prep_module

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
SCAN_DIR = SHARED_DATA / "scan"

needs_scan = pytest.mark.skipif(
    not (SCAN_DIR / "tasks.txt").is_file(),
    reason=f"official SCAN files not found at {SCAN_DIR} (expected shared/ as a sibling of the repo checkout)",
)


@pytest.fixture(scope="module")
def generated():
    return generate_all()


@pytest.fixture(scope="module")
def official_all():
    return read_scan_file(SCAN_DIR / "tasks.txt")


def _official(rel):
    return Counter(read_scan_file(SCAN_DIR / rel))


@needs_scan
def test_generated_equals_official_tasks(generated, official_all):
    assert len(generated) == 20910
    assert len(set(generated)) == 20910
    assert len(official_all) == 20910
    assert Counter(generated) == Counter(official_all)


@needs_scan
def test_interpret_agrees_with_every_official_line(official_all):
    wrong = [(c, a) for c, a in official_all if interpret(c) != a]
    assert wrong == []


def test_generate_all_is_deterministic(generated):
    assert generate_all() == generated


def test_interpret_semantics():
    assert interpret("jump") == "I_JUMP"
    assert interpret("turn left") == "I_TURN_LEFT"
    assert interpret("walk opposite right") == "I_TURN_RIGHT I_TURN_RIGHT I_WALK"
    assert interpret("turn around left") == " ".join(["I_TURN_LEFT"] * 4)
    assert interpret("look around right") == " ".join(["I_TURN_RIGHT I_LOOK"] * 4)
    assert interpret("jump twice after run left") == "I_TURN_LEFT I_RUN I_JUMP I_JUMP"
    assert interpret("jump twice and run left") == "I_JUMP I_JUMP I_TURN_LEFT I_RUN"


@pytest.mark.parametrize(
    "bad",
    ["", "fly", "jump jump", "turn", "jump left twice twice", "walk and run and look", "jump opposite",
     "walk sideways left", "jump after", "twice"],
)
def test_interpret_rejects_non_commands(bad):
    with pytest.raises(ValueError, match="not a SCAN command"):
        interpret(bad)


@needs_scan
def test_length_split_equals_official():
    s = build_split("length")
    assert set(s) == {"train", "test"}
    assert len(s["train"]) == 16990 and len(s["test"]) == 3920
    assert Counter(s["train"]) == _official("length_split/tasks_train_length.txt")
    assert Counter(s["test"]) == _official("length_split/tasks_test_length.txt")


@needs_scan
def test_addprim_jump_equals_official():
    s = build_split("addprim_jump")
    assert len(s["train"]) == 14670 and len(s["test"]) == 7706
    assert Counter(s["train"])[("jump", "I_JUMP")] == 1467
    assert Counter(s["train"]) == _official("add_prim_split/tasks_train_addprim_jump.txt")
    assert Counter(s["test"]) == _official("add_prim_split/tasks_test_addprim_jump.txt")


def test_addprim_turn_left_rule():
    s = build_split("addprim_turn_left")
    bare = ("turn left", "I_TURN_LEFT")
    train = Counter(s["train"])
    # 19,701 commands without "turn left" + 2,189 copies (10% of 21,890); official sizes 21,890 / 1,208
    assert train[bare] == 2189
    assert len(s["train"]) == 21890 and len(s["test"]) == 1208
    assert all("turn left" not in c for c, _ in s["train"] if (c, _) != bare)
    assert all("turn left" in c and c != "turn left" for c, _ in s["test"])
    # "turn opposite left" / "turn around left" do not contain the primitive "turn left"
    assert ("turn opposite left", "I_TURN_LEFT I_TURN_LEFT") in train


def test_length_cutoff_26():
    s = build_split("length_cutoff_26")
    assert set(s) == {"train", "valid", "gen"}
    assert (len(s["train"]), len(s["valid"]), len(s["gen"])) == (16458, 1828, 2624)
    sets = {k: set(v) for k, v in s.items()}
    assert all(len(sets[k]) == len(s[k]) for k in s)
    assert not (sets["train"] & sets["valid"]) and not (sets["train"] & sets["gen"]) and not (sets["valid"] & sets["gen"])
    assert sets["train"] | sets["valid"] | sets["gen"] == set(generate_all())
    assert max(output_length(a) for _, a in s["train"] + s["valid"]) == 26
    assert min(output_length(a) for _, a in s["gen"]) == 27
    assert build_split("length_cutoff_26") == s  # seeded


@pytest.mark.parametrize("cutoff", CUTOFF_LENGTHS)
def test_length_cutoffs_partition(cutoff):
    s = build_split(f"length_cutoff_{cutoff}")
    n_short = len(s["train"]) + len(s["valid"])
    assert len(s["valid"]) == int(0.1 * n_short)
    assert n_short + len(s["gen"]) == 20910


def test_unknown_split_is_an_error():
    with pytest.raises(ValueError, match="unknown SCAN split"):
        build_split("nonsense")
    with pytest.raises(ValueError, match="unknown cutoff"):
        build_split("length_cutoff_23")


def test_malformed_line_names_file_and_line(tmp_path):
    good = "IN: jump OUT: I_JUMP"
    for bad in ["jump I_JUMP", "IN:  OUT: I_JUMP", "IN: jump OUT: ", "", "IN: jump"]:
        path = tmp_path / "bad.txt"
        atomic_write_lines(path, [good, good, bad, good])
        with pytest.raises(DataError) as e:
            read_scan_file(path)
        assert f"{path}:3: expected 'IN: <command> OUT: <actions>'" in str(e.value)
        assert e.value.lineno == 3


def test_trailing_empty_lines_are_fine(tmp_path):
    path = tmp_path / "ok.txt"
    path.write_text("IN: jump OUT: I_JUMP\nIN: walk twice OUT: I_WALK I_WALK\n\n\n")
    assert read_scan_file(path) == [("jump", "I_JUMP"), ("walk twice", "I_WALK I_WALK")]


def test_long_bad_line_is_truncated(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("x" * 500 + "\n")
    with pytest.raises(DataError) as e:
        read_scan_file(path)
    assert str(e.value).startswith(f"{path}:1: expected")
    assert "x" * 80 in str(e.value) and "x" * 81 not in str(e.value)


def test_missing_file_names_it(tmp_path):
    path = tmp_path / "nope.txt"
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        read_scan_file(path)
    with pytest.raises(FileNotFoundError, match=r"around_right.*tasks_train_template_around_right.txt"):
        build_split("around_right", scan_dir=tmp_path)


def test_download_goes_through_a_temp_name_and_fails_clearly(tmp_path, monkeypatch):
    """No network in tests: urlopen is replaced."""
    import io
    import urllib.error

    from fairseq_compgen.data import download, scan

    def fake_urlopen(url, timeout=None):
        assert url.startswith(scan.SCAN_RAW_URL + "template_split/")
        return io.BytesIO(b"IN: jump OUT: I_JUMP\nIN: walk right OUT: I_TURN_RIGHT I_WALK\n")

    monkeypatch.setattr(download.urllib.request, "urlopen", fake_urlopen)
    s = build_split("opposite_right", cache_dir=tmp_path)
    assert s["train"] == s["test"] == [("jump", "I_JUMP"), ("walk right", "I_TURN_RIGHT I_WALK")]
    files = sorted(p.name for p in (tmp_path / "template_split").iterdir())
    assert files == ["tasks_test_template_opposite_right.txt", "tasks_test_template_opposite_right.txt.sha256",
                     "tasks_train_template_opposite_right.txt", "tasks_train_template_opposite_right.txt.sha256"]

    def no_network(url, timeout=None):
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr(download.urllib.request, "urlopen", no_network)
    with pytest.raises(RuntimeError, match=r"could not download .*tasks_train_template_right.txt.*--scan-dir"):
        build_split("right", cache_dir=tmp_path / "empty")
    assert not list((tmp_path / "empty").rglob("*.txt*")), "no partial file may be left"


@needs_scan
def test_official_splits_from_local_dir():
    s = build_split("around_right", scan_dir=SCAN_DIR)
    assert (len(s["train"]), len(s["test"])) == (15225, 4476)
    assert all("around right" in c for c, _ in s["test"])
    s = build_split("simple", scan_dir=SCAN_DIR)
    assert Counter(s["train"] + s["test"]) == Counter(generate_all())


# ---------------------------------------------------------------------------
# fairseq-compgen prep scan (fairseq_compgen/data/scan.py)
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prep():
    return prep_module("scan")


def _lines(path):
    return path.read_text().split("\n")[:-1]


def _digest(folder):
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "preprocess.log"
    }


def test_data_prep_length_cutoff_26(prep, tmp_path, capsys):
    out = tmp_path / "scan"
    summary = prep.main(["--split", "length_cutoff_26", "--out", str(out)])["length_cutoff_26"]
    d = out / "length_cutoff_26"
    expected = {"train": 16458, "valid": 1828, "gen": 2624}
    for subset, n in expected.items():
        src, tgt = _lines(d / f"{subset}.src"), _lines(d / f"{subset}.tgt")
        assert len(src) == len(tgt) == n
        assert all(interpret(c) == a for c, a in zip(src, tgt))
        assert summary[subset]["n_in"] == summary[subset]["n_out"] == n
        for lang in ("src", "tgt"):
            for ext in ("bin", "idx"):
                assert (d / "bin" / f"{subset}.src-tgt.{lang}.{ext}").is_file()
    assert summary["train"]["unk_src"] == summary["train"]["unk_tgt"] == 0
    assert summary["gen"]["unk_src"] == summary["gen"]["unk_tgt"] == 0
    assert summary["_vocab"] == {"src": 13, "tgt": 6}
    assert len(_lines(d / "bin" / "dict.src.txt")) == 13
    assert len(_lines(d / "bin" / "dict.tgt.txt")) == 6
    assert not list((d / "bin").glob("test*")), "fairseq's test.* files must be renamed"
    printed = capsys.readouterr().out
    assert "gen" in printed and "2624" in printed

    before = _digest(d)
    prep.main(["--split", "length_cutoff_26", "--out", str(out)])
    assert _digest(d) == before
    assert sorted(p.name for p in d.iterdir()) == sorted(
        [f"{s}.{l}" for s in expected for l in ("src", "tgt")] + ["bin", ".prep-files.json"]
    ), "no temporary files may be left behind"


def test_data_prep_no_binarize_joined(prep, tmp_path):
    out = tmp_path / "scan"
    prep.main(["--split", "addprim_jump", "--out", str(out), "--no-binarize"])
    d = out / "addprim_jump"
    assert len(_lines(d / "train.src")) == 14670 and len(_lines(d / "test.tgt")) == 7706
    assert not (d / "bin").exists()


@needs_scan
def test_data_prep_official_around_right(prep, tmp_path):
    out = tmp_path / "scan"
    summary = prep.main(
        ["--split", "around_right", "--out", str(out), "--scan-dir", str(SCAN_DIR), "--joined-dictionary"]
    )["around_right"]
    d = out / "around_right"
    assert len(_lines(d / "train.src")) == 15225 and len(_lines(d / "test.src")) == 4476
    assert summary["test"]["n_out"] == 4476 and summary["test"]["unk_src"] == 0
    assert summary["_vocab"] == {"src": 19, "tgt": 19}  # joined: 13 + 6 words
    for subset in ("train", "test"):
        assert (d / "bin" / f"{subset}.src-tgt.src.bin").is_file()


@needs_scan
def test_declared_counts_are_the_release_files_and_the_rules():
    """DECLARED_COUNTS are the line counts of the release's split files (those in the local copy), and the
    rule-based splits generate exactly them (cutoff 26: Csordás et al.'s Table 10)."""
    from fairseq_compgen.data.scan import DECLARED_COUNTS, declared_counts

    checked = 0
    for split, files in OFFICIAL_SPLITS.items():
        declared = declared_counts(split)
        if declared is None or not all((SCAN_DIR / rel).is_file() for rel in files.values()):
            continue
        assert {k: len(read_scan_file(SCAN_DIR / rel)) for k, rel in files.items()} == declared, split
        checked += 1
    assert checked >= 4  # simple, length, addprim_jump, around_right (the local copy has no turn_left files)
    for split in ("length", "addprim_jump", "addprim_turn_left", "length_cutoff_26"):
        assert {k: len(v) for k, v in build_split(split).items()} == declared_counts(split), split
    assert set(DECLARED_COUNTS) <= {s[len("official_"):] if s.startswith("official_") else s for s in split_names()}


@needs_scan
def test_prep_refuses_a_release_file_of_another_size(prep, tmp_path):
    from fairseq_compgen.data.binarize import CountMismatch

    d, train = _around_right_copy(tmp_path)
    args = ["--split", "around_right", "--out", str(tmp_path / "out"), "--scan-dir", str(d), "--no-binarize"]
    with pytest.raises(CountMismatch, match=r"train.*300.*15,?225.*--no-count-check"):
        prep.main(args)
    assert not (tmp_path / "out" / "around_right").exists()
    prep.main(args + ["--no-count-check"])
    assert len(_lines(tmp_path / "out" / "around_right" / "train.src")) == 300


def test_data_prep_rejects_unknown_split(prep, tmp_path):
    with pytest.raises(SystemExit):
        prep.main(["--split", "bogus", "--out", str(tmp_path)])


# ---------------------------------------------------------------------------
# Official files checked by the interpreter, empty subsets, one-line errors
# ---------------------------------------------------------------------------


def _around_right_copy(tmp_path, edit_line=None, new_line=None):
    """A copy of the official around_right split (train cut to 300 lines) with line ``edit_line`` replaced."""
    d = tmp_path / "scan"
    for rel in ("template_split/tasks_train_template_around_right.txt",
                "template_split/tasks_test_template_around_right.txt"):
        lines = (SCAN_DIR / rel).read_text().split("\n")[:300]
        if edit_line is not None and "train" in rel:
            lines[edit_line - 1] = new_line
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text("\n".join(lines) + "\n")
    return d, d / "template_split/tasks_train_template_around_right.txt"


@needs_scan
@pytest.mark.parametrize("bad, why", [
    ("IN: jump twice OUT: I_JUMP I_JU", "actions that the SCAN grammar gives"),     # cut mid-word
    ("IN: jump quickly OUT: I_JUMP", "a command of the SCAN grammar"),  # outside the grammar
])
def test_official_lines_are_checked_by_the_interpreter(tmp_path, bad, why):
    d, train = _around_right_copy(tmp_path, 7, bad)
    with pytest.raises(DataError, match=rf"{train}:7: {why}"):
        build_split("around_right", scan_dir=d)


@needs_scan
def test_official_file_cut_short_is_an_error(tmp_path):
    d, train = _around_right_copy(tmp_path)
    train.write_text(train.read_text()[:-1])
    with pytest.raises(DataError, match=rf"{train}:300: a last line ending with a newline"):
        build_split("around_right", scan_dir=d)


@needs_scan
def test_empty_official_train_file_is_refused_and_old_outputs_kept(prep, tmp_path):
    from fairseq_compgen.data.binarize import EmptySubset

    d, train = _around_right_copy(tmp_path)
    out = tmp_path / "out"
    cut = ["--split", "around_right", "--out", str(out), "--scan-dir", str(d), "--no-binarize", "--no-count-check"]
    prep.main(cut)  # a 300-line copy: not the release's counts, accepted when said
    before = _digest(out / "around_right")
    train.write_text("")
    with pytest.raises(EmptySubset, match="train has 0 examples"):
        prep.main(cut)
    assert _digest(out / "around_right") == before and sorted(p.name for p in out.iterdir()) == ["around_right"]


@needs_scan
def test_data_prep_error_is_one_line(tmp_path):
    """A misuse prints `fairseq_compgen: error: file:line: ...` and nothing else, exit status 1."""
    import subprocess
    import sys

    d, train = _around_right_copy(tmp_path)
    train.write_bytes(train.read_bytes().replace(b"jump", b"j\xffmp", 1))
    p = subprocess.run([sys.executable, "-m", "fairseq_compgen.cli", "prep", "scan", "--split", "around_right", "--out",
                        str(tmp_path / "out"), "--scan-dir", str(d)], capture_output=True, text=True, cwd=REPO)
    err = [line for line in p.stderr.splitlines() if not line.startswith("INFO:")]  # fairseq's import chatter
    assert p.returncode == 1 and len(err) == 1, p.stderr
    assert err[0].startswith(f"fairseq_compgen: error: {train}:") and "UTF-8" in err[0]
