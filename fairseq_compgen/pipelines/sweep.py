"""Run a sweep: configurations x seeds x datasets, each run in its own folder, resumable, several at a time.

    fairseq-compgen sweep SWEEP [--out DIR] [--jobs N] [--devices 0,1] [--cpu | --gpu] [--decode-cpu] [--only PATTERN] [--dry-run] [--threads N]
        [--prep]
        [--engine local|slurm|submitit-local [Slurm resources]]

SWEEP is a sweep file, or the name of one shipped in fairseq_compgen/sweeps/ (csordas_table3, ...).

A sweep file (YAML)::

    name: csordas_table3
    output: runs/csordas_table3          # default --out (relative to the current directory)
    seeds: [1, 2, 3, 4, 5]
    launch: {gpus: 1}                    # fairseq-compgen train's launch: gpus: N | cpu: true | cpu_procs: N (torchrun)
    flags: [--fp16]                      # fairseq-train flags for every run (a list, or one string)
    generate_flags: "--batch-size 256"   # extra fairseq-generate flags for evaluation (fairseq-compgen eval)
    datasets:
      scan:
        label: SCAN (length cutoff 26)   # column title in the tables
        data: data/scan/length_cutoff_26/bin
        prep: fairseq-compgen prep scan --split length_cutoff_26 --out data/scan  # how to make `data` (optional:
                                         # a missing folder is refused with this command; --prep runs it)
        recipe: csordas/scan             # training recipe (fairseq-compgen recipes lists them); omit for none
        metric: exact_match              # fairseq-compgen eval --metric: exact_match (default) | bleu | comp | ...
        subsets: [valid, gen]            # evaluated subsets (default: every subset in data but train)
        flags: []                        # dataset-specific flags
        seeds: [1, 2, 3]                 # optional: overrides the sweep's seeds for this dataset
        vars: {suffix: scan}             # optional: extra names for {...} templates below
    configurations:
      transformer:
        label: Transformer
        arch: "compgen_transformer_{recipe}"  # {name}, {recipe} (the dataset recipe's last part: scan) and
                                              # vars of the dataset are filled in
        flags: []
        datasets: [scan]                 # optional: the datasets this configuration runs on (default: all)
        recipes: {csordas/cfq: csordas/cfq_universal}  # optional: replaces a dataset's recipe for this configuration
        paper: {scan/gen: "0.30 ± 0.02"} # optional: the paper's value of a dataset/subset, shown as written beside
                                         # ours by `fairseq-compgen aggregate` (labels and paper values train nothing);
                                         # "46.9 ± 8.9 %": in percent, compared with ours at any --scale

Each run lives in OUT/<dataset>/<configuration>/seed<k>/: fairseq's checkpoints, train.log (appended to on
every restart), command.txt / launch.txt / commit.txt / machine.txt (written by `fairseq-compgen train`),
eval/<subset>.json (written by `fairseq-compgen eval` from checkpoint_last.pt: no early stopping) and, once
training and evaluation have both succeeded, done.json (results, commit, the evaluation's seconds). A run with done.json is skipped; any other run is (re)started: fairseq-train resumes
from checkpoint_last.pt in the same --save-dir by itself. The resolved plan is written to OUT/sweep.json for
the aggregator (:mod:`fairseq_compgen.pipelines.aggregate`), with the run folders relative to OUT (a copied or
moved OUT aggregates its own runs).

What cannot go wrong silently (each refused with one line, before any run starts where it can be known then):
* the sweep file is checked as a whole against its schema (pipelines/sweep_schema.py: unknown keys, wrong types,
  a key given twice at any depth, an empty or repeated seed list, a dataset or configuration name that is not a
  plain folder name), every arch must be registered, every recipe known, every selected run's data folder must
  hold fairseq dictionaries (the refusal names every missing folder with its dataset's `prep` command) and every
  subset its dataset lists;
* a run folder remembers the settings it was started with (settings.json: arch, recipe and the recipe's options,
  flags, data, subsets, ...); a
  rerun after the sweep file changed refuses those runs (CHANGED, naming the settings) instead of skipping or
  resuming them under the new name: move the folder away or use another --out;
* one sweep per output folder: OUT/sweep.json (which also records the sweep file's path and sha256) is replaced
  only by a rerun of the same sweep (same name, every run planned there still planned: a resume, possibly with
  runs added); another sweep would make the first one's runs vanish from aggregate and is refused;
* one writer per run folder: the sweep holds a lock on OUT/.../seedK/.lock, inherited by the trainer and the
  evaluator, so it lasts as long as any of them runs. A rerun finding a run locked by the trainer of a sweep that
  is gone (killed with SIGKILL) stops that orphaned trainer first (when its process group has the lock open);
  one locked by a live sweep or a hand-started training is BUSY and left
  alone (counted as busy, not failed; the exit status is 1 while a run is failed or busy, i.e. not done).
  SIGTERM, SIGHUP and Ctrl-C stop the sweep's trainers.

``--jobs N`` runs N runs at once (several small runs share one GPU well); ``--devices 0,1`` gives the job
slots CUDA_VISIBLE_DEVICES round-robin. ``--cpu`` forces CPU training and decoding (for tests and smoke runs);
``--gpu`` the GPU, also where the file's launch says cpu (the device is not a setting: a run may move);
``--decode-cpu`` evaluates on CPU wherever the runs train (what scripts/gpu_oneshot.sh does).
``--engine slurm`` submits every run as a Slurm job through submitit instead (pipelines/submit.py).
"""
from __future__ import annotations

