"""Every table that `fairseq-compgen aggregate --export` wrote under results/ is what its exported runs give: the
export alone, aggregated again with the options it recorded (its aggregate.json), writes the same tables byte for
byte. This is the trace a reviewer follows by hand from a number in docs/results.md to raw files, for every export at
once; it also checks the parts of the aggregator that only an export exercises (pooled plans carried as
sweep.<i>.<name>.json, a run folder named by two of them, train_metrics.log in place of train.log)."""
import csv
import json
import statistics
from pathlib import Path

import pytest

from fairseq_compgen.pipelines import aggregate, export

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
EXPORTS = sorted(p.parent for p in RESULTS.glob("*/aggregate.json"))


def test_every_exported_table_under_results_records_how_it_was_made():
    tables = sorted(p.parent for p in RESULTS.glob("*/sweep.json") if (p.parent / "table.csv").is_file())
    assert tables, "no exported tables under results/"
    assert [t.name for t in tables if t not in EXPORTS] == [], "exports without aggregate.json: export them again"


@pytest.mark.parametrize("folder", EXPORTS, ids=lambda p: p.name)
def test_an_export_writes_its_tables_again_from_its_own_files(folder, tmp_path, monkeypatch):
    options = json.loads((folder / "aggregate.json").read_text())["options"]
    before = {p: p.stat().st_mtime_ns for p in folder.rglob("*")}
    monkeypatch.chdir(ROOT)  # a --spec given as a sweep file's path is relative to the repository
    tables, again = tmp_path / "tables", tmp_path / "exported again"  # and an export of the export carries all too
    assert aggregate.main([str(folder), "--no-plots", *options, "--tables", str(tables), "--export", str(again)]) == 0
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*")} == before  # --tables: the folder read is left as is
    for table in export.table_files(again):
        table.unlink()
    assert aggregate.main([str(again), "--no-plots", *options]) == 0
    written = [p.name for p in export.table_files(tables)]
    assert written == [p.name for p in export.table_files(folder)] == [p.name for p in export.table_files(again)]
    for name in written:
        assert (tables / name).read_text() == (folder / name).read_text(), f"results/{folder.name}/{name}"
        assert (again / name).read_text() == (folder / name).read_text(), f"results/{folder.name}/{name}, again"


