"""Turn a sweep's results into the papers' tables and plots.

    fairseq-compgen aggregate OUT [OUT ...] [--metric accuracy] [--best] [--scale 100] [--digits 2]
        [--transpose] [--tables DIR] [--markdown FILE] [--csv FILE] [--plots DIR | --no-plots] [--t5-biases]
        [--categories SUBSET] [--by-length SUBSET] [--early-stopping SUBSET] [--export results/NAME]

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
``--early-stopping SUBSET`` also writes OUT/early_stopping_SUBSET.md: per run, the in-loop validation value of every
subset at the update where SUBSET's was best (ties: the later update, as fairseq's checkpoint_best.pt), e.g. the
test accuracy at the best validation accuracy that Russin et al. report (the tables above use the last checkpoint).
``--export DIR`` copies what the numbers are made of into the repository's results/: each finished run's eval JSONs and
kept outputs (eval/SUBSET.outputs.gz), records and train.log metric lines, with sweep.json (and every pooled plan)
and the tables (see :func:`export`), and DIR/aggregate.json, the options that shaped the tables: `fairseq-compgen
aggregate DIR --no-plots OPTIONS` on DIR alone writes the same tables (tests/test_results_trace.py checks every
export under results/).
A configuration's ``paper: {dataset/subset: "0.30 ± 0.02"}`` in the sweep file is shown beside its cell as
"(paper 0.30 ± 0.02; inside)" and in table.csv's paper and verdict columns, as written (the paper's units): the
verdict says whether our mean lies within 2 of the paper's standard deviations (a standard error written as
"43.0 ± 9.5 (SEM, 3 seeds)" is turned into one), or within 0.05 where the paper gives a single value (`verdict`); ``--spec SWEEP`` takes the
labels and paper values from the current sweep file for runs planned before they were written there.
``--t5-biases`` also plots the learned T5 biases (:mod:`.t5_biases`) of every finished run whose arch
has them, to OUT/plots/t5_biases/<dataset>_<config>_seed<k>.png.
"""
from __future__ import annotations

import argparse
import csv
import functools
import json
import math
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import textwrap
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from fairseq_compgen import scoring
from fairseq_compgen.data.io import atomic_write_text, read_text_lines, staged_path
from fairseq_compgen.errors import UsageError, read_json
from fairseq_compgen.pipelines import by_length, train_log
from fairseq_compgen.pipelines.compare import permutation_p
from fairseq_compgen.pipelines.evaluate import OUTPUTS
from fairseq_compgen.pipelines.runner import kept_eval_files
from fairseq_compgen.pipelines.sweep import DONE, DONE_EXPECTED, planned_settings, read_plan
from fairseq_compgen.pipelines.sweep_schema import load_spec

NO_SUBSET = "(no finished run)"  # the column of a dataset whose subsets are all implicit and that has no results


@dataclass
class Cell:
    dataset: str
    subset: str
    config: str
    planned: int
    values: Dict[int, float] = field(default_factory=dict)  # seed -> the metric's value

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values.values()) if self.values else math.nan

    @property
    def std(self) -> float:
        """Sample standard deviation (n - 1); nan for fewer than two seeds."""
        return statistics.stdev(self.values.values()) if self.n >= 2 else math.nan


EVAL_EXPECTED = "the JSON object fairseq-compgen eval writes; rerun the run's evaluation (or the sweep) to rewrite it"


