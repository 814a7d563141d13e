"""pipelines/compare.py: the two-sided permutation test over seeds behind `fairseq-compgen aggregate --compare`,
checked against a direct enumeration of group labels, and the table aggregate writes with it."""
import random

import pytest

from fairseq_compgen.errors import UsageError
from fairseq_compgen.pipelines import aggregate, compare, export, pooling, tables
from test_pipelines import _fake_sweep


def slow_p(a, b):
    """Every assignment of the labels A/B to the pooled seeds with |A| = len(a), enumerated as bit masks: the share
    whose |mean(B) - mean(A)| is at least the observed one."""
    pooled, na = a + b, len(a)
    observed = abs(sum(b) / len(b) - sum(a) / na)
    hits = total = 0
    for mask in range(2 ** len(pooled)):
        group = [x for i, x in enumerate(pooled) if mask >> i & 1]
        if len(group) != na:
            continue
        rest = [x for i, x in enumerate(pooled) if not mask >> i & 1]
        total += 1
        hits += abs(sum(rest) / len(rest) - sum(group) / na) >= observed - 1e-12
    return hits / total


def test_permutation_p_by_hand_and_against_every_labelling():
    assert compare.permutation_p([1, 2, 3], [4, 5, 6]) == (pytest.approx(2 / 20), True)  # the two extreme splits
    assert compare.permutation_p([0.5, 0.5], [0.5, 0.5]) == (1.0, True)  # no difference: every split is as far
    five = [0.198, 0.096, 0.182, 0.191, 0.079], [0.851, 0.794, 0.665, 0.785, 0.686]  # Table 3 Trafo, Rel. Uni.
    assert compare.permutation_p(*five)[0] == pytest.approx(2 / 252)  # the smallest p five seeds against five allow
    rng = random.Random(1)
    for na, nb in [(2, 3), (3, 3), (4, 5), (5, 5), (1, 6)]:
        for _ in range(5):
            a = [round(rng.random(), 3) for _ in range(na)]
            b = [round(rng.random(), 3) for _ in range(nb)]
            p, exact = compare.permutation_p(a, b)
            assert exact and p == pytest.approx(slow_p(a, b)), (a, b)
            assert compare.permutation_p(b, a)[0] == pytest.approx(p)  # two-sided: symmetric
    with pytest.raises(ValueError, match="at least one value in each group"):
        compare.permutation_p([], [1.0])


def test_monte_carlo_beyond_the_exact_limit(monkeypatch):
    rng = random.Random(2)
    a = [rng.gauss(0.0, 1.0) for _ in range(6)]
    b = [rng.gauss(0.8, 1.0) for _ in range(6)]
    exact, is_exact = compare.permutation_p(a, b)
    assert is_exact
    monkeypatch.setattr(compare, "EXACT_LIMIT", 10)
    estimate, is_exact = compare.permutation_p(a, b)
    assert not is_exact and abs(estimate - exact) < 0.01  # 100,000 draws: standard error below 0.002
    assert compare.permutation_p(a, b) == (estimate, False)  # a fixed generator: the same estimate every time


