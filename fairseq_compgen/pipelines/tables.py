"""The tables of `fairseq-compgen aggregate` (pipelines/aggregate.py), from pooling.collect's cells and runs: the
papers' table (mean ± sample std over seeds, with the paper's value and the verdict), its CSV, the per-run table
(every seed's values beside its cost, commit, data and machine), the per-category view, the comparison of two
configurations (pipelines/compare.py) and of the same cells in another sweep (--against). Labels and paper values come from the sweep's spec.
"""
from __future__ import annotations

import csv
import math
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from fairseq_compgen.data.io import staged_path
from fairseq_compgen.errors import UsageError, read_json
from fairseq_compgen.pipelines import train_log
from fairseq_compgen.pipelines.compare import permutation_p
from fairseq_compgen.pipelines.pooling import (EVAL_EXPECTED, Cell, data_sha256, differing_options,
                                               exact_match_results, finished, read_done, run_log, subset_order,
                                               trained_options)


def label(spec: dict, kind: str, name: str) -> str:
    """A dataset's or configuration's (`kind`: "datasets" | "configurations") label in the sweep file, else its name."""
    entry = (spec.get(kind) or {}).get(name) or {}
    return str(entry.get("label") or name)


def paper_value(spec: dict, dataset: str, subset: str, config: str) -> Optional[str]:
    """The paper's value of this cell as the sweep file writes it (a configuration's `paper: {dataset/subset: ...}`),
    or None."""
    value = (((spec.get("configurations") or {}).get(config) or {}).get("paper") or {}).get(f"{dataset}/{subset}")
    return None if value is None else str(value)


# "VALUE", "VALUE ± STD", or "VALUE ± SEM (SEM, N seeds)" where the paper's ± is a standard error (Chaabouni et
# al.'s tables): the band then uses its standard deviation, SEM * sqrt(N); a "%" after the value, the std or the
# whole says the paper's numbers are percent ("0.4 ± 0.3 %", "43.0 ± 9.5 % (SEM, 3 seeds)")
_PAPER = re.compile(r"^\s*([-+]?\d+(?:\.(\d+))?)\s*(%)?\s*(?:±|\+-|\+/-)?\s*(\d+(?:\.\d+)?)?\s*(%)?"
                    r"(?:\s*\((?i:SEM),\s*(\d+)\s*(?i:seeds?)\))?\s*(%)?\s*$")


def verdict(cell: Optional[Cell], paper: Optional[str], scale: float = 1.0) -> str:
    """Whether our mean lies inside the paper's band: within 2 of the paper's standard deviations
    ("0.30 ± 0.02"; "43.0 ± 9.5 (SEM, 3 seeds)", a standard error over 3 seeds, is a standard deviation of
    9.5 * sqrt(3)), at least half a unit of its last printed digit (so "1.00 ± 0.00" accepts [0.995, 1.005]); or
    within 0.05 (times `scale`, the paper's units) where it gives a single value ("0.637"). "" when there is nothing
    to compare (no runs, no paper value, or a paper value that is not a number, e.g. "median 91.0"). A paper value
    above 1 against our fractions at scale 1 ("99.8 ± 0.1" against 0.834: the paper's percent) is not compared:
    the verdict says to pass --scale 100 instead of "outside" for any value of ours. A value marked percent
    ("0.4 ± 0.3 %") is compared with our fractions at any --scale: unmarked, a percent below 1 read as a
    fraction."""
    if cell is None or not cell.n or paper is None:
        return ""
    m = _PAPER.match(str(paper))
    if not m:
        return ""
    value, decimals, std, sem_seeds = float(m.group(1)), len(m.group(2) or ""), m.group(4), m.group(6)
    if std is not None:
        std = float(std) * (math.sqrt(int(sem_seeds)) if sem_seeds else 1.0)
    ours = cell.mean * scale
    if any(m.group(i) for i in (3, 5, 7)):  # percent: the paper's numbers as fractions, beside ours unscaled
        ours, scale, value, decimals = cell.mean, 1.0, value / 100, decimals + 2
        std = None if std is None else std / 100
    elif scale == 1 and value > 1 and 0 <= cell.mean <= 1:
        return "not compared: the paper's value is in percent, ours a fraction: --scale 100"
    band = max(2 * std, 0.5 * 10 ** -decimals) if std is not None else 0.05 * scale
    return "inside" if abs(ours - value) <= band + 1e-12 else "outside"


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
    col_names = [f"{label(spec, 'datasets', d)}: {s}" for d, s in columns]
    cfg_names = [label(spec, "configurations", c) for c in configs]

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
    lines = [f"| dataset: subset | {label(spec, 'configurations', first)} (seeds) | "
             f"{label(spec, 'configurations', second)} (seeds) | difference | p (two-sided "
             f"permutation test over seeds) |", "|---|---|---|---|---|"]
    for (dataset, subset, config), cell in sorted(cells.items()):
        if config != first:
            continue
        other = cells.get((dataset, subset, second))
        if other is None or not cell.values or not other.values:
            continue
        a, b = list(cell.values.values()), list(other.values.values())
        p, exact = permutation_p(a, b)
        lines.append(f"| {label(spec, 'datasets', dataset)}: {subset} | "
                     f"{scale * cell.mean:.{digits}f} ({cell.n}) | {scale * other.mean:.{digits}f} ({other.n}) | "
                     f"{scale * (other.mean - cell.mean):+.{digits}f} | "
                     f"{p:.3f}{'' if exact else ' (Monte Carlo)'} |")
    if len(lines) == 2:
        raise UsageError(f"--compare {first} {second}: no dataset where both have finished runs")
    return "\n".join(lines) + "\n"


