"""The aggregator tabulates any metric of the eval JSONs (--metric) and reads fairseq's train.log in both
--log-format simple and json (fairseq_compgen.pipelines.train_log).

tests/fixtures/fairseq_{json,simple}_log.txt are excerpts of two real runs, identical but for --log-format:
    fairseq-train TINY_SCAN_BIN --user-dir fairseq_compgen --task compgen --arch compgen_transformer_scan
        --encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 32 --decoder-embed-dim 32
        --encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 2 --decoder-attention-heads 2
        --optimizer adam --lr 3e-3 --batch-size 64 --max-update 150 --cpu --valid-subset valid,gen
        --validate-interval-updates 50 --validate-interval 1000 --num-workers 0 --data-buffer-size 0 --no-save
        --log-interval 25 --seed 1 --log-format json|simple
(TINY_SCAN_BIN: the 200/24/24 SCAN length-cutoff-26 sample of tests/test_pipelines.py's scan_bin fixture.)
"""
import csv
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from fairseq_compgen.errors import UsageError
from fairseq_compgen.pipelines import aggregate, curves, train_log
from fairseq_compgen.scoring import bleu

FIXTURES = Path(__file__).resolve().parent / "fixtures"
JSON_LOG = FIXTURES / "fairseq_json_log.txt"
SIMPLE_LOG = FIXTURES / "fairseq_simple_log.txt"
REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------------- train_log
def test_real_json_log_validations_per_subset_and_updates():
    records = train_log.validation_records(JSON_LOG)
    assert [(s, u) for s, u, _ in records] == [("valid", 50), ("gen", 50), ("valid", 150), ("gen", 150)]
    assert [stats["loss"] for _, _, stats in records] == [1.398, 1.076, 1.162, 0.901]
    assert [stats["accuracy"] for _, _, stats in records] == [0.0] * 4
    valid150 = records[2][2]
    assert valid150["best_loss"] == 1.162 and valid150["wpb"] == 290 and valid150["tf_accuracy"] == 0
    assert not {"epoch", "num_updates"} & set(valid150) and "best_loss" not in records[3][2]
    # the same run logged --log-format simple: the same validations
    assert train_log.validation_records(SIMPLE_LOG) == records
    assert [(r.kind, r.num_updates) for r in train_log.read_records(JSON_LOG)] == [
        ("train_inner", 50), ("valid", 50), ("valid", 50), ("train", 52),
        ("train_inner", 150), ("valid", 150), ("valid", 150), ("train", 150)]
    inner = train_log.read_records(JSON_LOG)[0]
    assert inner.stats["loss"] == 1.98 and inner.stats["lr"] == 0.003 and "update" not in inner.stats


def test_last_num_updates_in_either_format_and_mixed_files(tmp_path):
    assert train_log.last_num_updates(JSON_LOG) == 150 == train_log.last_num_updates(SIMPLE_LOG)
    # a simple run, then a resume logged as JSON that stopped after its epoch-13 summary: the last record counts
    json_lines = JSON_LOG.read_text().splitlines(keepends=True)
    first = json_lines[:json_lines.index(next(x for x in json_lines if '"train_num_updates": "52"' in x)) + 1]
    mixed = tmp_path / "train.log"
    mixed.write_text(SIMPLE_LOG.read_text() + "# 2026-01-01T00:00:00 sweep: bash scripts/train.sh ... num_updates 999\n"
                     + "".join(first))
    assert train_log.last_num_updates(mixed) == 52
    assert [(s, u) for s, u, _ in train_log.validation_records(mixed)] == [
        ("valid", 50), ("gen", 50), ("valid", 150), ("gen", 150), ("valid", 50), ("gen", 50)]
    assert train_log.last_num_updates(tmp_path / "missing.log") is None
    assert train_log.validation_records(tmp_path / "missing.log") == []
    # fairseq's clock (`wall`, not `train_wall`) of the last training summary, in either format
    assert train_log.train_wall(JSON_LOG) == 5 and train_log.train_wall(SIMPLE_LOG) == 3
    assert train_log.train_wall(tmp_path / "missing.log") is None
    # a resumed run: fairseq's clock starts again, so each invocation's last summary is added up (3 + 3 here);
    # invocations are told apart by the sweep's start line, or, without one, by the clock going back
    assert train_log.train_wall(mixed) == 3 + 3
    no_start = tmp_path / "no_start.log"
    no_start.write_text(JSON_LOG.read_text() + "".join(first))  # 5, then a new clock at 3
    assert train_log.train_wall(no_start) == 5 + 3
    started_only = tmp_path / "started.log"  # a second invocation stopped before its first summary: not counted
    started_only.write_text(JSON_LOG.read_text() + "# 2026-01-01T00:00:00 sweep: fairseq-compgen train ...\n")
    assert train_log.train_wall(started_only) == 5


