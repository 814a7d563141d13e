"""The finished runs of a sweep and their values, for `fairseq-compgen aggregate` (pipelines/aggregate.py).

A sweep's output folder holds its plan (sweep.json, the runner's) and one folder per run; a run counts once it has
its done.json, and only with the settings its plan gives it. Several folders of one sweep (seeds run on other
machines or days) are pooled: each planned (dataset, configuration, seed) once, from the folder where it finished,
and only runs trained alike (the same fairseq-train options and data) share a cell. `collect` turns them into
cells: per (dataset, subset, configuration), one value of the metric per seed. The by-length and per-category views
read the exact-match results of the same runs (exact_match_results, by_length_groups).
"""
from __future__ import annotations

import math
import re
import shlex
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from fairseq_compgen.data.io import read_text_lines
from fairseq_compgen.errors import UsageError, read_json
from fairseq_compgen.pipelines import by_length
from fairseq_compgen.pipelines.evaluate import OUTPUTS
from fairseq_compgen.pipelines.runner import EVAL_EXPECTED, read_done
from fairseq_compgen.pipelines.sweep import DONE, planned_settings, read_plan

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




def read_metric(path: Path, metric: str) -> float:
    """The numeric value of `metric` in an evaluation JSON; UsageError naming the file and its keys if absent."""
    result = read_json(path, EVAL_EXPECTED)
    value = result.get(metric) if isinstance(result, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        keys = ", ".join(result) if isinstance(result, dict) else type(result).__name__
        raise UsageError(f"{path} has no numeric {metric!r} (--metric {metric}); its keys: {keys}")
    if not math.isfinite(value):  # JSON's NaN/Infinity: a mean, std and p-value of it mean nothing
        raise UsageError(f"{path}: {metric!r} is {value}: expected a finite number (fairseq-compgen eval writes one)")
    return float(value)


LEFT_OUT = "_left_out"  # set by pool on a finished run made with other settings than its plan gives it


def finished(run: dict) -> bool:
    """A planned run has finished once its done.json exists (the runner writes it last); one that pool left out,
    made with other settings than its plan's, counts as not finished for every table, view and export."""
    return not run.get(LEFT_OUT) and (Path(run["dir"]) / DONE).is_file()


def _made_as_planned(run: dict) -> bool:
    """A finished run was made with the settings its plan gives it (done.json's "settings"; a run recorded before
    done.json kept them counts as made so)."""
    made_with = read_done(Path(run["dir"])).get("settings")
    return made_with is None or made_with == planned_settings(run)


# an export of several pooled folders (export) keeps each other folder's plan as sweep.<i>.<folder name>.json
POOLED_PLAN = re.compile(r"sweep\.(\d+)\.(.+)\.json")
EXPORTED_LOG = "train_metrics.log"  # what an export keeps of a run's train.log: its metric lines
RECORD = "aggregate.json"  # marks an export: the options, plans and files of the aggregate call that wrote it
PLAN_OF = "_plan_of"  # a planned run's (OUT, plan file name), set by pool


def exported_plans(out: Path) -> Dict[str, str]:
    """"<dataset>/<config>/seed<k>" -> the plan file of OUT that an export recorded each finished run as planned
    in (its aggregate.json's "plans"); {} for a folder that is no export, or an export written before the record."""
    path = Path(out) / RECORD
    record = read_json(path, "an export's record (JSON with options, runs, plans)") if path.is_file() else {}
    return record.get("plans") or {} if isinstance(record, dict) else {}


def _plan_made_by(first: dict, second: dict, recorded: Optional[str]) -> dict:
    """Of two plans' entries for one run folder (an export's pooled plans), the one the run was made by: the plan
    the export recorded for it (`recorded`, from exported_plans), else the one whose settings the run's done.json
    gives."""
    if recorded:
        return second if second[PLAN_OF][1] == recorded else first
    return second if finished(second) and _made_as_planned(second) and not _made_as_planned(first) else first


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


# fairseq-train options that differ between runs of one cell by design: where it ran and what it logged (all of
# fairseq's logging options, CommonConfig's), not what it trains
LOGGING = {"--log-format", "--log-interval", "--log-file", "--no-progress-bar", "--tensorboard-logdir",
           "--wandb-project", "--aim-repo", "--aim-run-hash", "--azureml-logging"}
RUN_SPECIFIC = {"--save-dir", "--seed", "--user-dir", "--cpu", "--num-workers"} | LOGGING


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


def trained_options(run: dict) -> Optional[Dict[str, object]]:
    """What a finished run was trained with, for comparing runs: its fairseq-train options (train_options) with the
    budget as trained ("updates trained", done.json's num_updates) in place of --max-update/--max-epoch, as a run
    resumed to a larger --max-update keeps its first command in command.txt; None without command.txt (a run made
    by hand)."""
    command = Path(run["dir"]) / "command.txt"
    if not command.is_file():
        return None
    options = {k: v for k, v in train_options(command).items() if k not in ("--max-update", "--max-epoch")}
    done = read_done(Path(run["dir"]))  # a half-written or edited one: a UsageError naming it
    if "num_updates" in done:
        options["updates trained"] = done["num_updates"]
    return options


ABSENT = "(absent)"


def differing_options(first: Dict[str, object], second: Dict[str, object]) -> List[Tuple[str, object, object]]:
    """(option, its value in first, in second) for every option of either whose value differs (ABSENT where one
    lacks it), sorted by option."""
    return [(k, first.get(k, ABSENT), second.get(k, ABSENT))
            for k in sorted(set(first) | set(second)) if first.get(k, ABSENT) != second.get(k, ABSENT)]


def check_alike(runs: List[dict], pooled: bool = True) -> None:
    """Finished runs of one (dataset, configuration) must have been trained with the same fairseq-train options
    (train_options), and every run of a dataset on the same data (data.json, where recorded); UsageError naming the
    first pair that differs and how. Runs without command.txt (made by hand) are refused only when several folders
    are `pooled`; in one folder they are left unchecked."""
    first: Dict[Tuple[str, str], Tuple[Path, Dict[str, object]]] = {}
    data: Dict[str, Tuple[Path, str]] = {}
    for r in runs:
        if not finished(r):
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
        options = trained_options(r)
        key = r["dataset"], r["config"]
        if key not in first:
            first[key] = command, options
            continue
        other_path, other = first[key]
        diff = differing_options(other, options)
        if diff:
            shown = "; ".join(f"{k}: {a} vs {b}" for k, a, b in diff[:5])
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
            if before is not None and finished(before) and finished(r):
                raise UsageError(f"{r['dataset']}/{r['config']}/seed{r['seed']} finished in both {before['dir']} "
                                 f"and {r['dir']}: pool one of them (move the other away)")
            if before is None or finished(r):
                chosen[key] = r
    runs = list(chosen.values())
    for r in runs:  # made under another plan: not this cell's run, and not to be compared with the others below
        if finished(r) and not _made_as_planned(r):
            r[LEFT_OUT] = True
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
    changed = [r["dir"] for r in runs if r.get(LEFT_OUT)]  # finished under other settings than sweep.json's
    for r in runs:
        d = Path(r["dir"])
        if not finished(r):
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
        for subset in subset_order(subsets.get(dataset) or [NO_SUBSET]):
            for config in configs:
                if (dataset, config) not in planned:
                    continue
                cell = Cell(dataset, subset, config, planned[dataset, config])
                for (d, c, seed), accs in results.items():
                    if d == dataset and c == config and subset in accs:
                        cell.values[seed] = accs[subset]
                cells[dataset, subset, config] = cell
    return spec, runs, cells


def subset_order(subsets: Sequence[str]) -> List[str]:
    """Subsets in the tables' order: valid, test, gen, then the others as given."""
    rank = {"valid": 0, "test": 1, "gen": 2}
    return sorted(dict.fromkeys(subsets), key=lambda s: rank.get(s, 3))


def exact_match_results(runs: List[dict], subset: str, flag: str):
    """(run, path, eval/<subset>.json) of every finished run that has one; UsageError (naming `flag`) for a
    result that is not exact match."""
    for r in runs:
        path = Path(r["dir"]) / "eval" / f"{subset}.json"
        if not finished(r) or not path.is_file():
            continue
        result = read_json(path, EVAL_EXPECTED)
        if not isinstance(result, dict) or "accuracy" not in result:
            raise UsageError(f"{path} has no exact-match 'accuracy' ({flag} is for exact-match results); "
                             f"its keys: {', '.join(result)}")
        yield r, path, result


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
    if not groups and not left_out:  # no finished run evaluated the subset at all: rerunning would not help
        evaluated = sorted({f.stem for r in runs if finished(r) for f in (Path(r["dir"]) / "eval").glob("*.json")})
        raise UsageError(f"--by-length {subset}: no finished run has eval/{subset}.json (the subsets they evaluated: "
                         f"{', '.join(evaluated) or 'none'})")
    if not groups:
        raise UsageError(f"--by-length {subset}: no finished run's eval/{subset}.json has per_length, nor kept "
                         f"outputs (eval/{subset}{OUTPUTS}) to count it from (runs evaluated before either was "
                         f"recorded: {len(left_out)}); rerun their evaluation to record it")
    return dict(groups), left_out
