"""One scorer registry (fairseq_compgen/scoring/__init__.py): a scorer added as one file of the scoring folder is
known to `fairseq-compgen score`, `fairseq-compgen eval`'s scoring, aggregate's default metric, the sweeps' and the
datasets' metric checks, with nothing else edited."""
import json
import sys
import textwrap

import pytest

from fairseq_compgen import cli, scoring
from fairseq_compgen.data import dataset
from fairseq_compgen.errors import UsageError
from fairseq_compgen.pipelines import aggregate, evaluate

TOY = '''
"""Toy scorer: the share of hypotheses as long as their reference (a test of the registry, no paper)."""
from fairseq_compgen.scoring import Scorer, register
from fairseq_compgen.scoring.exact_match import parse_generate_output


def main(argv):
    with open(argv[0], encoding="utf-8") as f:
        refs, hyps = parse_generate_output(f)
    same = sum(len(hyps[i]) == len(refs[i]) for i in refs)
    print(f"same length: {same}/{len(refs)}")
    return {"n": len(refs), "same_length": same / len(refs)}


register(Scorer(name="toy_length", key="same_length", label="same-length share", paper="none (a test)",
                help="share of hypotheses as long as their reference", main=main,
                eval_argv=lambda generated, data, subset, n: [str(generated)]))
'''

LOG = "S-0\ta b\nT-0\tA B\nH-0\t-0.1\tA C\nS-1\tc\nT-1\tC\nH-1\t-0.2\tC D\n"


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """toy_length.py in a folder that the scoring package also searches, as if it were in fairseq_compgen/scoring/."""
    folder = tmp_path / "more_scorers"
    folder.mkdir()
    (folder / "toy_length.py").write_text(textwrap.dedent(TOY), encoding="utf-8")
    monkeypatch.setattr(scoring, "__path__", [*scoring.__path__, str(folder)])
    yield
    scoring._REGISTRY.pop("toy_length", None)
    sys.modules.pop("fairseq_compgen.scoring.toy_length", None)


def test_the_four_scorers_are_registered():
    assert scoring.names()[:1] == ("exact_match",)
    assert {"exact_match", "bleu", "cfq_sparql", "comp"} <= set(scoring.names())
    assert {n: scoring.get(n).key for n in ("exact_match", "bleu", "cfq_sparql", "comp")} == {
        "exact_match": "accuracy", "bleu": "bleu", "cfq_sparql": "accuracy", "comp": "comp"}
    assert scoring.by_key("accuracy") is scoring.get("exact_match")  # the key cfq_sparql shares: exact_match's
    assert scoring.by_key("accuracy").logged_as == ("accuracy", "exact_match")
    with pytest.raises(UsageError, match=r"^--metric: metric 'blue' is not one of exact_match, bleu, cfq_sparql, comp"):
        scoring.get("blue", "--metric")


def test_a_scorer_in_one_file_is_used_everywhere(toy, tmp_path, capsys):
    assert "toy_length" in scoring.names()
    log = tmp_path / "gen.txt"
    log.write_text(LOG, encoding="utf-8")
    # fairseq-compgen score
    assert cli.main(["score", "toy_length", str(log)]) == 0
    assert "same length: 1/2" in capsys.readouterr().out
    assert cli.main(["score", "--help"]) == 0
    assert "toy_length" in capsys.readouterr().out
    # fairseq-compgen eval: its --metric and its scoring of a subset
    assert evaluate.parser().parse_args(["ck.pt", "data", "--metric", "toy_length"]).metric == "toy_length"
    result = evaluate.score("toy_length", log, tmp_path, "test", 2, tmp_path / "test.table.txt")
    assert result == {"n": 2, "same_length": 0.5}
    assert "same length: 1/2" in (tmp_path / "test.table.txt").read_text()
    # aggregate: the sweep's datasets' metric -> the key it tabulates
    assert aggregate.default_metric({"datasets": {"d": {"metric": "toy_length"}}}) == "same_length"
    # a dataset may declare it, and its binaries' dataset.json is read back
    dataset.Dataset(read=lambda args: {}, metric="toy_length")
    (tmp_path / "dataset.json").write_text(json.dumps({"dataset": "x", "metric": "toy_length"}))
    assert dataset.declared_metric(tmp_path) == "toy_length"


def test_an_unknown_metric_is_one_line_naming_where(tmp_path):
    with pytest.raises(UsageError, match=r"^Dataset\(metric=\.\.\.\): metric 'toy_length' is not one of"):
        dataset.Dataset(read=lambda args: {}, metric="toy_length")
    (tmp_path / "dataset.json").write_text(json.dumps({"dataset": "x", "metric": ["bleu"]}))
    with pytest.raises(UsageError, match=r"dataset\.json: metric \['bleu'\] is not one of exact_match"):
        dataset.declared_metric(tmp_path)
    with pytest.raises(UsageError, match="fairseq-compgen score: metric 'nope' is not one of"):
        cli.main(["score", "nope", "log"])


def test_two_files_cannot_register_one_name():
    def main(argv):
        return {}

    with pytest.raises(UsageError, match="scorer 'bleu' registered twice"):
        scoring.register(scoring.Scorer(name="bleu", key="b", label="b", paper="", help="", main=main,
                                        eval_argv=lambda *a: []))
    assert scoring.get("bleu").key == "bleu"
