"""Tests for the exact-match scorer of fairseq-generate output (the SCAN metric, Lake & Baroni 2018)."""

import json

import pytest

from fairseq_compgen.data.io import DataError
from fairseq_compgen.scoring.exact_match import (
    ScoringError,
    exact_match,
    main,
    score_generate_output,
)

# What fairseq-generate prints (stdout and stderr together), for 5 examples, printed out of order.
# id 0: correct; id 1: hypothesis is a prefix of the reference; id 2: hypothesis longer than the
# reference; id 3: correct (two beams printed, the first is correct); id 4: correct but the second
# beam is wrong (must not matter).
GENERATE_LOG = """\
2024-05-02 10:11:12 | INFO | fairseq_cli.generate | {'_name': None, 'common': {...}}
2024-05-02 10:11:12 | INFO | fairseq.tasks.translation | [src] dictionary: 24 types
2024-05-02 10:11:12 | INFO | fairseq.tasks.translation | [tgt] dictionary: 16 types
2024-05-02 10:11:13 | INFO | fairseq.data.data_utils | loaded 5 examples from: data-bin/test.src-tgt.src
2024-05-02 10:11:13 | INFO | fairseq_cli.generate | loading model(s) from checkpoints/checkpoint_best.pt
S-2\tjump twice
T-2\tI_JUMP I_JUMP
H-2\t-0.01874077133834362\tI_JUMP I_JUMP I_JUMP
D-2\t-0.01874077133834362\tI_JUMP I_JUMP I_JUMP
P-2\t-0.0108 -0.0059 -0.0497 -0.0086
S-0\twalk left
T-0\tI_TURN_LEFT I_WALK
H-0\t-0.005401611328125\tI_TURN_LEFT I_WALK
D-0\t-0.005401611328125\tI_TURN_LEFT I_WALK
P-0\t-0.0033 -0.0068 -0.0061
S-1\trun thrice after look
T-1\tI_LOOK I_RUN I_RUN I_RUN
H-1\t-0.3116283714771271\tI_LOOK I_RUN I_RUN
D-1\t-0.3116283714771271\tI_LOOK I_RUN I_RUN
P-1\t-0.0026 -0.0037 -0.0042 -1.2360
S-3\tturn left
T-3\tI_TURN_LEFT
H-3\t-0.0017\tI_TURN_LEFT
D-3\t-0.0017\tI_TURN_LEFT
P-3\t-0.0010 -0.0024
H-3\t-2.5311\tI_TURN_RIGHT
D-3\t-2.5311\tI_TURN_RIGHT
P-3\t-4.8002 -0.2620
S-4\tlook opposite right
T-4\tI_TURN_RIGHT I_TURN_RIGHT I_LOOK
H-4\t-0.0421\tI_TURN_RIGHT I_TURN_RIGHT I_LOOK
D-4\t-0.0421\tI_TURN_RIGHT I_TURN_RIGHT I_LOOK
P-4\t-0.0102 -0.0301 -0.0444 -0.0837
H-4\t-3.2\tI_TURN_RIGHT I_LOOK
D-4\t-3.2\tI_TURN_RIGHT I_LOOK
P-4\t-4.1 -2.2 -3.3
2024-05-02 10:11:14 | INFO | fairseq_cli.generate | NOTE: hypothesis and token scores are output in base 2
2024-05-02 10:11:14 | INFO | fairseq_cli.generate | Translated 5 sentences (19 tokens) in 0.4s (12.07 sentences/s, 45.87 tokens/s)
Generate test with beam=1: BLEU4 = 71.35, 88.2/78.6/70.0/62.5 (BP=0.970, ratio=0.970, syslen=17, reflen=19)
"""


def lines(text=GENERATE_LOG):
    return text.splitlines(keepends=True)