import argparse
import copy
import fnmatch
import functools
import hashlib
import json
import os
import shlex
import signal
import sys
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence

from fairseq_compgen import recipes, scoring
from fairseq_compgen.data.io import atomic_write_text
from fairseq_compgen.errors import UsageError, read_json
from fairseq_compgen.pipelines import submit
from fairseq_compgen.pipelines.runner import COMPGEN, DONE, SETTINGS, Runner, read_done
from fairseq_compgen.pipelines.sweep_schema import line_of, load_spec, packaged, placeholders, resolve


def _flags(value) -> List[str]:
    """A flag list from YAML: a list (items may hold spaces-separated flags) or one string; None -> []."""
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    out: List[str] = []
    for v in value:
        out.extend(shlex.split(str(v)) if isinstance(v, str) else [str(v)])
    return out


@dataclass
class Run:
    dataset: str
    config: str
    seed: int
    arch: str
    data: str
    dir: str
    recipe: Optional[str] = None
    metric: str = "exact_match"
    flags: List[str] = field(default_factory=list)
    subsets: Optional[List[str]] = None
    launch: List[str] = field(default_factory=list)
    generate_flags: str = ""

    @property
    def name(self) -> str:
        return f"{self.dataset}/{self.config}/seed{self.seed}"

    @property
    def path(self) -> Path:
        return Path(self.dir)

    @property
    def checkpoint(self) -> Path:
        return self.path / "checkpoint_last.pt"

    def train_command(self) -> List[str]:
        recipe = ["--recipe", self.recipe] if self.recipe else []
        return [*COMPGEN, "train", *self.launch, *recipe, self.arch, self.data, self.dir, *self.flags,
                "--seed", str(self.seed)]

    def eval_command(self) -> List[str]:
        flags = shlex.split(self.generate_flags)
        rest = shlex.join(f for f in flags if f != "--cpu")
        # --overwrite: the run folder is the sweep's, and its checkpoint_last.pt may have been rewritten by a
        # resumed training since an earlier, failed evaluation
        return [*COMPGEN, "eval", str(self.checkpoint), self.data, *(self.subsets or []), "--metric", self.metric,
                "--overwrite", *user_dir(self.flags),
                *(["--cpu"] if "--cpu" in flags else []), *([f"--generate-flags={rest}"] if rest else [])]

    def is_done(self) -> bool:
        """The run has finished: its done.json is there (a half-written or edited one, not a JSON object, is a
        UsageError naming it rather than a finished run)."""
        if not (self.path / DONE).is_file():
            return False
        read_done(self.path)
        return True

    def settings(self) -> dict:
        """What makes this run this run: a run folder started with other settings is not this run. The device
        is not a setting (`--cpu` in the generate flags comes from the launch): a run may resume elsewhere."""
        generate = shlex.join(t for t in shlex.split(self.generate_flags) if t != "--cpu")
        options = recipes.get(self.recipe).options if self.recipe else None
        return {k: getattr(self, k) for k in ("arch", "data", "recipe", "flags", "subsets")} | {
            "recipe_options": options, "metric": self.metric, "generate_flags": generate, "seed": self.seed}

    def changed_settings(self) -> List[str]:
        """The settings in which the run folder's settings.json differs from this run's ([] if none or same)."""
        path = self.path / SETTINGS
        if not path.is_file():
            return []
        saved, now = read_json(path, "the settings a sweep recorded when the run started"), self.settings()
        if not isinstance(saved, dict):
            raise UsageError(f"{path}: expected the settings a sweep recorded when the run started (a JSON object)")
        changed = [k for k in now if saved.get(k) != now[k]]
        if changed == ["data"] and self.same_data_moved():
            changed = []
        return [f"{k}: {saved.get(k)!r} -> {now[k]!r}" for k in changed]

    def same_data_moved(self) -> bool:
        """The run folder names another data folder than this run, but the files it trained on (its data.json) are
        this run's data folder's: the same run, moved from another machine (campaign/carry.py, or a run begun on a
        lent GPU and handed to the CPU lanes by campaign/gpu_import.py). fairseq-compgen train compares the files
        again when it resumes (train.check_resume), and its command.history names the new folder."""
        from fairseq_compgen.pipelines.train import recorded_data_key

        if not (self.path / "data.json").is_file() or not Path(self.data).is_dir():
            return False
        trained_on, folder = recorded_data_key(self.path), Path(self.data).resolve()
        stamp = tuple((f.name, st.st_size, st.st_mtime_ns) for f in sorted(folder.iterdir()) if f.is_file()
                      for st in [f.stat()])
        return trained_on is not None and trained_on == _data_key(str(folder), stamp)