def read_metric(path: Path, metric: str) -> float:
    """The numeric value of `metric` in an evaluation JSON; UsageError naming the file and its keys if absent."""
    result = read_json(path, EVAL_EXPECTED)
    value = result.get(metric) if isinstance(result, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        keys = ", ".join(result) if isinstance(result, dict) else type(result).__name__
        raise UsageError(f"{path} has no numeric {metric!r} (--metric {metric}); its keys: {keys}")
    return float(value)


def read_done(folder: Path) -> dict:
    """A run's done.json; a half-written or edited one (not a JSON object) is a UsageError naming it."""
    done = read_json(folder / DONE, DONE_EXPECTED)
    if not isinstance(done, dict):
        raise UsageError(f"{folder / DONE}: a JSON {type(done).__name__}, not an object: expected {DONE_EXPECTED}")
    return done


def _finished(run: dict) -> bool:
    return (Path(run["dir"]) / DONE).is_file()


def _made_as_planned(run: dict) -> bool:
    """A finished run was made with the settings its plan gives it (done.json's "settings"; a run recorded before
    done.json kept them counts as made so)."""
    made_with = read_done(Path(run["dir"])).get("settings")
    return made_with is None or made_with == planned_settings(run)


# an export of several pooled folders (export) keeps each other folder's plan as sweep.<i>.<folder name>.json
POOLED_PLAN = re.compile(r"sweep\.(\d+)\.(.+)\.json")
EXPORTED_LOG = "train_metrics.log"  # what an export keeps of a run's train.log: its metric lines


PLAN_OF = "_plan_of"  # a planned run's (OUT, plan file name), set by pool


def exported_plans(out: Path) -> Dict[str, str]:
    """"<dataset>/<config>/seed<k>" -> the plan file of OUT that an export recorded each finished run as planned
    in (its aggregate.json's "plans"); {} for a folder that is no export, or an export written before the record."""
    path = Path(out) / "aggregate.json"
    record = read_json(path, "an export's record (JSON with options, runs, plans)") if path.is_file() else {}
    return record.get("plans") or {} if isinstance(record, dict) else {}


def _plan_made_by(first: dict, second: dict, recorded: Optional[str]) -> dict:
    """Of two plans' entries for one run folder (an export's pooled plans), the one the run was made by: the plan
    the export recorded for it (`recorded`, from exported_plans), else the one whose settings the run's done.json
    gives."""
    if recorded:
        return second if second[PLAN_OF][1] == recorded else first
    return second if _finished(second) and _made_as_planned(second) and not _made_as_planned(first) else first


def plan_files(out: Path) -> List[str]:
    """The names of OUT's plans: sweep.json, then, in an export of pooled folders, the plans it carries
    (POOLED_PLAN) in their order, so that the export alone gives the tables it was exported with."""
    found = [m for m in map(POOLED_PLAN.fullmatch, (p.name for p in Path(out).glob("sweep.*.json"))) if m]
    return ["sweep.json"] + [m.group(0) for m in sorted(found, key=lambda m: int(m.group(1)))]


def run_log(folder: Path) -> Path:
    """A run's training log: its train.log, or in an export, which keeps only its metric lines, those
    (EXPORTED_LOG)."""
    log = Path(folder) / "train.log"
    return log if log.is_file() or not (Path(folder) / EXPORTED_LOG).is_file() else Path(folder) / EXPORTED_LOG


# fairseq-train options that differ between runs of one cell by design: where it ran and what it logged
RUN_SPECIFIC = {"--save-dir", "--seed", "--user-dir", "--log-format", "--tensorboard-logdir", "--wandb-project",
                "--cpu", "--num-workers"}


def train_options(command: Path) -> Dict[str, object]:
    """The fairseq-train options of a run's command.txt (train.py writes it), the last of a repeated option winning
    as in argparse, without RUN_SPECIFIC ones and the data folder (its path depends on the machine)."""
    from fairseq_compgen.pipelines.train import fairseq_options

    options = fairseq_options(shlex.split(command.read_text()))
    return {k: v for k, v in options.items() if k not in RUN_SPECIFIC}


def data_sha256(run: dict) -> Optional[str]:
    """The data a run trained on, as recorded in its data.json (written by fairseq-compgen train), else in the
    campaign's data.sha256 (every file of the data folder), and compared by `train.same_data_key` (the data files,
    fairseq-preprocess's log aside); None for runs made before either was recorded."""
    from fairseq_compgen.pipelines.train import recorded_data_key

    return recorded_data_key(Path(run["dir"]))


def check_alike(runs: List[dict], pooled: bool = True) -> None:
    """Finished runs of one (dataset, configuration) must have been trained with the same fairseq-train options
    (train_options), and every run of a dataset on the same data (data.json, where recorded); UsageError naming the
    first pair that differs and how. Runs without command.txt (made by hand) are refused only when several folders
    are `pooled`; in one folder they are left unchecked."""
    first: Dict[Tuple[str, str], Tuple[Path, Dict[str, object]]] = {}
    data: Dict[str, Tuple[Path, str]] = {}
    for r in runs:
        if not _finished(r):
            continue
        sha = data_sha256(r)
        if sha is not None:  # every run of a dataset on the same data, whatever the folder's path
            seen = data.setdefault(r["dataset"], (Path(r["dir"]), sha))
            if seen[1] != sha:
                raise UsageError(f"{seen[0]} and {r['dir']} were trained on different data for dataset "
                                 f"{r['dataset']!r} (data.json's files: sha256 {seen[1][:12]} vs {sha[:12]}): their "
                                 f"seeds cannot be pooled")
        command = Path(r["dir"]) / "command.txt"
        if not command.is_file() and not pooled:
            continue
        if not command.is_file():
            raise UsageError(f"{command}: missing, so this run cannot be checked against the other folders' runs "
                             f"(pool only runs made by fairseq-compgen sweep)")
        # the budget is compared as trained (done.json's num_updates), not as first asked: a run resumed to a
        # larger --max-update keeps its first command in command.txt
        options = {k: v for k, v in train_options(command).items() if k not in ("--max-update", "--max-epoch")}
        try:
            done = json.loads((Path(r["dir"]) / DONE).read_text() or "{}")
        except json.JSONDecodeError as e:
            raise UsageError(f"{Path(r['dir']) / DONE}: not valid JSON ({e.msg}, line {e.lineno}): a half-written "
                             f"record; rerun the sweep to finish the run") from None
        if "num_updates" in done:
            options["updates trained"] = done["num_updates"]
        key = r["dataset"], r["config"]
        if key not in first:
            first[key] = command, options
            continue
        other_path, other = first[key]
        diff = sorted(k for k in set(options) | set(other) if options.get(k) != other.get(k))
        if diff:
            shown = "; ".join(f"{k}: {other.get(k, '(absent)')} vs {options.get(k, '(absent)')}" for k in diff[:5])
            raise UsageError(f"{other_path} and {command} were trained with different options ({shown}): "
                             f"their seeds cannot be pooled into one cell")


def pool(outs: Sequence[Path]) -> Tuple[dict, List[dict]]:
    """(spec, runs) of one sweep run into several output folders (other machines, other days): every planned
    (dataset, config, seed) once, its finished run wherever it finished. The folders must hold the same sweep
    (its name), a run may have finished in only one of them, and the finished runs of a cell must have been
    trained alike (check_alike). The spec (labels) is the first folder's. A folder that an export wrote holds every
    pooled folder's runs in one tree and their plans (plan_files): a run that two of them name is the one of the plan
    it was made by."""
    plans, recorded = [], {str(o): exported_plans(o) for o in outs}
    for o in outs:
        for name in plan_files(o):
            plans.append(read_plan(o, name))
            for r in plans[-1].get("runs") or []:
                r[PLAN_OF] = (str(o), name)  # where this entry was planned (export: which plan a run is of)
    names = list(dict.fromkeys(str(p["spec"].get("name")) for p in plans))
    if len(names) > 1:
        raise UsageError(f"{', '.join(map(str, outs))}: these folders hold different sweeps ({', '.join(names)}); "
                         f"only runs of one sweep can be pooled")
    chosen: Dict[Tuple[str, str, int], dict] = {}
    for plan in plans:
        for r in plan["runs"]:
            key = r["dataset"], r["config"], r["seed"]
            before = chosen.get(key)
            if before is not None and before["dir"] == r["dir"]:  # one run folder, named by two plans of an export
                run = f"{r['dataset']}/{r['config']}/seed{r['seed']}"
                chosen[key] = _plan_made_by(before, r, recorded[r[PLAN_OF][0]].get(run))
                continue
            if before is not None and _finished(before) and _finished(r):
                raise UsageError(f"{r['dataset']}/{r['config']}/seed{r['seed']} finished in both {before['dir']} "
                                 f"and {r['dir']}: pool one of them (move the other away)")
            if before is None or _finished(r):
                chosen[key] = r
    runs = list(chosen.values())
    check_alike(runs, pooled=len(plans) > 1)  # also within one folder: data re-prepared, options edited between runs
    return plans[0]["spec"], runs


def collect(outs, metric: str = "accuracy") -> Tuple[dict, List[dict], Dict[Tuple[str, str, str], Cell]]:
    """(spec, runs, cells) of one sweep output folder, or of several pooled (see pool): cells keyed by (dataset,
    subset, config), in sweep order; a cell's values are `metric` of the finished runs' eval/<subset>.json."""
    outs = [Path(o) for o in ([outs] if isinstance(outs, (str, Path)) else outs)]
    spec, runs = pool(outs)
    planned: Dict[Tuple[str, str], int] = defaultdict(int)
    for r in runs:
        planned[r["dataset"], r["config"]] += 1
    subsets: Dict[str, List[str]] = {}
    for r in runs:  # the planned subsets: a dataset without finished runs still gets its columns
        known = subsets.setdefault(r["dataset"], [])
        known.extend(x for x in r.get("subsets") or [] if x not in known)
    results: Dict[Tuple[str, str, int], Dict[str, float]] = {}
    changed: List[str] = []
    for r in runs:
        d = Path(r["dir"])
        if not _finished(r):
            continue
        if not _made_as_planned(r):
            changed.append(f"{d}")  # finished under other settings than sweep.json's: not this cell's run
            continue
        files = {p.stem: p for p in sorted((d / "eval").glob("*.json"))}
        if r.get("subsets"):
            files = {s: files[s] for s in r["subsets"] if s in files}
        accs = {s: read_metric(p, metric) for s, p in files.items()}
        results[r["dataset"], r["config"], r["seed"]] = accs
        known = subsets.setdefault(r["dataset"], list(r.get("subsets") or []))
        known.extend(s for s in accs if s not in known)
    if changed:
        print(f"aggregate: {len(changed)} finished run(s) were made with other settings than their folder's "
              f"sweep.json and are left out, e.g. {changed[0]} (its done.json 'settings')", file=sys.stderr)
    cells: Dict[Tuple[str, str, str], Cell] = {}
    configs = list(dict.fromkeys(r["config"] for r in runs))
    for dataset in dict.fromkeys(r["dataset"] for r in runs):
        for subset in _order(subsets.get(dataset) or [NO_SUBSET]):
            for config in configs:
                if (dataset, config) not in planned:
                    continue
                cell = Cell(dataset, subset, config, planned[dataset, config])
                for (d, c, seed), accs in results.items():
                    if d == dataset and c == config and subset in accs:
                        cell.values[seed] = accs[subset]
                cells[dataset, subset, config] = cell
    return spec, runs, cells


def _order(subsets: Sequence[str]) -> List[str]:
    rank = {"valid": 0, "test": 1, "gen": 2}
    return sorted(dict.fromkeys(subsets), key=lambda s: rank.get(s, 3))


def _label(spec: dict, kind: str, name: str) -> str:
    entry = (spec.get(kind) or {}).get(name) or {}
    return str(entry.get("label") or name)


def comparison_table(spec: dict, cells: Dict[Tuple[str, str, str], Cell], first: str, second: str,
                     scale: float = 1.0, digits: int = 2) -> str:
    """`--compare FIRST SECOND` as markdown: per dataset and subset where both configurations have finished seeds,
    their means (seeds), the difference second - first, and the p of a two-sided permutation test over seeds
    (pipelines/compare.py)."""
    configs = {c for (_, _, c) in cells}
    for name in (first, second):
        if name not in configs:
            raise UsageError(f"--compare {name}: no such configuration in this sweep (known: "
                             f"{', '.join(sorted(configs))})")
    lines = [f"| dataset: subset | {_label(spec, 'configurations', first)} (seeds) | "
             f"{_label(spec, 'configurations', second)} (seeds) | difference | p (two-sided "
             f"permutation test over seeds) |", "|---|---|---|---|---|"]
    for (dataset, subset, config), cell in sorted(cells.items()):
        if config != first:
            continue
        other = cells.get((dataset, subset, second))
        if other is None or not cell.values or not other.values:
            continue
        a, b = list(cell.values.values()), list(other.values.values())
        p, exact = permutation_p(a, b)
        lines.append(f"| {_label(spec, 'datasets', dataset)}: {subset} | "
                     f"{scale * cell.mean:.{digits}f} ({cell.n}) | {scale * other.mean:.{digits}f} ({other.n}) | "
                     f"{scale * (other.mean - cell.mean):+.{digits}f} | "
                     f"{p:.3f}{'' if exact else ' (Monte Carlo)'} |")
    if len(lines) == 2:
        raise UsageError(f"--compare {first} {second}: no dataset where both have finished runs")
    return "\n".join(lines) + "\n"


def paper_value(spec: dict, dataset: str, subset: str, config: str) -> Optional[str]:
    """The paper's value of this cell as the sweep file writes it (a configuration's `paper: {dataset/subset: ...}`),
    or None."""
    value = (((spec.get("configurations") or {}).get(config) or {}).get("paper") or {}).get(f"{dataset}/{subset}")
    return None if value is None else str(value)


# "VALUE", "VALUE ± STD", or "VALUE ± SEM (SEM, N seeds)" where the paper's ± is a standard error (Chaabouni et
# al.'s tables): the band then uses its standard deviation, SEM * sqrt(N)
_PAPER = re.compile(r"^\s*([-+]?\d+(?:\.(\d+))?)\s*(?:±|\+-|\+/-)?\s*(\d+(?:\.\d+)?)?"
                    r"(?:\s*\((?i:SEM),\s*(\d+)\s*(?i:seeds?)\))?\s*$")


def verdict(cell: Optional[Cell], paper: Optional[str], scale: float = 1.0) -> str:
    """Whether our mean lies inside the paper's band: within 2 of the paper's standard deviations
    ("0.30 ± 0.02"; "43.0 ± 9.5 (SEM, 3 seeds)", a standard error over 3 seeds, is a standard deviation of
    9.5 * sqrt(3)), at least half a unit of its last printed digit (so "1.00 ± 0.00" accepts [0.995, 1.005]); or
    within 0.05 (times `scale`, the paper's units) where it gives a single value ("0.637"). "" when there is nothing
    to compare (no runs, no paper value, or a paper value that is not a number, e.g. "median 91.0"). A paper value
    above 1 against our fractions at scale 1 ("99.8 ± 0.1" against 0.834: the paper's percent) is not compared:
    the verdict says to pass --scale 100 instead of "outside" for any value of ours."""
    if cell is None or not cell.n or paper is None:
        return ""
    m = _PAPER.match(str(paper))
    if not m:
        return ""
    value, decimals, std, sem_seeds = float(m.group(1)), len(m.group(2) or ""), m.group(3), m.group(4)
    if scale == 1 and value > 1 and 0 <= cell.mean <= 1:
        return "not compared: the paper's value is in percent, ours a fraction: --scale 100"
    if std is not None:
        std = float(std) * (math.sqrt(int(sem_seeds)) if sem_seeds else 1.0)
    band = max(2 * std, 0.5 * 10 ** -decimals) if std is not None else 0.05 * scale
    return "inside" if abs(cell.mean * scale - value) <= band + 1e-12 else "outside"


def format_cell(cell: Optional[Cell], scale: float, digits: int, bold: bool = False,
                paper: Optional[str] = None) -> str:
    if cell is None:
        return ""
    if not cell.n:
        text = f"- (0/{cell.planned})"
    else:
        std = "-" if math.isnan(cell.std) else f"{cell.std * scale:.{digits}f}"
        text = f"{cell.mean * scale:.{digits}f} ± {std}"
        if bold:
            text = f"**{text}**"
        if cell.n < cell.planned:
            text += f" ({cell.n}/{cell.planned})"
    if paper is None:
        return text
    v = verdict(cell, paper, scale)
    return text + f" (paper {paper}{'; ' + v if v else ''})"


def best_configs(cells: Dict[Tuple[str, str, str], Cell]) -> Dict[Tuple[str, str], set]:
    """(dataset, subset) -> the configurations with the highest mean (ties all count)."""
    best: Dict[Tuple[str, str], set] = {}
    by_col: Dict[Tuple[str, str], List[Cell]] = defaultdict(list)
    for (d, s, _), c in cells.items():
        if c.n:
            by_col[d, s].append(c)
    for col, cs in by_col.items():
        top = max(c.mean for c in cs)
        best[col] = {c.config for c in cs if c.mean == top}
    return best


def markdown_table(spec: dict, cells, best: bool = False, scale: float = 1.0, digits: int = 2,
                   transpose: bool = False) -> str:
    columns = list(dict.fromkeys((d, s) for d, s, _ in cells))
    configs = list(dict.fromkeys(c for _, _, c in cells))
    top = best_configs(cells) if best else {}
    col_names = [f"{_label(spec, 'datasets', d)}: {s}" for d, s in columns]
    cfg_names = [_label(spec, "configurations", c) for c in configs]

    def text(col, config):
        return format_cell(cells.get((*col, config)), scale, digits, config in top.get(col, ()),
                           paper_value(spec, *col, config))

    if not transpose:
        header = ["Configuration", *col_names]
        rows = [[name, *(text(col, c) for col in columns)] for c, name in zip(configs, cfg_names)]
    else:
        header = ["Dataset: subset", *cfg_names]
        rows = [[cname, *(text(col, c) for c in configs)] for col, cname in zip(columns, col_names)]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def write_csv(path, cells, best: bool = False, metric: str = "accuracy", spec: Optional[dict] = None,
              scale: float = 1.0) -> None:
    top = best_configs(cells) if best else {}
    with staged_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:  # renamed when whole
        w = csv.writer(f)
        w.writerow(["dataset", "subset", "configuration", "metric", "n", "planned", "mean", "std", "best", "values",
                     "paper", "verdict"])
        for (d, s, c), cell in cells.items():
            w.writerow([d, s, c, metric, cell.n, cell.planned, repr(cell.mean), repr(cell.std),
                        int(c in top.get((d, s), ())),
                        ";".join(f"{seed}={v!r}" for seed, v in sorted(cell.values.items())),
                        paper_value(spec or {}, d, s, c) or "",
                        verdict(cell, paper_value(spec or {}, d, s, c), scale)])


def _machine_text(machine: Optional[dict]) -> str:
    if not machine:
        return "not recorded"
    text = (f"{machine.get('host')}: {machine.get('cpu')}, {machine.get('cores')} cores, "
            f"{machine.get('threads')} threads")
    return text + (f", {machine['gpu']}" if machine.get("gpu") else ", no GPU")


def machine_text(folder: Path) -> str:
    """Where a run trained (machine.txt), and, where its evaluation records another machine (eval/*.json's
    "evaluated": a lent GPU's run evaluated on CPU), "; evaluated on" that one."""
    machine = folder / "machine.txt"
    text = _machine_text(json.loads(machine.read_text()) if machine.is_file() else None)
    evaluated = set()
    for result in sorted((folder / "eval").glob("*.json")):
        where = (json.loads(result.read_text()).get("evaluated") or {}).get("machine")
        if where:
            evaluated.add(_machine_text(where))
    others = sorted(evaluated - {text})
    return text + "".join(f"; evaluated on {other}" for other in others)


def run_rows(runs: List[dict], cells: Dict[Tuple[str, str, str], Cell]) -> List[dict]:
    """One row per run that contributed to `cells` (collect's; so a run left out there is left out here): dataset,
    config, seed, its value in each cell, updates, training wall seconds (fairseq's clock in train.log), training
    CPU seconds (train.log's `cpu_s`, None for runs trained before it was logged), evaluation seconds (done.json),
    commit, data (the first 12 hex digits of `train.same_data_key` of its data.json: the data files' hash that
    pooling compares, so one dataset's runs show one value; "not recorded" for runs made before data.json), machine
    (machine_text: machine.txt, "not recorded" for runs made before it was, and the evaluation's machine where that
    differs)."""
    rows = []
    for r in runs:
        values = {s: c.values[r["seed"]] for (d, s, cfg), c in cells.items()
                  if d == r["dataset"] and cfg == r["config"] and r["seed"] in c.values}
        if not values:
            continue
        folder = Path(r["dir"])
        done = read_done(folder)
        rows.append({
            "dataset": r["dataset"], "config": r["config"], "seed": r["seed"], "values": values,
            "updates": done.get("num_updates"), "train_wall_s": train_log.train_wall(run_log(folder)),
            "train_cpu_s": train_log.train_cpu(run_log(folder)), "eval_s": done.get("eval_s"),
            "commit": commit_text(done), "data": (data_sha256(r) or "not recorded")[:12],
            "machine": machine_text(folder),
        })
    return rows


def commit_text(done: dict) -> str:
    """A run's commit for the tables: the 7-character SHA, every one joined by "+" when a resumed run trained at
    several (done.json "commits"; older done.json files have only "commit"), " dirty" when any tree was."""
    commits = [c.split()[0] for c in done.get("commits") or []] or ([done["commit"]] if done.get("commit") else [])
    return ("+".join(c[:7] for c in commits) + (" dirty" if done.get("dirty") else "")) or "unknown"


def runs_table(spec: dict, rows: List[dict], metric: str, scale: float = 1.0, digits: int = 2) -> str:
    """The per-run table (run_rows) as markdown: every seed's values beside its cost, commit, data and machine."""
    subsets = _order([s for row in rows for s in row["values"]])
    header = ["dataset", "configuration", "seed", *(f"{s} {metric}" for s in subsets), "updates",
              "train wall (min)", "train CPU (min)", "eval (s)", "commit", "data", "machine"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        values = [f"{scale * row['values'][s]:.{digits}f}" if s in row["values"] else "" for s in subsets]
        wall, cpu = row["train_wall_s"], row["train_cpu_s"]
        lines.append("| " + " | ".join([
            _label(spec, "datasets", row["dataset"]), _label(spec, "configurations", row["config"]), str(row["seed"]),
            *values, f"{row['updates']:,}" if row["updates"] is not None else "",
            f"{wall / 60:.1f}" if wall is not None else "", f"{cpu / 60:.1f}" if cpu is not None else "",
            "" if row["eval_s"] is None else f"{row['eval_s']:.0f}",
            row["commit"], row["data"], row["machine"]]) + " |")
    return "\n".join(lines) + "\n"


def write_runs_csv(path, rows: List[dict], metric: str) -> None:
    subsets = _order([s for row in rows for s in row["values"]])
    with staged_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:  # renamed when whole
        w = csv.writer(f)
        w.writerow(["dataset", "configuration", "seed", "metric", *subsets, "updates", "train_wall_s", "train_cpu_s",
                    "eval_s", "commit", "data", "machine"])
        for row in rows:
            w.writerow([row["dataset"], row["config"], row["seed"], metric,
                        *(repr(row["values"][s]) if s in row["values"] else "" for s in subsets),
                        row["updates"], row["train_wall_s"], row["train_cpu_s"], row["eval_s"], row["commit"],
                        row["data"], row["machine"]])


# what --export keeps of a run: its records and results, not its checkpoints
EXPORTED = ("done.json", "settings.json", "command.txt", "launch.txt", "commit.txt", "machine.txt", "command.history",
            "commit.history", "data.json", "data.sha256")


def _metric_line(line: str) -> bool:
    """A validation or epoch-summary line of a train.log (either log format), or the sweep's line that starts an
    invocation (train_log.train_wall adds up the invocations' clocks)."""
    record = train_log.parse_line(line)
    return record is not None and record.kind in ("valid", "train", "start")


def table_files(out: Path) -> List[Path]:
    """The tables that main writes in OUT: table.*, runs.* and the optional views, those that exist."""
    out = Path(out)
    return [p for p in [out / "table.md", out / "table.csv", out / "runs.md", out / "runs.csv",
                        *(p for view in ("categories", "by_length", "early_stopping", "compare")
                          for p in sorted(out.glob(f"{view}_*.md")))] if p.is_file()]


def _copy(src: Path, dst: Path) -> None:
    """shutil.copy2, but nothing where `dst` is `src` (an export into a folder it reads, or into --tables)."""
    if Path(src).resolve() != Path(dst).resolve():
        shutil.copy2(src, dst)


REPOSITORY = Path(__file__).resolve().parents[2]  # the checkout holding fairseq_compgen/ (where --spec paths start)


def from_repository(path) -> str:
    """`path` relative to the checkout's root where it lies inside it, else absolute: how aggregate.json names a
    file, so that its command works from the root."""
    full = Path(path).resolve()
    return str(full.relative_to(REPOSITORY)) if full.is_relative_to(REPOSITORY) else str(full)


def export(runs: List[dict], outs: Sequence[Path], dest: Path, plots: Optional[Dict[Path, Path]] = None,
           options: Sequence[str] = (), tables: Sequence[Path] = ()) -> int:
    """Copy every finished run's evaluation JSONs and outputs (runner.EVAL_KEPT), records (EXPORTED) and the
    metric lines of its train.log (fairseq's validation and epoch summary lines, EXPORTED_LOG) to
    DEST/<dataset>/<config>/seed<k>/, so that the tables can be recomputed from the repository; also the first
    folder's sweep.json and the tables this call wrote (`tables`: table.md, table.csv, runs.*, and the optional
    views; a view of an earlier call left in DEST is removed), the plots of this call (`plots`: written path -> its path under DEST/plots/, with what a t5-biases
    plot prints beside it), every other plan that was pooled (plan_files: another folder's sweep.json, or one that
    an exported folder carried) as sweep.<i>.<name>.json (earlier ones of that form in DEST are removed), and
    DEST/aggregate.json: the options that shaped the tables (`options`) and the plan each run is of ("plans"), so
    that `fairseq-compgen aggregate DEST --no-plots OPTIONS` writes the same tables from DEST's runs and plans (a
    --spec file aside). Returns the number of runs."""
    n = 0
    for r in runs:
        src = Path(r["dir"])
        if not _finished(r):
            continue
        to = dest / r["dataset"] / r["config"] / f"seed{r['seed']}"
        (to / "eval").mkdir(parents=True, exist_ok=True)
        for p in kept_eval_files(src):  # results and the outputs they were scored from
            _copy(p, to / "eval" / p.name)
        for name in EXPORTED:
            if (src / name).is_file():
                _copy(src / name, to / name)
        log = run_log(src)  # train.log, or of a run in an export (an export exported again) its metric lines
        if log.is_file():
            lines = [line for line in log.read_text(errors="replace").splitlines(keepends=True) if _metric_line(line)]
            atomic_write_text(to / EXPORTED_LOG, "".join(lines))
        n += 1
    written = {Path(t).name for t in tables}
    for path in table_files(dest):  # a view of an earlier call, which this call's options would not write again
        if path.name not in written:
            path.unlink()
    for path in [outs[0] / "sweep.json", *map(Path, tables)]:
        _copy(path, dest / path.name)
    for src, rel in (plots or {}).items():
        for path in (src, src.with_suffix(".txt")):
            if path.is_file():
                (dest / "plots" / rel).parent.mkdir(parents=True, exist_ok=True)
                _copy(path, dest / "plots" / rel.with_suffix(path.suffix))
    sources = [(str(o), name) for o in outs for name in plan_files(o)]
    names = {sources[0]: "sweep.json"}  # each plan read -> its name in DEST
    for i, (o, name) in enumerate(sources[1:], 2):
        m = POOLED_PLAN.fullmatch(name)
        names[o, name] = f"sweep.{i}.{m.group(2) if m else Path(o).resolve().name}.json"
        shutil.copy2(Path(o) / name, dest / (names[o, name] + ".tmp"))  # all read before any is replaced: DEST
    for name in plan_files(dest)[1:]:                                     # may be one of `outs`
        (dest / name).unlink()
    for source in sources[1:]:
        (dest / (names[source] + ".tmp")).replace(dest / names[source])
    plans = {f"{r['dataset']}/{r['config']}/seed{r['seed']}": names[r[PLAN_OF]] for r in runs if _finished(r)}
    command = ["fairseq-compgen", "aggregate", from_repository(dest), "--no-plots", *options]
    atomic_write_text(dest / "aggregate.json", json.dumps({
        "options": list(options), "runs": n, "plans": plans,
        "tables": f"{shlex.join(command)} --tables DIR, run from the repository's root, writes to DIR the same "
                  f"table.*, runs.* and optional views"}, indent=1) + "\n")
    return n


def exact_match_results(runs: List[dict], subset: str, flag: str):
    """(run, path, eval/<subset>.json) of every finished run that has one; UsageError (naming `flag`) for a
    result that is not exact match."""
    for r in runs:
        path = Path(r["dir"]) / "eval" / f"{subset}.json"
        if not _finished(r) or not path.is_file():
            continue
        result = read_json(path, EVAL_EXPECTED)
        if not isinstance(result, dict) or "accuracy" not in result:
            raise UsageError(f"{path} has no exact-match 'accuracy' ({flag} is for exact-match results); "
                             f"its keys: {', '.join(result)}")
        yield r, path, result


def category_table(spec: dict, runs: List[dict], subset: str, digits: int = 3) -> str:
    """Mean exact match per category of `subset` (eval/<subset>.json's per_category), one column per
    (dataset, configuration) with finished runs; the seeds averaged are named in the header."""
    per: Dict[Tuple[str, str], Dict[str, List[float]]] = defaultdict(lambda: defaultdict(list))
    seeds: Dict[Tuple[str, str], List[int]] = defaultdict(list)
    for r, _, result in exact_match_results(runs, subset, "--categories"):
        for cat, v in (result.get("per_category") or {}).items():
            per[r["dataset"], r["config"]][cat].append(float(v["accuracy"]))
        per[r["dataset"], r["config"]]["**overall**"].append(float(result["accuracy"]))
        seeds[r["dataset"], r["config"]].append(r["seed"])
    if not per:
        raise UsageError(f"no finished run has eval/{subset}.json")
    cols = list(per)
    cats = sorted({c for col in cols for c in per[col]} - {"**overall**"}) + ["**overall**"]
    header = ["category"] + [f"{_label(spec, 'configurations', c)} (seeds {', '.join(map(str, seeds[d, c]))})"
                             for d, c in cols]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for cat in cats:
        vals = [per[col].get(cat) for col in cols]
        lines.append("| " + " | ".join([cat] + [f"{statistics.fmean(v):.{digits}f}" if v else "" for v in vals])
                     + " |")
    return "\n".join(lines) + "\n"


def outputs_per_length(path: Path, result: dict) -> Optional[dict]:
    """The per_length of eval/<subset>.json `path` counted again from the outputs it was scored from,
    eval/<subset>.outputs.gz beside it (for a result evaluated before per_length was recorded, whose outputs were
    kept), or None when there is no such file. UsageError when the outputs do not give the result's counts."""
    from fairseq_compgen.scoring.exact_match import rescore

    outputs = path.with_name(path.stem + OUTPUTS)
    if not outputs.is_file():
        return None
    lines = read_text_lines(outputs, "the S-/T-/H- lines of fairseq-generate's output")
    return rescore(lines, result, str(outputs), str(path))["per_length"]


def by_length_groups(runs: List[dict], subset: str) -> Tuple[by_length.Groups, List[str]]:
    """(dataset, config) -> seed -> per_length of eval/<subset>.json (or, for a result recorded before per_length,
    counted from the outputs kept beside it: outputs_per_length), for --by-length; and the finished runs left out
    because they have neither. UsageError when no run has one, or when two runs of a dataset count different
    examples of one length (not the same data)."""
    groups: by_length.Groups = defaultdict(dict)
    left_out, seen = [], {}
    for r, path, result in exact_match_results(runs, subset, "--by-length"):
        per_length = result.get("per_length") or outputs_per_length(path, result)
        if not per_length:
            left_out.append(f"{r['dataset']}/{r['config']}/seed{r['seed']}")
            continue
        for length, c in per_length.items():
            first = seen.setdefault((r["dataset"], length), (c["n"], path))
            if first[0] != c["n"]:
                raise UsageError(f"{path}: {c['n']} examples of reference length {length}, but {first[1]} has "
                                 f"{first[0]}: expected runs of one dataset to be evaluated on the same data")
        groups[r["dataset"], r["config"]][r["seed"]] = per_length
    if not groups:
        raise UsageError(f"--by-length {subset}: no finished run's eval/{subset}.json has per_length, nor kept "
                         f"outputs (eval/{subset}{OUTPUTS}) to count it from (runs evaluated before either was "
                         f"recorded: {len(left_out)}); rerun their evaluation to record it")
    return dict(groups), left_out


def learning_curves(log: Path, metric: str = "accuracy", logged: Optional[set] = None) -> Dict[str, Dict[int, float]]:
    """subset -> {num_updates: value of `metric`} from the validation records of a fairseq train.log, simple or
    JSON format (a later record for the same update wins, e.g. after a resume). `logged`, if given, receives the
    names of every validated metric."""
    scorer = scoring.by_key(metric)  # its names in the validation records (cogs_tagging logs `exact_match`)
    names = scorer.logged_as if scorer else (metric,)
    curves: Dict[str, Dict[int, float]] = defaultdict(dict)
    for subset, step, stats in train_log.validation_records(log):
        if logged is not None:
            logged.update(stats)
        value = next((stats[k] for k in names if k in stats), None)
        if value is not None:
            curves[subset][step] = value
    return dict(curves)


def at_best(curves: Dict[str, Dict[int, float]], select: str) -> Optional[Tuple[int, Dict[str, float]]]:
    """Early stopping from a run's learning curves: (update, {subset: value at that update}) at the best `select`
    value, a tie going to the later update as fairseq's checkpoint_best.pt does (it is rewritten when
    `--maximize-best-checkpoint-metric` sees a value >= the best so far); None without `select` values."""
    steps = sorted(curves.get(select, {}))
    if not steps:
        return None
    best = max(steps, key=lambda u: (curves[select][u], u))
    return best, {subset: c[best] for subset, c in curves.items() if best in c}


def early_stopping_table(spec: dict, runs: List[dict], select: str, metric: str, scale: float = 1.0,
                         digits: int = 2) -> str:
    """Per finished run: the in-loop validation values of every subset at the update where `select` was best
    (at_best), e.g. Russin et al.'s test accuracy at the best validation accuracy."""
    rows = []
    for r in runs:
        if not _finished(r):
            continue
        found = at_best(learning_curves(run_log(r["dir"]), metric), select)
        if found:
            rows.append((r, *found))
    if not rows:
        raise UsageError(f"no finished run logged a validation {metric!r} on {select!r} (--early-stopping {select})")
    subsets = _order(list(dict.fromkeys(s for _, _, values in rows for s in values)))
    header = ["dataset", "configuration", "seed", f"update (best {select})"] + subsets
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r, step, values in rows:
        cells = [f"{scale * values[s]:.{digits}f}" if s in values else "" for s in subsets]
        lines.append("| " + " | ".join([_label(spec, "datasets", r["dataset"]), _label(spec, "configurations", r["config"]),
                                        str(r["seed"]), f"{step:,}", *cells]) + " |")
    return "\n".join(lines) + "\n"


def plot_curves(spec: dict, runs: List[dict], folder, scale: float = 1.0, metric: str = "accuracy") -> List[Path]:
    from fairseq_compgen.pipelines.plotting import pyplot

    plt = pyplot()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written, without, logged = [], [], set()
    for dataset in dict.fromkeys(r["dataset"] for r in runs):
        # config -> subset -> update -> [value per seed]
        data: Dict[str, Dict[str, Dict[int, List[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
        for r in runs:
            if r["dataset"] == dataset:
                for subset, curve in learning_curves(run_log(r["dir"]), metric, logged).items():
                    for step, value in curve.items():
                        data[r["config"]][subset][step].append(value * scale)
        subsets = _order({s for c in data.values() for s in c})
        if not subsets:
            without.append(dataset)
            continue
        fig, axes = plt.subplots(1, len(subsets), figsize=(4.5 * len(subsets), 3.5), squeeze=False)
        for ax, subset in zip(axes[0], subsets):
            for config, per_subset in data.items():
                pts = sorted(per_subset.get(subset, {}).items())
                if not pts:
                    continue
                x = [p[0] for p in pts]
                mean = [statistics.fmean(v) for _, v in pts]
                std = [statistics.stdev(v) if len(v) > 1 else 0.0 for _, v in pts]
                line, = ax.plot(x, mean, label=_label(spec, "configurations", config), marker="." if len(x) < 30 else None)
                ax.fill_between(x, [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)],
                                color=line.get_color(), alpha=0.2, linewidth=0)
            ax.set_title(textwrap.fill(f"{_label(spec, 'datasets', dataset)}: {subset}", 36))  # inside its panel
            ax.set_xlabel("updates")
            ax.set_ylabel(metric + by_length.unit(scale))
            ax.grid(alpha=0.3)
        axes[0][-1].legend(fontsize="small")
        fig.tight_layout()
        path = folder / f"{dataset}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    if without:
        print(f"aggregate: no learning-curve plot for {', '.join(without)}: no validation {metric!r} in the runs' "
              f"train.log (validations there log: {', '.join(sorted(logged)) or 'nothing'})", file=sys.stderr)
    return written


def plot_t5_biases(runs: List[dict], folder) -> List[Path]:
    folder = Path(folder)
    written = []
    for r in runs:
        ckpt = Path(r["dir"]) / "checkpoint_last.pt"
        if "t5" not in r["arch"] and "--self-attn-pos" not in r.get("flags", []) or not _finished(r):
            continue
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{r['dataset']}_{r['config']}_seed{r['seed']}.png"
        # its own process: torch stays out of this one
        p = subprocess.run([sys.executable, "-m", "fairseq_compgen.pipelines.t5_biases", str(ckpt), "-o", str(path)],
                           capture_output=True, text=True)
        if p.returncode == 0:  # beside the plot, its printed summary: each layer's gate and heads' preferences
            path.with_suffix(".txt").write_text("\n".join(line for line in p.stdout.splitlines()
                                                           if not line.startswith("wrote ")) + "\n")
            written.append(path)
        else:
            print(f"aggregate: no T5 bias plot for {r['dir']}: {p.stderr.strip()[-300:]}", file=sys.stderr)
    return written


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
    p.add_argument("--export", metavar="DIR",
                   help="copy what the numbers are made of to DIR (e.g. results/NAME): per finished run its eval "
                        "JSONs and kept outputs, records (done.json, settings.json, command.txt, commit.txt, ...) and train.log's "
                        "metric lines; plus sweep.json and the tables. No checkpoints")
    a = p.parse_args(argv)
    if not (math.isfinite(a.scale) and a.scale > 0):  # 0 tabulated every value as 0, in silence
        raise UsageError(f"--scale {a.scale:g}: expected a positive number (100 for percent)")
    if a.digits < 0:  # a traceback from the number format
        raise UsageError(f"--digits {a.digits}: expected 0 or more")
    outs = [Path(o) for o in a.outs]
    a.metric = a.metric or default_metric(read_plan(outs[0])["spec"])
    out = Path(a.tables) if a.tables else outs[0]  # where the tables and plots are written
    spec, runs, cells = collect(outs, a.metric)
    if a.spec:
        spec = labels_from(a.spec, spec)
    if not any(c.n for c in cells.values()):
        raise UsageError(f"{', '.join(map(str, outs))}: none of the {len(runs)} planned runs has finished (no "
                         f"done.json with results): nothing to tabulate")
    out.mkdir(parents=True, exist_ok=True)  # only once there is something to write into it
    md = markdown_table(spec, cells, a.best, a.scale, a.digits, a.transpose)
    tables = [Path(a.markdown or out / "table.md"), Path(a.csv or out / "table.csv"), out / "runs.md",
              out / "runs.csv"]  # what this call writes, for --export; the views are added as written
    atomic_write_text(tables[0], md)
    write_csv(tables[1], cells, a.best, a.metric, spec, a.scale)
    print(md, end="")
    rows = run_rows(runs, cells)
    atomic_write_text(out / "runs.md", runs_table(spec, rows, a.metric, a.scale, a.digits))
    write_runs_csv(out / "runs.csv", rows, a.metric)
    if a.categories:
        cat_md = category_table(spec, runs, a.categories)
        tables.append(out / f"categories_{a.categories}.md")
        atomic_write_text(tables[-1], cat_md)
        print(cat_md, end="")
    length_groups = {}  # subset -> its groups
    for subset in dict.fromkeys(a.by_length):
        length_groups[subset], left_out = by_length_groups(runs, subset)
        len_md = by_length.table(length_groups[subset], subset, functools.partial(_label, spec), left_out, a.scale,
                                 a.digits)
        tables.append(out / f"by_length_{subset}.md")
        atomic_write_text(tables[-1], len_md)
        print(len_md, end="")
    if a.early_stopping:
        es_md = early_stopping_table(spec, runs, a.early_stopping, a.metric, a.scale, a.digits)
        tables.append(out / f"early_stopping_{a.early_stopping}.md")
        atomic_write_text(tables[-1], es_md)
        print(es_md, end="")
    for first, second in a.compare:
        cmp_md = comparison_table(spec, cells, first, second, scale=a.scale, digits=a.digits)
        tables.append(out / f"compare_{first}_{second}.md")
        atomic_write_text(tables[-1], cmp_md)
        print(cmp_md, end="")
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
            written += by_length.plot(groups, subset, functools.partial(_label, spec), plots, a.scale)
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