def test_a_validated_subset_called_train_is_not_the_epoch_summary():
    # an epoch summary always has `wall`, a validation never does
    summary = train_log.parse_line('t | INFO | train | {"epoch": 1, "train_loss": "2", "train_num_updates": "4", '
                                   '"train_wall": "1"}')
    valid = train_log.parse_line('t | INFO | train | {"epoch": 1, "train_loss": "2", "train_num_updates": "4"}')
    assert (summary.kind, summary.subset, summary.epoch) == ("train", None, 1)
    assert (valid.kind, valid.subset, valid.num_updates, valid.stats) == ("valid", "train", 4, {"loss": 2.0})
    assert valid.epoch == 1
    simple = train_log.parse_line("t | INFO | train | epoch 012 | loss 3.965 | num_updates 4 | wall 1")
    assert (simple.kind, simple.epoch, simple.num_updates, simple.stats) == ("train", 12, 4, {"loss": 3.965, "wall": 1.0})
    assert train_log.parse_line('t | INFO | valid | {"epoch": 1, "valid_loss": "nan"}') is None  # no num_updates
    assert train_log.parse_line("t | INFO | fairseq_cli.train | {'_name': None}") is None


# ----------------------------------------------------------------------------------------------- aggregation
def _sweep(out: Path, results, logs=None):
    """results: {(dataset, config): {seed: {subset: writer(path) or None}}}: a sweep.json and finished runs whose
    eval/<subset>.json each writer writes; logs(dataset, config, seed): its train.log text."""
    runs = []
    for (d, c), seeds in results.items():
        for seed, subsets in seeds.items():
            folder = out / d / c / f"seed{seed}"
            (folder / "eval").mkdir(parents=True)
            runs.append({"dataset": d, "config": c, "seed": seed, "arch": "compgen_transformer", "dir": str(folder),
                         "subsets": None, "flags": []})
            for subset, write in subsets.items():
                write(folder / "eval" / f"{subset}.json")
            (folder / "done.json").write_text(json.dumps({"accuracy": {}}))
            if logs:
                (folder / "train.log").write_text(logs(d, c, seed))
    spec = {"name": "fake", "datasets": {"mt": {"label": "MT"}}, "configurations": {}}
    (out / "sweep.json").write_text(json.dumps({"spec": spec, "runs": runs}))


REFS = ["the cat sat on the mat near the door", "a dog ran fast across the big green field",
        "she reads a long book every night before bed", "we walked to the old market in the rain"]


def _bleu_of(hyps):
    """A writer of a real scoring/bleu.py JSON for these hypotheses of REFS."""
    def write(path: Path):
        gen = path.with_suffix(".generate.txt")
        gen.write_text("".join(f"S-{i}\tsrc {i}\nT-{i}\t{r}\nH-{i}\t-0.5\t{h}\n"
                               for i, (r, h) in enumerate(zip(REFS, hyps))))
        bleu.main([str(gen), "--json", str(path)])
    return write


