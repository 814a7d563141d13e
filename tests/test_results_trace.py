"""Every table that `fairseq-compgen aggregate --export` wrote under results/ is what its exported runs give: the
export alone, aggregated again with the options it recorded (its aggregate.json), writes the same tables byte for
byte. This is the trace a reviewer follows by hand from a number in docs/results.md to raw files, for every export at
once; it also checks the parts of the aggregator that only an export exercises (pooled plans carried as
sweep.<i>.<name>.json, a run folder named by two of them, train_metrics.log in place of train.log)."""
import json
import shutil
from pathlib import Path

import pytest

from fairseq_compgen.pipelines import aggregate

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
EXPORTS = sorted(p.parent for p in RESULTS.glob("*/aggregate.json"))


def test_every_exported_table_under_results_records_how_it_was_made():
    tables = sorted(p.parent for p in RESULTS.glob("*/sweep.json") if (p.parent / "table.csv").is_file())
    assert tables, "no exported tables under results/"
    assert [t.name for t in tables if t not in EXPORTS] == [], "exports without aggregate.json: export them again"


@pytest.mark.parametrize("folder", EXPORTS, ids=lambda p: p.name)
def test_an_export_writes_its_tables_again_from_its_own_files(folder, tmp_path, monkeypatch):
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("plots"))
    for table in aggregate.table_files(copy):  # written anew, not left over from the copy
        table.unlink()
    options = json.loads((folder / "aggregate.json").read_text())["options"]
    monkeypatch.chdir(ROOT)  # a --spec given as a sweep file's path is relative to the repository
    assert aggregate.main([str(copy), "--no-plots", *options]) == 0
    written = [p.name for p in aggregate.table_files(copy)]
    assert written == [p.name for p in aggregate.table_files(folder)]
    for name in written:
        assert (copy / name).read_text() == (folder / name).read_text(), f"results/{folder.name}/{name}"
