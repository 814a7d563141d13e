"""Turn a sweep's results into the papers' tables and plots.

    fairseq-compgen aggregate OUT [OUT ...] [--metric accuracy] [--best] [--scale 100] [--digits 2]
        [--transpose] [--tables DIR] [--markdown FILE] [--csv FILE] [--plots DIR | --no-plots] [--t5-biases]
        [--categories SUBSET] [--by-length SUBSET] [--early-stopping SUBSET] [--compare A B] [--against OTHER]
        [--export results/NAME]

OUT is a sweep's output folder (with the sweep.json the runner writes). Several OUTs of the same sweep (seeds run
on other machines or days, into other folders) are pooled: each planned run counts once, from the folder where it
finished; a run finished in two folders is an error, and so are finished runs of one cell whose fairseq-train
options (command.txt, apart from RUN_SPECIFIC: --seed, --save-dir, --user-dir, the logging options, --cpu,
--num-workers; and the data folder's path) differ. The tables and plots go to the first OUT, or with ``--tables DIR``
to DIR (the folders read are then left as they are, e.g. runs committed under results/).

Every finished run (done.json) contributes the value of ``--metric`` (default: the sweep's datasets' metric,
``accuracy`` for exact match) of each evaluated subset, read from its eval/<subset>.json (from the last
checkpoint): any numeric key works -- ``accuracy`` (exact match, scoring/exact_match.py, also the
cogs_tagging runs'), ``bleu`` (scoring/bleu.py), ``comp`` (scoring/comp.py), ... A result file without that key
is an error naming the file and the keys it has. Per configuration and (dataset, subset): mean ± sample standard
deviation over seeds (Bessel's correction, n - 1; "-" for one seed); a cell with fewer finished seeds than planned
shows "(k/n)". ``--best`` sets the highest mean of each column in bold.

Writes OUT/table.md (rows: configurations, columns: dataset/subset; ``--transpose`` for the other way, as in
Csordás et al.'s Table 3), OUT/table.csv (one line per cell with its metric, full precision, every seed's value),
OUT/runs.md and OUT/runs.csv (one line per tabulated run: its values, updates, training wall time, evaluation
time, commit and machine, from its done.json, train.log and machine.txt), and OUT/plots/<dataset>.png: the
metric on each validated subset vs updates, from the validation records of the runs' train.log (fairseq's
``--log-format simple`` or ``json``, see :mod:`.train_log`; for ``accuracy``, the cogs_tagging task's ``exact_match`` counts too), mean over seeds with a ±std band; a dataset whose logs have no
validation value of the metric gets no plot (one message says so).
``--categories SUBSET`` also writes OUT/categories_SUBSET.md (mean per category, e.g. COGS gen).
``--by-length SUBSET`` (repeatable) also writes OUT/by_length_SUBSET.md and plots/<dataset>_by_length_SUBSET.png
for each: exact match per reference length, mean ± std over seeds, in --scale and --digits like the other tables
(:mod:`.by_length`).
``--compare A B`` (repeatable) also writes OUT/compare_A_B.md: B's mean minus A's per dataset and subset, with the p-value of a
two-sided permutation test over seeds (pipelines/compare.py).
``--against OTHER`` (repeatable) also writes OUT/against_NAME.md, NAME being OTHER's sweep: another sweep's output
folder or export, e.g. the same configurations trained another way. Per cell (dataset, subset, configuration) that
both sweeps have finished seeds of: both means with every seed's value, the difference, the p-value of the same
permutation test, and the fairseq-train options in which the two sides' runs differ, so the table says what the
comparison varies. A dataset trained on other data there is an error.
``--early-stopping SUBSET`` also writes OUT/early_stopping_SUBSET.md: per run, the in-loop validation value of every
subset at the update where SUBSET's was best (ties: the later update, as fairseq's checkpoint_best.pt), e.g. the
test accuracy at the best validation accuracy that Russin et al. report (the tables above use the last checkpoint).
``--export DIR`` copies what the numbers are made of into the repository's results/: each finished run's eval JSONs and
kept outputs (eval/SUBSET.outputs.gz), records and train.log metric lines, with sweep.json (and every pooled plan)
and the tables (pipelines/export.py), and DIR/aggregate.json, the options that shaped the tables: `fairseq-compgen
aggregate DIR --no-plots OPTIONS` on DIR alone writes the same tables (tests/test_results_trace.py checks every
export under results/).
A configuration's ``paper: {dataset/subset: "0.30 ± 0.02"}`` in the sweep file is shown beside its cell as
"(paper 0.30 ± 0.02; inside)" and in table.csv's paper and verdict columns, as written (the paper's units): the
verdict says whether our mean lies within 2 of the paper's standard deviations (a standard error written as
"43.0 ± 9.5 (SEM, 3 seeds)" is turned into one), or within 0.05 where the paper gives a single value (`tables.verdict`); ``--spec SWEEP`` takes the
labels and paper values from the current sweep file for runs planned before they were written there.
``--t5-biases`` also plots the learned T5 biases (:mod:`.t5_biases`) of every finished run whose arch
has them, to OUT/plots/t5_biases/<dataset>_<config>_seed<k>.png.
"""
# The parts, one file each: pooling.py (which finished runs count, pooled across folders, as cells), tables.py
# (table.md, runs.md and the views, with the paper's values and verdicts), curves.py (learning curves, early
# stopping, plots), by_length.py (exact match per output length), compare.py (permutation test), export.py (--export).
from __future__ import annotations