def test_aggregate_compare_writes_the_table(tmp_path, capsys):
    _fake_sweep(tmp_path, {
        ("scan", "a"): {1: {"valid": 1.0, "gen": 0.10}, 2: {"valid": 1.0, "gen": 0.20}, 3: {"valid": 0.97, "gen": 0.60}},
        ("scan", "b"): {1: {"valid": 0.99, "gen": 0.50}, 2: {"valid": 0.98, "gen": 0.70}, 3: None},
    })
    assert aggregate.main([str(tmp_path), "--no-plots", "--compare", "a", "b", "--scale", "100", "--digits", "1"]) == 0
    table = (tmp_path / "compare_a_b.md").read_text()
    assert table in capsys.readouterr().out
    gen_p = slow_p([0.10, 0.20, 0.60], [0.50, 0.70])
    valid_p = slow_p([1.0, 1.0, 0.97], [0.99, 0.98])
    assert table.splitlines()[0] == ("| dataset: subset | a (seeds) | Big (seeds) | difference | p (two-sided "
                                     "permutation test over seeds) |")
    assert f"| SCAN: gen | 30.0 (3) | 60.0 (2) | +30.0 | {gen_p:.3f} |" in table
    assert f"| SCAN: valid | 99.0 (3) | 98.5 (2) | -0.5 | {valid_p:.3f} |" in table
    with pytest.raises(UsageError, match=r"--compare c: no such configuration in this sweep \(known: a, b\)"):
        aggregate.main([str(tmp_path), "--no-plots", "--compare", "a", "c", "--tables", str(tmp_path / "t")])
    assert not (tmp_path / "t").exists()  # a view that cannot be made stops the call before any table is written
    # exported with the tables
    aggregate.main([str(tmp_path), "--no-plots", "--compare", "a", "b", "--export", str(tmp_path / "exported")])
    assert (tmp_path / "exported" / "compare_a_b.md").read_text() == (tmp_path / "compare_a_b.md").read_text()


def test_no_common_dataset_is_one_line():
    cells = {("scan", "gen", "a"): pooling.Cell("scan", "gen", "a", 1, {1: 0.5}),
             ("cogs", "gen", "b"): pooling.Cell("cogs", "gen", "b", 1, {1: 0.5})}
    with pytest.raises(UsageError, match="--compare a b: no dataset where both have finished runs"):
        tables.comparison_table({}, cells, "a", "b")


def test_the_data_column_reads_data_json_or_the_campaigns_data_sha256(tmp_path):
    """One dataset's runs show one data hash whether they recorded data.json (fairseq-compgen train) or only the
    campaign's data.sha256, and whatever fairseq-preprocess's log said (it names the folder's path)."""
    import json

    from fairseq_compgen.pipelines.train import same_data_key

    _fake_sweep(tmp_path, {("scan", "a"): {1: {"gen": 0.1}, 2: {"gen": 0.2}, 3: {"gen": 0.3}}})
    files = {"dict.src.txt": "1" * 64, "train.src-tgt.src.bin": "2" * 64}
    (tmp_path / "scan/a/seed1/data.json").write_text(json.dumps(
        {"sha256": "x", "files": {**files, "preprocess.log": "3" * 64}}))
    (tmp_path / "scan/a/seed2/data.sha256").write_text(  # named from its state folder, as the first listings were
        "".join(f"{h}  scan/length_cutoff_26/bin/{n}\n" for n, h in {**files, "preprocess.log": "4" * 64}.items()))
    spec, runs, cells = pooling.collect(tmp_path)
    rows = tables.run_rows(runs, cells)
    key = same_data_key({"files": files})[:12]
    assert [r["data"] for r in rows] == [key, key, "not recorded"]
    (tmp_path / "scan/a/seed2/data.sha256").write_text(f"{'5' * 64}  dict.src.txt\n{'2' * 64}  train.src-tgt.src.bin\n")
    with pytest.raises(UsageError, match="were trained on different data for dataset 'scan'"):
        pooling.collect(tmp_path)


def test_the_machine_column_names_an_evaluation_made_elsewhere(tmp_path):
    """A run trained on a lent GPU and evaluated on CPU (eval/*.json's "evaluated"): the machine column says both;
    one evaluated where it trained, or before the field existed, names its training machine only."""
    import json

    _fake_sweep(tmp_path, {("scan", "a"): {1: {"gen": 0.1}, 2: {"gen": 0.2}}})
    gpu = {"host": "vm", "cpu": "Xeon", "cores": 16, "threads": 1, "gpu": "1 x H100", "torch": "2.11", "python": "3.12"}
    cpu = dict(gpu, cores=2, gpu=None)
    for seed, evaluated in ((1, cpu), (2, gpu)):
        run = tmp_path / f"scan/a/seed{seed}"
        (run / "machine.txt").write_text(json.dumps(gpu))
        result = run / "eval" / "gen.json"
        result.write_text(json.dumps(dict(json.loads(result.read_text()), evaluated={"machine": evaluated,
                                                                                      "seconds": 15.0})))
    spec, runs, cells = pooling.collect(tmp_path)
    machines = [row["machine"] for row in tables.run_rows(runs, cells)]
    assert machines == ["vm: Xeon, 16 cores, 1 threads, 1 x H100; evaluated on vm: Xeon, 2 cores, 1 threads, no GPU",
                        "vm: Xeon, 16 cores, 1 threads, 1 x H100"]