@functools.lru_cache(maxsize=None)
def _data_key(folder: str, stamp: tuple) -> str:
    """train.same_data_key of the data folder's files, hashed once per folder and process while its files' names,
    sizes and times (`stamp`) stay the same: a sweep's runs share a few data folders, and a large corpus takes
    seconds to hash."""
    from fairseq_compgen.pipelines.train import data_fingerprint, same_data_key

    return same_data_key(data_fingerprint(Path(folder)))


def load_sweep(path) -> dict:
    """The sweep file, checked against its schema (pipelines/sweep_schema.py), defaults filled in."""
    return load_spec(path)


def absent_data(selected: Sequence["Run"]) -> dict:
    """Dataset -> data folder, for the selected runs whose folder holds no fairseq dictionaries (not prepared)."""
    return {r.dataset: r.data for r in selected
            if not Path(r.data).is_dir() or not list(Path(r.data).glob("dict.*.txt"))}


def prep_commands(path, spec: dict, dataset: str) -> List[List[str]]:
    """The words of each `fairseq-compgen prep` command of a dataset's `prep:` (joined by &&; none without one)."""
    commands = []
    for part in ((spec["datasets"][dataset] or {}).get("prep") or "").split("&&"):
        words = shlex.split(part)
        if words and words[:2] != ["fairseq-compgen", "prep"]:
            raise UsageError(f"{path}: datasets.{dataset}.prep: {part.strip()!r}: expected fairseq-compgen prep "
                             f"commands (joined by &&)")
        commands += [words] if words else []
    return commands


def prepare_absent(path, spec: dict, selected: Sequence["Run"], echo=print) -> None:
    """`sweep --prep`: run the `prep:` command of each selected dataset whose data folder is not made yet (in the
    current folder, which the sweep's relative data paths also start from), as `fairseq-compgen prep` runs them; a
    dataset without one is left to validate's refusal. A failing command stops the sweep with its own error."""
    for dataset in absent_data(selected):
        for words in prep_commands(path, spec, dataset):
            echo(f"sweep: preparing {dataset!r}: {shlex.join(words)}")
            from fairseq_compgen import prep

            rc = prep.main(words[2:])
            if rc:
                raise UsageError(f"{path}: datasets.{dataset}.prep: {shlex.join(words)} exited with {rc}")