def test_exact_match():
    assert exact_match(["a", "b"], ["a", "b"])
    assert exact_match("a  b", "a b")
    assert not exact_match(["a"], ["a", "b"])  # prefix
    assert not exact_match(["a", "b", "b"], ["a", "b"])  # longer
    assert not exact_match(["b", "a"], ["a", "b"])
    assert not exact_match([], ["a"])
    assert exact_match([], [])


def test_counts():
    r = score_generate_output(lines())
    assert (r["n"], r["correct"]) == (5, 3)
    assert r["accuracy"] == pytest.approx(0.6)
    assert r["per_category"] == {}


def test_prefix_and_longer_are_wrong():
    only = [l for l in lines() if l.split("\t")[0].split("-")[-1] in ("1", "2")]
    r = score_generate_output(only)
    assert (r["n"], r["correct"]) == (2, 0)


def test_per_category():
    cats = ["short", "long", "short", "prim", "long"]
    r = score_generate_output(lines(), categories=cats)
    assert r["per_category"] == {
        "long": {"n": 2, "correct": 1, "accuracy": 0.5},
        "prim": {"n": 1, "correct": 1, "accuracy": 1.0},
        "short": {"n": 2, "correct": 1, "accuracy": 0.5},
    }
    assert (r["n"], r["correct"]) == (5, 3)


def test_per_length_counts_by_reference_tokens():
    """Reference lengths: id 3 has 1 token (right), ids 0 and 2 have 2 (0 right, 2 too long), id 4 has 3 (right),
    id 1 has 4 (a prefix: wrong); the hypothesis's own length never decides the group."""
    r = score_generate_output(lines())
    assert r["per_length"] == {
        "1": {"n": 1, "correct": 1, "accuracy": 1.0},
        "2": {"n": 2, "correct": 1, "accuracy": 0.5},
        "3": {"n": 1, "correct": 1, "accuracy": 1.0},
        "4": {"n": 1, "correct": 0, "accuracy": 0.0},
    }
    assert score_generate_output(lines(), categories=["a"] * 5)["per_length"] == r["per_length"]


def test_missing_hypothesis_names_the_id():
    text = "".join(l for l in lines() if not l.startswith("H-2\t"))
    with pytest.raises(ScoringError, match=r"no hypothesis \(H-\): 2$"):
        score_generate_output(lines(text))


def test_missing_reference_names_the_id():
    text = "".join(l for l in lines() if not l.startswith("T-4\t"))
    with pytest.raises(ScoringError, match=r"no reference \(T-\): 4$"):
        score_generate_output(lines(text))


def test_expected_count_and_categories_mismatch():
    with pytest.raises(ScoringError, match="5 examples scored, expected 6"):
        score_generate_output(lines(), expected_count=6)
    with pytest.raises(ScoringError, match="4 categories"):
        score_generate_output(lines(), categories=["a"] * 4)
    with pytest.raises(ScoringError, match="no T-/H- lines"):
        score_generate_output(["Generate test with beam=1: BLEU4 = 0.00\n"])


def test_duplicate_reference_and_bad_hypothesis_line():
    with pytest.raises(DataError, match=r":\d+: one T- line per id, but id 0"):
        score_generate_output(lines() + ["T-0\tI_WALK\n"])
    with pytest.raises(DataError, match=r"<generate output>:1: expected 'H-<id>"):
        score_generate_output(["H-0\tI_WALK\n", "T-0\tI_WALK\n"])


def test_empty_hypothesis_is_wrong():
    r = score_generate_output(["T-0\tI_WALK\n", "H-0\t-1.5\t\n"])
    assert (r["n"], r["correct"]) == (1, 0)


def test_cli(tmp_path, capsys):
    log = tmp_path / "generate-test.txt"
    log.write_text(GENERATE_LOG)
    cats = tmp_path / "cats.txt"
    cats.write_text("short\nlong\nshort\nprim\nlong\n")
    out = tmp_path / "res" / "acc.json"
    main([str(log), "--categories", str(cats), "--json", str(out), "--expected-count", "5"])
    result = json.loads(out.read_text())
    assert (result["n"], result["correct"]) == (5, 3)
    assert result["per_category"]["prim"] == {"n": 1, "correct": 1, "accuracy": 1.0}
    table = capsys.readouterr().out
    assert "overall" in table and "60.00%" in table and "short" in table
    assert [p.name for p in out.parent.iterdir()] == ["acc.json"]
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        main([str(tmp_path / "nope.txt")])
    with pytest.raises(ScoringError, match="expected 4"):
        main([str(log), "--expected-count", "4"])