def test_aggregate_against_sets_another_sweeps_cells_beside_these_and_says_what_differs(tmp_path, capsys):
    """--against OTHER: the cells both sweeps have, every seed's value on each side, the permutation test over them,
    and the fairseq-train options in which the two sides' runs differ (the seed and paths aside)."""
    import json

    base = "fairseq-train data/bin --arch a --lr 1e-3 --max-update 50 --save-dir {folder} --seed {seed}"

    def command(extra):
        return lambda seed, folder: base.format(folder=folder, seed=seed) + extra

    there, here = tmp_path / "sorted", tmp_path / "random"
    _fake_sweep(there, {("scan", "a"): {s: {"valid": 1.0, "gen": g} for s, g in zip((1, 2, 3, 4), (.1, .2, .3, .4))},
                        ("scan", "b"): {1: {"gen": 0.5}}}, name="sorted", command=command(""))
    _fake_sweep(here, {("scan", "a"): {1: {"valid": 1.0, "gen": 0.6}, 2: {"valid": 0.9, "gen": 0.8}, 3: None},
                       ("scan", "c"): {1: {"gen": 0.9}}}, name="random", command=command(" --random-batches --lr 5e-4"))
    for folder in list(there.rglob("seed*")) + list(here.rglob("seed*")):  # the budget as trained
        if (folder / "done.json").is_file():
            (folder / "done.json").write_text(json.dumps({"num_updates": 50}))
    assert aggregate.main([str(here), "--no-plots", "--against", str(there), "--digits", "3"]) == 0
    table = (here / "against_sorted.md").read_text()
    assert table in capsys.readouterr().out
    lines = table.splitlines()
    assert lines[0] == ("| dataset: subset | configuration | there: sorted | here: random | difference (here - there) "
                        "| p (two-sided permutation test over seeds) | options that differ (there → here) |")
    differ = "`--lr` 1e-3 → 5e-4; `--random-batches` (absent) → on"
    p_gen = slow_p([.1, .2, .3, .4], [.6, .8])
    assert lines[2:] == [  # only a: b has no runs here, c none there
        f"| scan: valid | a | 1.000 ± 0.000 (s1 1.000, s2 1.000, s3 1.000, s4 1.000) | 0.950 ± 0.071 (2/3) "
        f"(s1 1.000, s2 0.900) | -0.050 | {slow_p([1.0] * 4, [1.0, 0.9]):.3f} | {differ} |",
        f"| scan: gen | a | 0.250 ± 0.129 (s1 0.100, s2 0.200, s3 0.300, s4 0.400) | 0.700 ± 0.141 (2/3) "
        f"(s1 0.600, s2 0.800) | +0.450 | {p_gen:.3f} | {differ} |"]
    # the same options on both sides: "none"; a run without command.txt: said, not guessed
    for folder in here.rglob("seed*"):
        if (folder / "command.txt").is_file():
            (folder / "command.txt").write_text(command("")(int(folder.name[4:]), folder))
    assert aggregate.main([str(here), "--no-plots", "--against", str(there)]) == 0
    assert (here / "against_sorted.md").read_text().splitlines()[2].endswith("| none |")
    (here / "scan/a/seed1/command.txt").unlink()
    (here / "scan/a/seed2/command.txt").unlink()
    assert aggregate.main([str(here), "--no-plots", "--against", str(there)]) == 0
    assert (here / "against_sorted.md").read_text().splitlines()[2].endswith("| not recorded (no command.txt) |")
    # recorded by an export, which writes the same table again from the export alone
    aggregate.main([str(here), "--no-plots", "--against", str(there), "--export", str(tmp_path / "exported")])
    record = json.loads((tmp_path / "exported" / "aggregate.json").read_text())
    assert record["options"][-2:] == ["--against", str(there)]
    assert (tmp_path / "exported" / "against_sorted.md").read_text() == (here / "against_sorted.md").read_text()
    assert "against_sorted.md" in [t.name for t in export.table_files(tmp_path / "exported")]
    assert aggregate.main([str(tmp_path / "exported"), "--no-plots", *record["options"], "--tables",
                           str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "against_sorted.md").read_text() == (here / "against_sorted.md").read_text()


def test_aggregate_against_refuses_other_data_the_same_sweep_and_nothing_in_common(tmp_path):
    import json

    there, here = tmp_path / "there", tmp_path / "here"
    _fake_sweep(there, {("scan", "a"): {1: {"gen": 0.1}}}, name="there")
    _fake_sweep(here, {("scan", "a"): {1: {"gen": 0.2}}, ("cogs", "z"): {1: {"gen": 0.3}}}, name="here")
    files = {"dict.src.txt": "1" * 64}
    (there / "scan/a/seed1/data.json").write_text(json.dumps({"files": files}))
    (here / "scan/a/seed1/data.json").write_text(json.dumps({"files": {"dict.src.txt": "2" * 64}}))
    with pytest.raises(UsageError, match=rf"--against {there}: dataset 'scan' was trained on other data there "
                                         r"\(sha256 [0-9a-f]{12}\) than here \([0-9a-f]{12}\): its cells cannot be "
                                         r"compared"):
        aggregate.main([str(here), "--no-plots", "--against", str(there), "--tables", str(tmp_path / "t")])
    assert not (tmp_path / "t").exists()  # refused before any table is written
    (here / "scan/a/seed1/data.json").write_text(json.dumps({"files": files}))
    assert aggregate.main([str(here), "--no-plots", "--against", str(there)]) == 0
    with pytest.raises(UsageError, match=r"the same sweep as .* \(here\): pool its folders instead"):
        aggregate.main([str(here), "--no-plots", "--against", str(here)])
    with pytest.raises(UsageError, match="a second folder of sweep there: give one"):
        aggregate.main([str(here), "--no-plots", "--against", str(there), "--against", str(there)])
    elsewhere = tmp_path / "elsewhere"
    _fake_sweep(elsewhere, {("scan", "q"): {1: {"gen": 0.1}}}, name="elsewhere")
    with pytest.raises(UsageError, match=r"no cell \(dataset, subset, configuration\) has finished runs both there "
                                         r"\(elsewhere\) and here \(here\)"):
        aggregate.main([str(here), "--no-plots", "--against", str(elsewhere)])


@pytest.mark.parametrize("done", ["5", "null", "[1]"])
def test_trained_options_name_a_done_json_that_is_no_object(done, tmp_path):
    """`5` or `null` in a run's done.json gave a TypeError traceback where aggregate compares runs' options (an
    audit, 2026-11-29); now the line that names the file, as everywhere done.json is read."""
    from fairseq_compgen.errors import UsageError
    from fairseq_compgen.pipelines import pooling

    (tmp_path / "command.txt").write_text("fairseq-train data --arch rel_uni_transformer --max-update 10\n")
    (tmp_path / "done.json").write_text(done)
    with pytest.raises(UsageError, match=rf"^{tmp_path / 'done.json'}: a JSON \w+, not an object: expected the JSON "
                                         r"object a sweep writes"):
        pooling.trained_options({"dir": str(tmp_path)})
    (tmp_path / "done.json").write_text('{"num_updates": 10}')
    assert pooling.trained_options({"dir": str(tmp_path)})["updates trained"] == 10