import argparse
import functools
import math
import sys
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from fairseq_compgen import scoring
from fairseq_compgen.data.io import atomic_write_text
from fairseq_compgen.errors import UsageError, check_output_folder
from fairseq_compgen.pipelines import by_length
from fairseq_compgen.pipelines.curves import early_stopping_table, plot_curves, plot_t5_biases
from fairseq_compgen.pipelines.export import check_destination, export, from_repository
from fairseq_compgen.pipelines.pooling import by_length_groups, collect
from fairseq_compgen.pipelines.sweep import read_plan
from fairseq_compgen.pipelines.sweep_schema import load_spec
from fairseq_compgen.pipelines.tables import (against_table, category_table, comparison_table, label, markdown_table,
                                              run_rows, runs_table, write_csv, write_runs_csv)


def labels_from(sweep_file: str, planned: dict) -> dict:
    """--spec: the current sweep file's labels and paper values for runs planned (sweep.json) before they were
    written; only the display changes, the runs and their settings are sweep.json's. The names must agree."""
    spec = load_spec(sweep_file)
    if spec["name"] != planned.get("name"):
        raise UsageError(f"--spec {sweep_file}: its sweep is {spec['name']!r}, the runs' is {planned.get('name')!r}")
    return spec


def default_metric(spec: dict) -> str:
    """The key of the eval JSONs that the sweep's datasets are scored by (`metric:` of each dataset; exact_match
    writes `accuracy`); UsageError when they differ, as one table holds one metric."""
    keys = ({scoring.get((d or {}).get("metric") or "exact_match", f"dataset {name!r}: metric").key
             for name, d in spec.get("datasets", {}).items()} or {scoring.get("exact_match").key})
    if len(keys) > 1:
        raise UsageError(f"the sweep's datasets are scored by different metrics ({', '.join(sorted(keys))}): "
                         f"choose one with --metric")
    return keys.pop()


def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ModuleNotFoundError:
        return False
    return True