def test_errors_lists_the_first_wrong_examples_by_id(tmp_path, capsys):
    """--errors N: after the table, the first N wrong examples by id (1: a prefix, 2: too long), each with its
    source, reference, first hypothesis and category; a negative N is a usage error."""
    from fairseq_compgen.errors import UsageError
    from fairseq_compgen.scoring.exact_match import format_errors

    assert format_errors(lines(), 5, ["a", "b", "c", "d", "e"]).splitlines() == [
        "wrong: 2 of 5; the first 2 by id",
        "  id 1 [b]", "    source:     run thrice after look", "    reference:  I_LOOK I_RUN I_RUN I_RUN",
        "    hypothesis: I_LOOK I_RUN I_RUN",
        "  id 2 [c]", "    source:     jump twice", "    reference:  I_JUMP I_JUMP",
        "    hypothesis: I_JUMP I_JUMP I_JUMP"]
    log = tmp_path / "generate.txt"
    log.write_text(GENERATE_LOG)
    main([str(log), "--errors", "1"])
    out = capsys.readouterr().out
    assert "wrong: 2 of 5; the first 1 by id\n  id 1\n    source:     run thrice after look\n" in out
    assert "id 2" not in out
    with pytest.raises(UsageError, match=r"^--errors -1: expected a number of examples >= 0$"):
        main([str(log), "--errors", "-1"])


# ---- BLEU (scoring/bleu.py) on hypotheses that partly match ---------------------------------------------------
BLEU_REFS = ["the cat sat on the mat.", "a quick brown fox jumps over the lazy dog",
             "there is a book on the table, I think"]
BLEU_HYPS = ["the cat sat on a mat.", "a quick fox jumps over the dog", "there is a book, I think"]  # shorter: BP < 1


@pytest.mark.parametrize("tokenized, tokenize", [(False, "13a"), (True, "none")])
def test_bleu_of_partial_matches_is_sacrebleus(tmp_path, tokenized, tokenize):
    """Hypotheses with some n-grams of their references and 5 words fewer in all (brevity penalty < 1): our score is
    sacrebleu's corpus_bleu with the same tokenization (13a by default; none with --tokenized), strictly between 0
    and 100, and not the score with the two sides swapped (no brevity penalty then, other precisions); read from a
    generate log printed out of order, each H- line is scored against its own T- line."""
    import sacrebleu

    from fairseq_compgen.scoring import bleu

    expected = sacrebleu.corpus_bleu(BLEU_HYPS, [BLEU_REFS], tokenize=tokenize)
    swapped = sacrebleu.corpus_bleu(BLEU_REFS, [BLEU_HYPS], tokenize=tokenize).score
    assert expected.bp < 1.0 and abs(expected.score - swapped) > 1.0  # BLEU is not symmetric here
    res = bleu.score(BLEU_HYPS, BLEU_REFS, tokenized=tokenized)
    assert round(res["bleu"], 2) == round(expected.score, 2) and 0.0 < res["bleu"] < 100.0
    assert res["n"] == 3 and f"tok:{tokenize}|" in res["signature"]
    log = tmp_path / "gen.txt"
    log.write_text("".join(f"T-{i}\t{BLEU_REFS[i]}\nH-{i}\t-0.5\t{BLEU_HYPS[i]}\n" for i in (2, 0, 1)))
    res = bleu.main([str(log), "--expected-count", "3", *(["--tokenized"] if tokenized else [])])
    assert round(res["bleu"], 2) == round(expected.score, 2)