def _worse(k):
    """REFS with the last k words of every sentence replaced."""
    return [" ".join(r.split()[:-k] + ["x"] * k) if k else r for r in REFS]


def test_aggregate_bleu_mean_std_best(tmp_path, capsys):
    _sweep(tmp_path, {("mt", "a"): {1: {"test": _bleu_of(_worse(1))}, 2: {"test": _bleu_of(_worse(3))}},
                      ("mt", "b"): {1: {"test": _bleu_of(_worse(0))}, 2: {"test": _bleu_of(_worse(2))}}})
    assert aggregate.main([str(tmp_path), "--metric", "bleu", "--best", "--no-plots"]) == 0
    rows = {r["configuration"]: r for r in csv.DictReader(open(tmp_path / "table.csv"))}
    md = (tmp_path / "table.md").read_text()
    for config in ("a", "b"):
        scores = [json.loads((tmp_path / "mt" / config / f"seed{s}" / "eval" / "test.json").read_text())["bleu"]
                  for s in (1, 2)]
        assert len(set(scores)) == 2 and all(0 < x < 100.001 for x in scores)
        row = rows[config]
        assert row["metric"] == "bleu" and row["subset"] == "test" and row["n"] == "2"
        assert float(row["mean"]) == pytest.approx(statistics.mean(scores))
        assert float(row["std"]) == pytest.approx(statistics.stdev(scores))
        assert row["values"] == f"1={scores[0]!r};2={scores[1]!r}"
        assert f"{statistics.mean(scores):.2f} ± {statistics.stdev(scores):.2f}" in md
    assert rows["b"]["best"] == "1" and rows["a"]["best"] == "0" and "| b | **" in md
    assert float(rows["b"]["mean"]) > float(rows["a"]["mean"])


def _exact_match(accuracy):
    def write(path: Path):
        path.write_text(json.dumps({"n": 10, "correct": round(accuracy * 10), "accuracy": accuracy,
                                    "per_category": {}}))
    return write