def validate(path, runs: Sequence["Run"]) -> None:
    """What the schema cannot see, before anything is prepared or run: archs registered, recipes known, the budget
    and batch values that `fairseq-compgen train` would refuse (train.check_budget), and each configuration's
    options as fairseq-train's parser reads them (train.check_fairseq_options: a typo in `flags:` is found here, not
    when its runs start, on Slurm or hours into a local sweep)."""
    import fairseq_compgen
    from fairseq.models import ARCH_MODEL_REGISTRY, FairseqEncoderDecoderModel

    from fairseq_compgen.pipelines.evaluate import check_generate_flags
    from fairseq_compgen.pipelines.train import check_budget, check_fairseq_options

    fairseq_compgen.register()
    parsed = set()  # (dataset, configuration): its seeds differ in --seed and --save-dir only
    for r in runs:
        where = f"{path}: configuration {r.config!r} on dataset {r.dataset!r}"
        if r.arch not in ARCH_MODEL_REGISTRY:
            raise UsageError(f"{where}: arch {r.arch!r} is not registered (fairseq-compgen help lists them)")
        scoring.get(r.metric, f"{path}: dataset {r.dataset!r}")
        if r.recipe and r.recipe not in recipes.names():
            raise UsageError(f"{path}: dataset {r.dataset!r}: unknown recipe {r.recipe!r} (known: "
                             f"{', '.join(recipes.names())})")
        try:  # the values given, as the run's `fairseq-compgen train` gets them (after its recipe's); a missing batch
            # size is left to that command (a dry run's sweep file need not give one)
            args = recipes.train_args(r.recipe, r.arch, r.data, r.dir, r.flags)
            check_budget(args, r.flags, need_batch=False)
            if (r.dataset, r.config) not in parsed:
                check_fairseq_options(args)
                parsed.add((r.dataset, r.config))
                generate = [f for f in shlex.split(r.generate_flags) if f != "--cpu"]
                if generate and issubclass(ARCH_MODEL_REGISTRY[r.arch], FairseqEncoderDecoderModel):  # not tagging
                    try:
                        check_generate_flags(generate)
                    except UsageError as e:
                        raise UsageError(f"generate_flags {shlex.join(generate)!r}: {e}") from None
        except UsageError as e:
            raise UsageError(f"{where}: {e}") from None


def check_data(path, selected: Sequence["Run"], spec: dict) -> None:
    """The selected runs' data folders present (refused all at once, each with its dataset's `prep` command from
    `spec`) and holding every subset their dataset lists."""
    absent = absent_data(selected)
    if absent:
        prep = {d: (v or {}).get("prep") for d, v in spec["datasets"].items()}
        how = [f"{d!r}: {data} (" + (f"prepare it with: {prep[d]}" if prep.get(d) else
                                     "prepare it first: the file names no prep command") + ")"
               for d, data in absent.items()]
        raise UsageError(f"{path}: {len(absent)} dataset(s) without a data folder with fairseq dictionaries "
                         f"(dict.*.txt): {'; '.join(how)}")
    for r in selected:
        have = data_subsets(r.data)
        missing = [s for s in r.subsets or [] if s not in have]
        if missing:
            line = line_of(path, f"datasets.{r.dataset}.subsets")
            raise UsageError(f"{path}{f':{line}' if line else ''}: datasets.{r.dataset}.subsets: no subset "
                             f"{', '.join(map(repr, missing))} in {r.data}: expected subsets it holds "
                             f"({', '.join(sorted(have)) or 'none'})")
    for r in selected:  # a paper value for a subset no run evaluates would be shown nowhere
        evaluated = r.subsets or sorted(data_subsets(r.data) - {"train"})
        for key in (spec["configurations"][r.config] or {}).get("paper") or {}:
            dataset, _, subset = str(key).partition("/")
            if dataset == r.dataset and subset not in evaluated:
                line = line_of(path, f"configurations.{r.config}.paper")
                raise UsageError(f"{path}{f':{line}' if line else ''}: configurations.{r.config}.paper: {key!r}: "
                                 f"dataset {r.dataset!r} evaluates no subset {subset!r}: expected one of "
                                 f"{', '.join(evaluated) or 'none'} (the paper's value would be shown nowhere)")


def data_subsets(data) -> set:
    """The subsets of a data folder (train included) that `fairseq-compgen eval` can read: binarized
    (<subset>.src-tgt.src.idx ...) or, for a COGS tagging folder, <subset>.parent."""
    pattern = "*.parent" if recipes.is_tagging(data) else "*.idx"
    return {p.name.split(".")[0] for p in Path(data).glob(pattern)}