def _with_seeds(cell: Cell, scale: float, digits: int) -> str:
    """"mean ± std (s1 v1, s2 v2, ...)": a cell with every seed's value, so that seeds can be read in pairs."""
    values = ", ".join(f"s{seed} {scale * v:.{digits}f}" for seed, v in sorted(cell.values.items()))
    return f"{format_cell(cell, scale, digits)} ({values})"


def _first_options(runs: List[dict], dataset: str, config: str) -> Optional[Dict[str, object]]:
    """The trained options (pooling.trained_options) of the first finished run of (dataset, config) that recorded
    them; the runs of a cell were trained alike (pooling.check_alike)."""
    for r in runs:
        if r["dataset"] == dataset and r["config"] == config and finished(r):
            options = trained_options(r)
            if options is not None:
                return options
    return None


def _option_change(option: str, there: object, here: object) -> str:
    def shown(value: object) -> str:
        return "on" if value is True else str(value).replace("|", "\\|")
    return f"`{option}` {shown(there)} → {shown(here)}"


def against_table(here: Tuple[dict, List[dict], Dict[Tuple[str, str, str], Cell]],
                  there: Tuple[dict, List[dict], Dict[Tuple[str, str, str], Cell]], flag: str,
                  scale: float = 1.0, digits: int = 2) -> str:
    """`--against OTHER` as markdown: each cell (dataset, subset, configuration) with finished seeds both in OTHER's
    sweep (`there`, its (spec, runs, cells) from pooling.collect) and in this one (`here`): mean ± std with every
    seed's value on each side, the difference here - there, the p of a two-sided permutation test over seeds
    (pipelines/compare.py), and the fairseq-train options in which the two sides' runs differ (command.txt and the
    updates trained, pooling.trained_options; the seed, paths and logging aside): what the comparison varies.
    UsageError (naming `flag`) when a dataset's runs trained on different data on the two sides, or when no cell
    has finished seeds on both."""
    (spec, runs, cells), (other_spec, other_runs, other_cells) = here, there
    data: Dict[str, Dict[str, str]] = defaultdict(dict)  # dataset -> side -> the data's hash, where recorded
    for side, side_runs in (("here", runs), ("there", other_runs)):
        for r in side_runs:
            sha = data_sha256(r) if finished(r) else None
            if sha is not None:
                data[r["dataset"]].setdefault(side, sha)
    for dataset, sides in data.items():
        if len(set(sides.values())) > 1:
            raise UsageError(f"{flag}: dataset {dataset!r} was trained on other data there (sha256 "
                             f"{sides['there'][:12]}) than here ({sides['here'][:12]}): its cells cannot be compared")
    names = other_spec.get("name"), spec.get("name")
    lines = [f"| dataset: subset | configuration | there: {names[0]} | here: {names[1]} | difference (here - there) "
             f"| p (two-sided permutation test over seeds) | options that differ (there → here) |",
             "|---|---|---|---|---|---|---|"]
    for (dataset, subset, config), cell in cells.items():
        other = other_cells.get((dataset, subset, config))
        if other is None or not cell.values or not other.values:
            continue
        p, exact = permutation_p(list(other.values.values()), list(cell.values.values()))
        options = [_first_options(side_runs, dataset, config) for side_runs in (other_runs, runs)]
        changes = ("not recorded (no command.txt)" if None in options else
                   "; ".join(_option_change(*d) for d in differing_options(*options)) or "none")
        lines.append(f"| {dataset}: {subset} | {config} | "
                     f"{_with_seeds(other, scale, digits)} | {_with_seeds(cell, scale, digits)} | "
                     f"{scale * (cell.mean - other.mean):+.{digits}f} | {p:.3f}{'' if exact else ' (Monte Carlo)'} | "
                     f"{changes} |")
    if len(lines) == 2:
        raise UsageError(f"{flag}: no cell (dataset, subset, configuration) has finished runs both there "
                         f"({names[0]}) and here ({names[1]})")
    return "\n".join(lines) + "\n"


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
    recorded = read_json(machine, "the machine a run trained on, as fairseq-compgen train records it (a JSON "
                                  "object)") if machine.is_file() else None
    if recorded is not None and not isinstance(recorded, dict):
        raise UsageError(f"{machine}: expected the machine a run trained on, as fairseq-compgen train records it "
                         f"(a JSON object)")
    text = _machine_text(recorded)
    evaluated = set()
    for result in sorted((folder / "eval").glob("*.json")):
        record = read_json(result, EVAL_EXPECTED)
        where = ((record.get("evaluated") if isinstance(record, dict) else None) or {}).get("machine")
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
    subsets = subset_order([s for row in rows for s in row["values"]])
    header = ["dataset", "configuration", "seed", *(f"{s} {metric}" for s in subsets), "updates",
              "train wall (min)", "train CPU (min)", "eval (s)", "commit", "data", "machine"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        values = [f"{scale * row['values'][s]:.{digits}f}" if s in row["values"] else "" for s in subsets]
        wall, cpu = row["train_wall_s"], row["train_cpu_s"]
        lines.append("| " + " | ".join([
            label(spec, "datasets", row["dataset"]), label(spec, "configurations", row["config"]), str(row["seed"]),
            *values, f"{row['updates']:,}" if row["updates"] is not None else "",
            f"{wall / 60:.1f}" if wall is not None else "", f"{cpu / 60:.1f}" if cpu is not None else "",
            "" if row["eval_s"] is None else f"{row['eval_s']:.0f}",
            row["commit"], row["data"], row["machine"]]) + " |")
    return "\n".join(lines) + "\n"


def write_runs_csv(path, rows: List[dict], metric: str) -> None:
    subsets = subset_order([s for row in rows for s in row["values"]])
    with staged_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:  # renamed when whole
        w = csv.writer(f)
        w.writerow(["dataset", "configuration", "seed", "metric", *subsets, "updates", "train_wall_s", "train_cpu_s",
                    "eval_s", "commit", "data", "machine"])
        for row in rows:
            w.writerow([row["dataset"], row["config"], row["seed"], metric,
                        *(repr(row["values"][s]) if s in row["values"] else "" for s in subsets),
                        row["updates"], row["train_wall_s"], row["train_cpu_s"], row["eval_s"], row["commit"],
                        row["data"], row["machine"]])


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
    header = ["category"] + [f"{label(spec, 'configurations', c)} (seeds {', '.join(map(str, seeds[d, c]))})"
                             for d, c in cols]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for cat in cats:
        vals = [per[col].get(cat) for col in cols]
        lines.append("| " + " | ".join([cat] + [f"{statistics.fmean(v):.{digits}f}" if v else "" for v in vals])
                     + " |")
    return "\n".join(lines) + "\n"