def test_a_run_without_the_metric_is_one_error_naming_the_file(tmp_path):
    _sweep(tmp_path, {("mt", "a"): {1: {"test": _bleu_of(REFS)}, 2: {"test": _exact_match(0.5)}}})
    bad = tmp_path / "mt" / "a" / "seed2" / "eval" / "test.json"
    with pytest.raises(UsageError) as e:
        aggregate.main([str(tmp_path), "--metric", "bleu", "--no-plots"])
    assert str(e.value) == f"{bad} has no numeric 'bleu' (--metric bleu); its keys: n, correct, accuracy, per_category"
    # from the command line: that line, no traceback
    p = subprocess.run([sys.executable, "-m", "fairseq_compgen.pipelines.aggregate", str(tmp_path), "--metric",
                        "comp", "--no-plots"], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines() == [
        f"fairseq_compgen: error: {tmp_path / 'mt' / 'a' / 'seed1' / 'eval' / 'test.json'} has no numeric 'comp' "
        "(--metric comp); its keys: bleu, detok, label, n, references, references_with_unk, sacrebleu_version, "
        "signature, str, subword"]


# ------------------------------------------------------------------------------------------- learning curves
def _json_validation(subset, updates, **stats):
    """A validation record as fairseq-train --log-format json writes it (see the fixture)."""
    record = {"epoch": 3, **{f"{subset}_{k}": f"{v:g}" for k, v in stats.items()},
              f"{subset}_num_updates": str(updates)}
    return f"2026-11-23 20:36:15 | INFO | {subset} | {json.dumps(record)}\n"


def test_learning_curves_from_json_logs(tmp_path, capsys):
    # the real log: any validated metric; accuracy is the compgen task's
    assert curves.learning_curves(JSON_LOG, "loss") == {"valid": {50: 1.398, 150: 1.162},
                                                           "gen": {50: 1.076, 150: 0.901}}
    assert curves.learning_curves(JSON_LOG) == {"valid": {50: 0.0, 150: 0.0}, "gen": {50: 0.0, 150: 0.0}}
    # the cogs_tagging task's exact_match is its accuracy
    tagging = tmp_path / "tagging.log"
    tagging.write_text(_json_validation("gen", 10, loss=1, exact_match=0.25))
    assert curves.learning_curves(tagging) == {"gen": {10: 0.25}}

    def log(dataset, config, seed):  # BLEU validations (a translation task's --eval-bleu), then a resume
        return (JSON_LOG.read_text() + _json_validation("valid", 100, loss=1, bleu=10 * seed)
                + _json_validation("valid", 200, loss=1, bleu=20 * seed) + "# sweep: resume\n"
                + _json_validation("valid", 200, loss=1, bleu=30 * seed))

    out = tmp_path / "out"
    out.mkdir()
    _sweep(out, {("mt", "a"): {1: {"test": _bleu_of(REFS)}, 2: {"test": _bleu_of(_worse(1))}}}, logs=log)
    run = out / "mt" / "a" / "seed2" / "train.log"
    assert curves.learning_curves(run, "bleu") == {"valid": {100: 20.0, 200: 60.0}}
    assert aggregate.main([str(out), "--metric", "bleu"]) == 0
    assert (out / "plots" / "mt.png").stat().st_size > 1000
    assert "no learning-curve plot" not in capsys.readouterr().err

    # logs without the metric: no plot, one message naming what the validations do log
    (out / "plots" / "mt.png").unlink()
    for seed in (1, 2):
        (out / "mt" / "a" / f"seed{seed}" / "train.log").write_text(JSON_LOG.read_text())
    assert aggregate.main([str(out), "--metric", "bleu"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert not (out / "plots" / "mt.png").exists()
    assert err == ["aggregate: no learning-curve plot for mt: no validation 'bleu' in the runs' train.log "
                   "(validations there log: accuracy, best_loss, bsz, loss, ppl, tf_accuracy, wpb, wps)"]


def test_learning_curves_average_finished_runs_only(tmp_path, monkeypatch):
    """A run under way (no done.json) is left out of the plotted curves as out of the tables: it was averaged in
    up to its update, so a curve could be a two-seed mean in one part and a one-seed mean in another, its legend
    saying neither (the sweep audit of 2026-11-29)."""
    out = tmp_path / "out"
    out.mkdir()

    def log(dataset, config, seed):
        return _json_validation("valid", 100, loss=1, accuracy=0.1 * seed)
    _sweep(out, {("mt", "a"): {1: {}, 2: {}}}, logs=log)
    (out / "mt" / "a" / "seed2" / "done.json").unlink()  # seed 2 under way
    plotted = []
    original = curves.learning_curves
    monkeypatch.setattr(curves, "learning_curves", lambda path, *a: plotted.append(Path(path).parent.name)
                        or original(path, *a))
    spec = {"datasets": {}, "configurations": {}}
    runs = [{"dataset": "mt", "config": "a", "seed": s, "dir": str(out / "mt" / "a" / f"seed{s}")} for s in (1, 2)]
    assert curves.plot_curves(spec, runs, tmp_path / "plots") and plotted == ["seed1"]


def test_export_keeps_the_metric_lines_of_a_json_log(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    _sweep(out, {("mt", "a"): {1: {"test": _exact_match(0.5)}}}, logs=lambda *_: JSON_LOG.read_text())
    assert aggregate.main([str(out), "--no-plots", "--export", str(tmp_path / "results")]) == 0
    kept = (tmp_path / "results" / "mt" / "a" / "seed1" / "train_metrics.log").read_text().splitlines()
    assert [line.split(" | ")[2] for line in kept] == ["valid", "gen", "train"] * 2  # no train_inner, no messages
    assert train_log.validation_records(tmp_path / "results" / "mt" / "a" / "seed1" / "train_metrics.log") == \
        train_log.validation_records(JSON_LOG)