def table_options(a: argparse.Namespace) -> List[str]:
    """The options of a call (main's) that shape its tables, not where they go, its plots or its export: what an
    export records (aggregate.json) to write the same tables again from the export alone."""
    options: List[str] = []
    for flag, value in (("--metric", a.metric), ("--spec", a.spec), ("--scale", a.scale), ("--digits", a.digits),
                        ("--categories", a.categories), ("--early-stopping", a.early_stopping)):
        if value is not None:
            if flag == "--spec" and Path(value).is_file():  # a sweep file: named from the checkout's root
                value = from_repository(value)
            if isinstance(value, float):  # 100.0 as "100", but never at a loss of digits
                value = f"{value:g}" if float(f"{value:g}") == value else repr(value)
            options += [flag, str(value)]
    options += ["--best"] * a.best + ["--transpose"] * a.transpose
    for subset in dict.fromkeys(a.by_length):
        options += ["--by-length", subset]
    for first, second in a.compare:
        options += ["--compare", first, second]
    for other in a.against:
        options += ["--against", from_repository(other)]
    return options


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="fairseq-compgen aggregate", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("outs", nargs="+", metavar="out",
                   help="the sweep's output folder (holding sweep.json); several folders of the same sweep are "
                        "pooled, a seed from wherever it finished (the tables and plots go to the first)")
    p.add_argument("--best", action="store_true", help="bold the best (highest) mean of each column")
    p.add_argument("--spec", metavar="SWEEP",
                   help="take the labels and the papers' values (`paper:`) from this sweep file or packaged sweep, "
                        "of the same name, instead of the sweep.json written when the runs were planned")
    p.add_argument("--metric",
                   help="the numeric key of eval/<subset>.json to tabulate and plot: "
                        f"{', '.join(scoring.get(n).key for n in scoring.names())}, ... (default: what the sweep's "
                        "datasets evaluate with, `metric:`; accuracy for exact_match)")
    p.add_argument("--scale", type=float, default=1.0, help="multiply the values (100 for percent)")
    p.add_argument("--digits", type=int, default=2)
    p.add_argument("--transpose", action="store_true", help="rows: dataset/subset, columns: configurations")
    p.add_argument("--tables", metavar="DIR",
                   help="write the tables (table.*, runs.*, the views) and plots to DIR instead of the first OUT, "
                        "which is then left as it is (e.g. runs committed under results/)")
    p.add_argument("--markdown", help="default OUT/table.md")
    p.add_argument("--csv", help="default OUT/table.csv")
    p.add_argument("--plots", help="default OUT/plots")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--t5-biases", action="store_true", help="also plot learned T5 biases of T5 runs")
    p.add_argument("--categories", metavar="SUBSET",
                   help="also write OUT/categories_SUBSET.md: mean exact match per category of SUBSET "
                        "(eval/SUBSET.json's per_category, e.g. COGS gen)")
    p.add_argument("--by-length", metavar="SUBSET", action="append", default=[],
                   help="also write OUT/by_length_SUBSET.md and plots/<dataset>_by_length_SUBSET.png (repeat it for "
                        "more subsets, e.g. --by-length gen --by-length test): "
                        "exact match per reference length over seeds (eval/SUBSET.json's per_length, or counted from "
                        "eval/SUBSET.outputs.gz; pipelines/by_length.py)")
    p.add_argument("--early-stopping", metavar="SUBSET",
                   help="also write OUT/early_stopping_SUBSET.md: per run, every validated subset's in-loop value at "
                        "the update where SUBSET's was best (ties: the later, as fairseq's checkpoint_best.pt)")
    p.add_argument("--compare", nargs=2, metavar=("CONFIG_A", "CONFIG_B"), action="append", default=[],
                   help="(repeatable) also write OUT/compare_A_B.md: per dataset and subset, mean(B) - mean(A) over seeds and the "
                        "p-value of a two-sided permutation test over seeds (pipelines/compare.py)")
    p.add_argument("--against", metavar="OTHER", action="append", default=[],
                   help="(repeatable) also write OUT/against_NAME.md (NAME: OTHER's sweep): each cell that OTHER, "
                        "another sweep's output folder or export, also has, side by side with every seed's value, "
                        "the difference, a permutation test's p and the fairseq-train options that differ")
    p.add_argument("--export", metavar="DIR",
                   help="copy what the numbers are made of to DIR (e.g. results/NAME): per finished run its eval "
                        "JSONs and kept outputs, records (done.json, settings.json, command.txt, commit.txt, ...) and train.log's "
                        "metric lines; plus sweep.json and the tables. No checkpoints")
    a = p.parse_args(argv)
    if not (math.isfinite(a.scale) and a.scale > 0):  # 0 tabulated every value as 0, in silence
        raise UsageError(f"--scale {a.scale:g}: expected a positive number (100 for percent)")
    if a.digits < 0:  # a traceback from the number format
        raise UsageError(f"--digits {a.digits}: expected 0 or more")
    for flag, folder in (("--tables", a.tables), ("--export", a.export), ("--plots", a.plots)):
        if folder:  # before any table is written: a file in the way stopped the call halfway
            check_output_folder(folder, flag)
    if a.export:
        check_destination(a.export)
    outs = [Path(o) for o in a.outs]
    a.metric = a.metric or default_metric(read_plan(outs[0])["spec"])
    out = Path(a.tables) if a.tables else outs[0]  # where the tables and plots are written
    spec, runs, cells = collect(outs, a.metric)
    if a.spec:
        spec = labels_from(a.spec, spec)
    if not any(c.n for c in cells.values()):
        raise UsageError(f"{', '.join(map(str, outs))}: none of the {len(runs)} planned runs has finished (no "
                         f"done.json with results): nothing to tabulate")
    # every view first: a view that cannot be made (--compare of an unknown configuration, a subset no run has)
    # stops the call before any file is written
    views: List[Tuple[str, str]] = []  # (file name in OUT, markdown), in the order they are printed
    if a.categories:
        views.append((f"categories_{a.categories}.md", category_table(spec, runs, a.categories)))
    length_groups = {}  # subset -> its groups
    for subset in dict.fromkeys(a.by_length):
        length_groups[subset], left_out = by_length_groups(runs, subset)
        views.append((f"by_length_{subset}.md", by_length.table(length_groups[subset], subset,
                                                                functools.partial(label, spec), left_out, a.scale,
                                                                a.digits)))
    if a.early_stopping:
        views.append((f"early_stopping_{a.early_stopping}.md",
                      early_stopping_table(spec, runs, a.early_stopping, a.metric, a.scale, a.digits)))
    for first, second in a.compare:
        views.append((f"compare_{first}_{second}.md",
                      comparison_table(spec, cells, first, second, scale=a.scale, digits=a.digits)))
    for other in a.against:
        there = collect([Path(other)], a.metric)
        name = f"against_{there[0].get('name')}.md"
        if there[0].get("name") == spec.get("name"):
            raise UsageError(f"--against {other}: the same sweep as {outs[0]} ({spec.get('name')}): pool its "
                             f"folders instead (fairseq-compgen aggregate {outs[0]} {other})")
        if name in dict(views):
            raise UsageError(f"--against {other}: a second folder of sweep {there[0].get('name')}: give one")
        views.append((name, against_table((spec, runs, cells), there, f"--against {other}", a.scale, a.digits)))
    out.mkdir(parents=True, exist_ok=True)  # only once there is something to write into it
    md = markdown_table(spec, cells, a.best, a.scale, a.digits, a.transpose)
    tables = [Path(a.markdown or out / "table.md"), Path(a.csv or out / "table.csv"), out / "runs.md",
              out / "runs.csv"]  # what this call writes, for --export; the views are added as written
    rows = run_rows(runs, cells)  # reads every run's records: a bad one stops the call before any table is written
    atomic_write_text(tables[0], md)
    write_csv(tables[1], cells, a.best, a.metric, spec, a.scale)
    print(md, end="")
    atomic_write_text(out / "runs.md", runs_table(spec, rows, a.metric, a.scale, a.digits))
    write_runs_csv(out / "runs.csv", rows, a.metric)
    for name, view in views:
        tables.append(out / name)
        atomic_write_text(tables[-1], view)
        print(view, end="")
    plots = Path(a.plots or out / "plots")
    written: List[Path] = []  # the plots of this call, which the export carries along
    if not a.no_plots and not have_matplotlib():
        if a.plots or a.t5_biases:  # asked for by name: an error, after the tables
            raise UsageError(f"{'--plots' if a.plots else '--t5-biases'} needs matplotlib, which is not installed: "
                             f"expected `pip install 'fairseq_compgen[plots]'` (the tables are written)")
        print("aggregate: no plots: matplotlib is not installed (pip install 'fairseq_compgen[plots]', or "
              "--no-plots to skip them without this line); the tables are written", file=sys.stderr)
    elif not a.no_plots:
        written += plot_curves(spec, runs, plots, a.scale, a.metric)
        for subset, groups in length_groups.items():
            written += by_length.plot(groups, subset, functools.partial(label, spec), plots, a.scale)
        if a.t5_biases:
            written += plot_t5_biases(runs, plots / "t5_biases")
        for path in written:
            print(f"plot: {path}")
    if a.export:
        n = export(runs, outs, Path(a.export), {p: p.relative_to(plots) for p in written}, table_options(a), tables)
        print(f"export: {n} finished runs -> {a.export}" + (f", with {len(written)} plots" if written else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