def plan(spec: dict, out, cpu: bool = False, gpu: bool = False, decode_cpu: bool = False) -> List[Run]:
    """Every run of the sweep, in file order: dataset, then configuration, then seed. `gpu` drops the file's CPU
    launch (a CPU campaign's runs on a lent GPU: the device is not a setting, so they stay the same runs);
    `decode_cpu` evaluates on CPU whatever trains where."""
    if cpu and gpu:
        raise UsageError("--cpu and --gpu: choose one")
    out = Path(out).resolve()
    launch = dict(spec.get("launch") or {})
    if gpu:
        launch = {k: v for k, v in launch.items() if k not in ("cpu", "cpu_procs")}
    if cpu and not launch.get("cpu_procs"):
        launch = {"cpu": True}
    lopts: List[str] = []
    if launch.get("cpu_procs"):
        lopts = ["--cpu", "--nprocs", str(int(launch["cpu_procs"]))]
    elif launch.get("cpu"):
        lopts = ["--cpu"]
    elif int(launch.get("gpus", 1)) > 1:
        lopts = ["--gpus", str(int(launch["gpus"]))]
    gen_flags = str(spec.get("generate_flags") or "")
    if cpu or decode_cpu or launch.get("cpu") or launch.get("cpu_procs"):
        gen_flags = (gen_flags + " --cpu").strip()
    runs: List[Run] = []
    for dname, d in spec["datasets"].items():
        d = d or {}
        if "data" not in d:
            raise UsageError(f"dataset {dname!r}: no 'data' folder")
        names = placeholders(dname, d)
        data = Path(data_folder(dname, d))
        data = str(data if data.is_absolute() else Path.cwd() / data)
        seeds = d.get("seeds") or spec.get("seeds") or [1]
        for cname, c in spec["configurations"].items():
            c = c or {}
            if c.get("datasets") is not None and dname not in c["datasets"]:
                continue
            if "arch" not in c:
                raise UsageError(f"configuration {cname!r}: no 'arch'")
            flags = _flags(spec.get("flags")) + _flags(d.get("flags")) + _flags(c.get("flags"))
            flags = [f.format(**names) for f in flags]
            recipe = (c.get("recipes") or {}).get(d.get("recipe"), d.get("recipe"))
            for seed in seeds:
                runs.append(Run(
                    dataset=dname, config=cname, seed=int(seed), arch=str(c["arch"]).format(**names), data=data,
                    dir=str(out / dname / cname / f"seed{seed}"), recipe=recipe,
                    metric=d.get("metric") or "exact_match", flags=flags,
                    subsets=list(d["subsets"]) if d.get("subsets") else None, launch=lopts,
                    generate_flags=gen_flags,
                ))
    return runs


def source_of(path) -> dict:
    """Which sweep file a plan came from: its resolved path and the sha256 of its text (kept in sweep.json)."""
    file = resolve(path).resolve()
    return {"file": str(file), "sha256": hashlib.sha256(file.read_bytes()).hexdigest()}


def write_plan(spec: dict, runs: Sequence[Run], out, source: Optional[dict] = None) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "sweep.json"
    home = out.resolve()
    # run folders relative to OUT: a copied or moved OUT aggregates its own runs (read_plan)
    plan = [asdict(r) | {"dir": os.path.relpath(Path(r.dir).resolve(), home), "settings": r.settings()} for r in runs]
    # through a temporary name of this process's own: two sweeps planning into one OUT at once (the campaign's two
    # lanes) never install each other's half-written file
    atomic_write_text(path, json.dumps({"spec": spec, "runs": plan, **({"source": source} if source else {})},
                                       indent=1, default=str))
    return path


def check_same_sweep(path, spec: dict, runs: Sequence[Run], out) -> None:
    """OUT/sweep.json, if there, must be the plan of this sweep: a rerun of the same sweep file resumes it (and may
    add runs), but another sweep (another name, or a plan without some of the runs planned there) would replace
    it and the finished runs it lists would vanish from `fairseq-compgen aggregate`: UsageError naming both."""
    target = Path(out) / "sweep.json"
    if not target.is_file():
        return
    try:
        old = json.loads(target.read_text())
        old_runs = [f"{r['dataset']}/{r['config']}/seed{r['seed']}" for r in old["runs"]]
        old_name = old["spec"]["name"]
    except (ValueError, KeyError, TypeError):
        raise UsageError(f"{target}: expected the plan a sweep wrote (JSON with spec and runs): move it away or "
                         f"use another --out") from None
    names = {r.name for r in runs}
    dropped = [r for r in old_runs if r not in names]
    if old_name == spec["name"] and not dropped:
        return
    old_file = (old.get("source") or {}).get("file") or "a sweep file not recorded there"
    if old_name == spec["name"] and old_file == str(resolve(path).resolve()):  # more runs planned, e.g. --seeds N
        seeds = sorted({r["seed"] for r in old["runs"]})
        raise UsageError(f"{target} plans {len(dropped)} run(s) of sweep {old_name!r} that this command does not "
                         f"(e.g. {dropped[0]}; its seeds: {' '.join(map(str, seeds))}): running it there would drop "
                         f"them from the plan and from aggregate; expected the same runs: add --seeds "
                         f"{' '.join(map(str, seeds))} (with --only to run some), or use another --out")
    why = f"{len(dropped)} of its planned runs (e.g. {dropped[0]})" if dropped else "its runs"
    raise UsageError(f"{target} is the plan of sweep {old_name!r} ({old_file}), not of sweep {spec['name']!r} "
                     f"({resolve(path).resolve()}): running this one there would replace it and {why} would "
                     f"vanish from aggregate; expected the same sweep (to resume it): use another --out")