# ---- the README's headline cells against the exported tables ----------------------------------------------------
def exported(folder: str, dataset: str, subset: str, config: str) -> dict:
    """A cell of results/FOLDER/table.csv: its mean, std, values (in seed order), paper and verdict."""
    with open(RESULTS / folder / "table.csv", newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if (row["dataset"], row["subset"], row["configuration"]) == (dataset, subset, config):
                values = [float(v.split("=", 1)[1]) for v in row["values"].split(";")]
                return {"mean": float(row["mean"]), "std": float(row["std"]), "values": values, "n": int(row["n"]),
                        "verdict": row.get("verdict", "")}
    raise AssertionError(f"results/{folder}/table.csv has no cell {dataset}/{subset}/{config}")


def readme_row(starts: str) -> str:
    rows = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| " + starts)]
    assert len(rows) == 1, f"README.md: {len(rows)} table rows start with {starts!r}"
    return rows[0]


def mean_std(cell: dict, scale: float, digits: int) -> str:
    return f"{scale * cell['mean']:.{digits}f} ± {scale * cell['std']:.{digits}f}"


def seeds(cell: dict, scale: float, digits: int) -> str:
    return f"({cell['n']}: " + ", ".join(f"{scale * v:.{digits}f}" for v in cell["values"])


def value_and_seeds(cell: dict, scale: float, digits: int) -> str:
    """A cell as the README's rows at the paper's budget print it: one seed as "VALUE (1 seed: ...", more seeds as
    "MEAN ± STD (N: V1, V2, ...)"."""
    if cell["n"] == 1:
        return f"{scale * cell['mean']:.{digits}f} (1 seed: "
    return f"{mean_std(cell, scale, digits)} {seeds(cell, scale, digits)})"


TABLE12 = {7: "abs_small_2_absolute", 8: "abs_small_6_absolute", 9: "abs_small_2_relative", 10: "abs_small_6_relative",
           11: "abs_small_2_attention", 12: "abs_small_6_attention", 13: "rel_eb_small_2s_absolute",
           14: "rel_eb_small_6s_absolute", 15: "rel_eb_small_2s_relative", 16: "rel_eb_small_6s_relative",
           17: "rel_eb_small_2s_attention", 18: "rel_eb_small_6s_attention"}


@pytest.mark.parametrize("column", sorted(TABLE12))
def test_readme_table12_cells_are_the_exported_values(column):
    cell = exported("ontanon_table12", "cogs_tagging", "gen", TABLE12[column])
    row = readme_row(("Ontañón Table 12 " if column == 7 else "") + f"C{column} ")
    assert f"| {mean_std(cell, 1, 3)} ({cell['n']}) |" in row
    assert cell["verdict"] in ("inside", "outside") and f"| {cell['verdict']}" in row


def test_readme_campaign_cells_are_the_exported_values():
    """Each number of the campaign's headline rows: mean ± std and every seed's value, as the README prints them."""
    row = readme_row("Csordás Table 3, SCAN cutoff 26 (4 cells)")
    for label, config in [("Trafo", "trafo"), ("Uni.", "uni_trafo"), ("Rel.", "rel_trafo"), ("Rel. Uni.", "rel_uni_trafo")]:
        cell = exported("csordas_table3_5k", "scan", "gen", config)
        assert f"{label} {mean_std(cell, 1, 3)} {seeds(cell, 1, 3)})" in row, label
    cell = exported("csordas_table3_50k", "scan", "gen", "rel_uni_trafo")
    assert f"| {value_and_seeds(cell, 1, 4)}" in readme_row("Csordás Table 3, SCAN cutoff 26, Rel. Uni.")
    row = readme_row("Chaabouni Table 3, SCAN jump (%)")
    for label, config in [("Transformer", "transformer"), ("SAG + T5", "sag_t5")]:
        cell = exported("chaabouni_table3_jump", "jump", "test", config)
        assert f"{label} {mean_std(cell, 100, 1)} {seeds(cell, 100, 2)};" in row, label
    row = readme_row("Park & Kim Table 4, SCAN length, OOD (%)")
    iid = []
    for label, config in [("LT", "lt"), ("LT + L2 + orth", "lt_l2_orth")]:
        cell = exported("park_kim_table4_5k", "scan", "gen", config)
        assert f"{label} {mean_std(cell, 100, 1)} {seeds(cell, 100, 1)})" in row, label
        iid.append(mean_std(exported("park_kim_table4_5k", "scan", "valid", config), 100, 1))
    assert f"IID {iid[0]} / {iid[1]} |" in row
    row = readme_row("Park & Kim Table 4, SCAN length, at the paper's budget (%)")
    for label, config in [("LT", "lt"), ("LT + L2 + orth", "lt_l2_orth")]:
        gen, iid = (exported("park_kim_table4_50k", "scan", subset, config) for subset in ("gen", "valid"))
        assert f"{label} {value_and_seeds(gen, 100, 1)}" in row, label
        iid_text = f"{100 * iid['mean']:.1f}" if iid["n"] == 1 else f"{mean_std(iid, 100, 1)} {seeds(iid, 100, 1)})"
        assert f"IID {iid_text}" in row, label
        assert gen["verdict"] == "outside" and iid["verdict"] == "outside"
    cell = exported("russin_addjump", "add_jump", "test", "syntactic_attention")
    median = statistics.median(cell["values"])
    assert f"| mean {mean_std(cell, 100, 2)}, median {100 * median:.2f} ({cell['n']}) |" in readme_row("Russin add-jump")


def test_readme_positions_paragraph_is_the_exported_values():
    text = " ".join((ROOT / "README.md").read_text().split())
    start = text.index("### Beyond the papers")
    for label, config in [("Transformer-XL relative", "relative"), ("CoPE", "cope"), ("xPos", "xpos"), ("RoPE", "rope"),
                          ("sinusoidal", "sinusoidal"), ("learned absolute", "learned"), ("FIRE", "fire"),
                          ("ALiBi", "alibi")]:
        cell = exported("positions_length", "scan", "gen", config)
        assert f"{label} {mean_std(cell, 1, 3)}" in text[start:], label
    for label, config in [("Transformer-XL relative", "relative"), ("FIRE", "fire")]:  # Duplication's longer inputs
        cell = exported("positions_length", "dup", "test", config)
        assert f"{label} {mean_std(cell, 1, 3)}" in text[text.index("on Duplication's longer inputs", start):], label


def markdown_table(text: str, header: str) -> list:
    """The rows (lists of cell texts) of the markdown table whose header line starts with `header`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_results_md_positions_tables_are_the_exported_runs():
    """docs/results.md's Reverse and Duplication tables: every seed's value and each mean ± std, as the export
    of the positions table gives them (its runs.csv and table.csv; rows named by their first words)."""
    with open(RESULTS / "positions_length" / "runs.csv", newline="", encoding="utf-8") as f:
        runs = list(csv.DictReader(f))
    text = (ROOT / "docs" / "results.md").read_text()
    configs = [("sinusoidal", "sinusoidal"), ("learned absolute", "learned"), ("NoPE", "nope"), ("ALiBi", "alibi"),
               ("RoPE", "rope"), ("xPos", "xpos"), ("FIRE", "fire"), ("CoPE", "cope"),
               ("randomized RoPE", "random_rope"), ("relative", "relative"), ("Transformer-XL relative", "relative")]

    def config_of(label):
        return max((len(name), config) for name, config in configs if label.startswith(name))[1]

    def per_seed(dataset, config, subset):
        return [f"{float(r[subset]):.3f}" for r in runs if (r["dataset"], r["configuration"]) == (dataset, config)]

    reverse = markdown_table(text, "| encoding | Reverse valid |")
    dup = markdown_table(text, "| encoding | seed 1 | seed 2 | seed 3 |")
    assert len(reverse) == len(dup) == 10
    for row in reverse:
        config = config_of(row[0])
        assert row[1] == mean_std(exported("positions_length", "reverse", "valid", config), 1, 3), row[0]
        assert row[2] == ", ".join(per_seed("reverse", config, "test")), row[0]
        assert row[3] == mean_std(exported("positions_length", "reverse", "test", config), 1, 3), row[0]
    for row in dup:
        config = config_of(row[0])
        assert row[1:4] == [f"{v} / {t}" for v, t in zip(per_seed("dup", config, "valid"), per_seed("dup", config, "test"))], row[0]
        assert row[4].startswith(mean_std(exported("positions_length", "dup", "test", config), 1, 3)), row[0]


def test_a_pooled_export_keeps_the_plan_each_run_was_made_by_and_exports_where_it_reads(tmp_path):
    """Two folders of one sweep plan the same run differently (folder a: valid only, unfinished there; folder b:
    valid and gen, finished, with no settings in its done.json to tell which plan made it): the export records b's
    plan for it, so the export alone gives both columns again. An export into a folder it reads, or into --tables,
    writes in place; a view an earlier call left there, which these options would not write, is removed."""
    from test_pipelines import _fake_sweep

    a, b = tmp_path / "a", tmp_path / "b"
    _fake_sweep(a, {("scan", "x"): {1: None}})
    _fake_sweep(b, {("scan", "x"): {1: {"valid": 1.0, "gen": 0.25}}},
                command=lambda seed, folder: f"fairseq-train DATA --arch compgen_transformer --seed {seed}\n")
    for folder, subsets in ((a, ["valid"]), (b, ["valid", "gen"])):
        plan = json.loads((folder / "sweep.json").read_text())
        plan["runs"][0]["subsets"] = subsets
        (folder / "sweep.json").write_text(json.dumps(plan))
    dest = tmp_path / "export"
    assert aggregate.main([str(a), str(b), "--no-plots", "--export", str(dest)]) == 0
    assert json.loads((dest / "aggregate.json").read_text())["plans"] == {"scan/x/seed1": "sweep.2.b.json"}
    first = (a / "table.csv").read_text()
    assert "scan,gen,x" in first
    assert aggregate.main([str(dest), "--no-plots", "--tables", str(tmp_path / "t")]) == 0
    assert (tmp_path / "t" / "table.csv").read_text() == first
    # in place: DEST is the folder read, then --tables and DEST are one folder; a stale view of an earlier call
    # (listed in its record) goes, a file of the user named like a view stays
    record = json.loads((dest / "aggregate.json").read_text())
    assert record["files"] == ["aggregate.json", "runs.csv", "runs.md", "sweep.2.b.json", "sweep.json", "table.csv",
                               "table.md"]
    (dest / "aggregate.json").write_text(json.dumps({**record, "files": record["files"] + ["by_length_gen.md"]}))
    mine = {"compare_my_notes.md": "mine\n"}
    for name, text in {"by_length_gen.md": "a view of an earlier call\n", **mine}.items():
        (dest / name).write_text(text)
    assert aggregate.main([str(dest), "--no-plots", "--export", str(dest)]) == 0
    assert not (dest / "by_length_gen.md").exists() and (dest / "table.csv").read_text() == first
    assert {name: (dest / name).read_text() for name in mine} == mine
    for name in mine:
        (dest / name).unlink()
    both = tmp_path / "both"
    assert aggregate.main([str(dest), "--no-plots", "--tables", str(both), "--export", str(both)]) == 0
    assert (both / "table.csv").read_text() == first
    assert json.loads((both / "aggregate.json").read_text())["plans"] == {"scan/x/seed1": "sweep.2.b.json"}