def data_folder(name: str, dataset: dict) -> str:
    """A sweep file's dataset's `data:` with its placeholders filled and ~ expanded; relative paths stay relative
    (to where the sweep runs)."""
    return os.path.expanduser(str(dataset["data"]).format(**placeholders(name, dataset)))


def user_dir(flags: Sequence[str]) -> List[str]:
    """["--user-dir", PLUGIN] when a run's fairseq-train flags name a plugin folder (its own encodings or models,
    which decoding its checkpoints needs too; the last one given, as fairseq reads them), else []."""
    found = None
    for i, flag in enumerate(flags):
        if flag.startswith("--user-dir="):
            found = flag.split("=", 1)[1]
        elif flag == "--user-dir" and i + 1 < len(flags):
            found = flags[i + 1]
    return ["--user-dir", found] if found else []


def planned_settings(run: dict) -> dict:
    """The settings a run of OUT/sweep.json was planned with (Run.settings). A sweep.json written before the
    recipes (recipes/recipes.yaml) did not store them: they were arch, data, preset, flags, subsets, generate_flags,
    seed."""
    if "settings" in run:
        return run["settings"]
    generate = shlex.join(t for t in shlex.split(run.get("generate_flags") or "") if t != "--cpu")
    return {k: run.get(k) for k in ("arch", "data", "preset", "flags", "subsets")} | {
        "generate_flags": generate, "seed": run["seed"]}


def read_plan(out, name: str = "sweep.json") -> dict:
    """OUT/sweep.json (or another plan file in OUT, `name`), each run's "dir" made absolute: relative to OUT where
    it was stored so. An older sweep.json stored absolute OUT/<dataset>/<config>/seed<k> of the folder the sweep ran
    in: of a copied or moved OUT, the folder of the same name in OUT is read when it exists."""
    path = Path(out) / name
    if not path.is_file():
        raise UsageError(f"{out}: no sweep.json: not the output folder of a sweep (its 'output' or --out)")
    plan = read_json(path, "the plan a sweep wrote (JSON with spec and runs)")
    if not isinstance(plan, dict):
        raise UsageError(f"{path}: expected the plan a sweep wrote (JSON with spec and runs)")
    home = Path(out).resolve()
    for run in plan.get("runs") or []:
        run["dir"] = str(_run_dir(home, run))
    return plan


def _run_dir(home: Path, run: dict) -> Path:
    stored = Path(run["dir"])
    if not stored.is_absolute():
        return home / stored
    here = home / str(run.get("dataset")) / str(run.get("config")) / f"seed{run.get('seed')}"
    if stored.parts[-3:] == here.parts[-3:] and here.is_dir():
        return here
    return stored


def select(runs: Sequence[Run], patterns: Optional[Sequence[str]]) -> List[Run]:
    if not patterns:
        return list(runs)
    return [r for r in runs if any(fnmatch.fnmatch(r.name, p) for p in patterns)]


def check_patterns(path, runs: Sequence[Run], patterns: Optional[Sequence[str]]) -> None:
    """Refuse an --only pattern that matches none of the sweep's runs (a typo would otherwise run nothing, or
    less than was asked, in silence)."""
    for p in patterns or ():
        if not any(fnmatch.fnmatch(r.name, p) for r in runs):
            example = f": e.g. {runs[0].name}" if runs else ""
            raise UsageError(f"--only {p}: no run of {path} matches it (runs are named DATASET/CONFIG/seedK{example})")


def with_seeds(spec: dict, seeds: Optional[Sequence[int]]) -> dict:
    """The sweep with ``seeds`` in place of every seed list of its file (the sweep's and each dataset's), e.g. to
    rerun a cell with an unused seed; recorded as such in OUT/sweep.json. None: the file's seeds."""
    if seeds is None:
        return spec
    if not seeds or any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise UsageError(f"--seeds {' '.join(map(str, seeds))}: expected distinct non-negative integers")
    spec = copy.deepcopy(spec)
    spec["seeds"] = list(seeds)
    for d in spec["datasets"].values():
        if d and d.get("seeds"):
            d["seeds"] = list(seeds)
    return spec


def run_sweep(path, out=None, jobs: int = 1, devices=None, cpu: bool = False, only=None, threads=None,
              dry_run: bool = False, echo=print, engine: str = "local", slurm: Optional[dict] = None,
              seeds: Optional[Sequence[int]] = None, gpu: bool = False, decode_cpu: bool = False,
              prep: bool = False) -> List[dict]:
    """Run (or with dry_run print) the selected runs of the sweep file at `path`: on this machine (engine "local",
    `jobs` at once), or as submitit jobs (engine "slurm" or "submitit-local"; `slurm`: the resources of
    submit.executor). `seeds` replaces the file's seeds (with_seeds); `prep` first makes the data folders not made
    yet with their datasets' prep commands (prepare_absent). Returns one result dict per selected run."""
    submit.check_engine(engine)
    spec = with_seeds(load_sweep(path), seeds)
    out = Path(out or spec.get("output") or Path("runs") / spec["name"])
    runs = plan(spec, out, cpu=cpu, gpu=gpu, decode_cpu=decode_cpu)
    check_patterns(path, runs, only)
    selected = select(runs, only)
    validate(path, runs)  # before anything is prepared (downloaded)
    if prep:
        prepare_absent(path, spec, selected, echo)
    check_data(path, selected, spec)
    check_same_sweep(path, spec, runs, out)
    for r in selected:
        r.is_done()  # a done.json that is not one is refused before anything runs
    # every run folder, not only the selected ones: OUT/sweep.json, written below, is the plan of all its runs, and
    # a folder started under another plan would be left beside a plan that no longer says how it was made
    changed = [(r, r.changed_settings()) for r in runs]
    changed = [(r, c) for r, c in changed if c]
    if changed:
        r, c = changed[0]
        raise UsageError(f"{len(changed)} run folder(s) under {out} were started with other settings than {path} "
                         f"now gives them (e.g. {r.name}: {'; '.join(c)}"
                         f"{'' if r in selected else ', not among --only but planned in the same OUT/sweep.json'}): "
                         f"move them away, or use another --out")
    if dry_run:
        for r in selected:
            echo(f"{r.name}{'  (done)' if r.is_done() else ''}\n  {shlex.join(r.train_command())}\n"
                 f"  {shlex.join(r.eval_command())}")
        return []
    write_plan(copy.deepcopy(spec), runs, out, source_of(path))
    if engine != "local":
        gpus = 0 if (cpu or any("--cpu" in r.launch for r in selected)) else int((spec.get("launch") or {}).get("gpus") or 1)
        ex = submit.executor(engine, Path(out) / ".submitit", **{"gpus_per_node": gpus, "name": spec["name"],
                                                                 **(slurm or {})})
        # a finished run is not submitted (its job would wait in the queue, and hold a GPU, to say "skip")
        done = [r for r in selected if r.is_done()]
        for r in done:
            echo(f"skip   {r.name} (done)")
        results = [{"run": r.name, "status": "skipped"} for r in done]
        todo = [r for r in selected if not r.is_done()]
        if engine == "submitit-local" and gpus == 0 and not threads and todo:  # its jobs run at once, here
            threads = max(1, (os.cpu_count() or 1) // len(todo))
        results += submit.submit_all(ex, todo, threads=threads, echo=echo)
        return _summary(spec, results, out, echo)
    if (cpu or decode_cpu) and not threads:  # CPU runs (or evaluations) side by side share the cores
        threads = max(1, (os.cpu_count() or 1) // max(jobs, 1))
    runner = Runner(jobs=jobs, devices=devices, threads=threads, echo=echo)

    def on_term(signum, frame):
        raise KeyboardInterrupt
    main_thread = threading.current_thread() is threading.main_thread()
    # a hangup stops the runs as SIGTERM does, unless hangups are ignored (under nohup: the campaign's lanes)
    sigs = [sig for sig in (signal.SIGTERM, signal.SIGHUP) if signal.getsignal(sig) is not signal.SIG_IGN]
    old = {sig: signal.signal(sig, on_term) for sig in sigs} if main_thread else {}
    try:
        results = runner.run_all(selected)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return _summary(spec, results, out, echo)


def _summary(spec: dict, results: List[dict], out, echo) -> List[dict]:
    n = {s: sum(r["status"] == s for r in results) for s in ("done", "skipped", "failed", "stopped", "busy")}
    echo(f"sweep {spec['name']}: {n['done']} done, {n['skipped']} skipped, {n['failed']} failed"
         + (f", {n['stopped']} stopped" if n["stopped"] else "")
         + (f", {n['busy']} busy (another live sweep or training holds them)" if n["busy"] else "") + f" -> {out}")
    return results


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="fairseq-compgen sweep", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("sweep", help="sweep file (YAML), or the name of a packaged one (" + ", ".join(packaged()) + ")")
    p.add_argument("--out", help="output folder (default: the sweep's 'output', else runs/<name>)")
    p.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    p.add_argument("--devices", help="comma-separated CUDA devices, given to job slots round-robin")
    p.add_argument("--cpu", action="store_true", help="train and decode on CPU")
    p.add_argument("--gpu", action="store_true",
                   help="train and decode on the GPU even where the sweep file's launch says cpu (a CPU campaign's "
                        "runs on a lent GPU: the device is not a run's setting)")
    p.add_argument("--decode-cpu", action="store_true",
                   help="evaluate on CPU wherever the runs train (ten evaluations taking turns on one GPU did not "
                        "finish in 140 s where one thread of CPU takes 15: results/gpu_oneshot_h100_20261127)")
    p.add_argument("--threads", type=int,
                   help="OMP/MKL threads per run (default with --cpu or --decode-cpu: cores // --jobs; with --engine "
                        "submitit-local and --cpu: cores // its jobs, which run at once; on Slurm: the job's "
                        "--cpus-per-task)")
    p.add_argument("--only", action="append", help="run only runs matching this glob (dataset/config/seedK); repeatable")
    p.add_argument("--seeds", type=int, nargs="+", metavar="N",
                   help="these seeds instead of the file's, e.g. an unused one: into a new --out (pooled by "
                        "`fairseq-compgen aggregate OUT1 OUT2`), or the file's seeds plus it with --only '*/*/seedN' "
                        "to add it to an existing --out")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing (with --prep: after the data)")
    p.add_argument("--prep", action="store_true",
                   help="first make the selected runs' data folders that are not made yet, with each dataset's prep: "
                        "command (downloads where the dataset has no local copy)")
    p.add_argument("--engine", choices=("local", "slurm", "submitit-local"), default="local",
                   help="local: this machine, --jobs at once (default); slurm: one submitit job per run; "
                        "submitit-local: the same jobs as processes here (pipelines/submit.py)")
    g = p.add_argument_group("Slurm resources (--engine slurm; submitit's names)")
    g.add_argument("--partition", help="slurm partition")
    g.add_argument("--timeout-min", type=int, default=24 * 60, help="time limit of each run's job (default 1440)")
    g.add_argument("--gpus-per-node", type=int, help="GPUs per job (default: the sweep's launch gpus; 0 with --cpu)")
    g.add_argument("--cpus-per-task", type=int, help="CPU cores per job")
    g.add_argument("--mem-gb", type=int, help="memory per job")
    g.add_argument("--array-parallelism", type=int, help="jobs of the array running at once")
    a = p.parse_args(argv)
    if a.jobs < 1 or (a.threads is not None and a.threads < 1):  # the runner took 0 or less as 1, in silence
        raise UsageError(f"--jobs {a.jobs}{f' --threads {a.threads}' if a.threads is not None else ''}: "
                         f"expected positive numbers")
    slurm = {k: getattr(a, k) for k in ("partition", "timeout_min", "gpus_per_node", "cpus_per_task", "mem_gb",
                                        "array_parallelism") if getattr(a, k) is not None}
    try:
        results = run_sweep(a.sweep, a.out, a.jobs, a.devices.split(",") if a.devices else None, a.cpu, a.only,
                            a.threads, a.dry_run, engine=a.engine, slurm=slurm, seeds=a.seeds, gpu=a.gpu,
                            decode_cpu=a.decode_cpu, prep=a.prep)
    except KeyboardInterrupt:
        print("sweep: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    return 1 if any(r["status"] in ("failed", "busy") for r in results) else 0  # busy: not done here either


if __name__ == "__main__":
    sys.exit(main())
