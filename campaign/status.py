"""Where the campaign stands: every step of the queue files, read as scripts/campaign.sh reads them, with how many of
its runs are recorded under results/campaign/ (done), which are under way in the state folder (the last update
their train.log reached), and how many are left; then the totals over the distinct runs of all the queues, and the
training time still to come, estimated from the recorded runs; last, the step a lent GPU should take: of those with
no run begun or done anywhere, the one nearest the end of its queue (the lanes reach it last), and the runbook's
steps for it (docs/experiments.md): what to make here first (wheels, the step's data folders), the device tool's
call (its carry and command) and what to run after it.

    python campaign/status.py                          # campaign/queue*.txt; state folder ../campaign beside the checkout
    python campaign/status.py --queue campaign/queue.txt --state /elsewhere/campaign
    python campaign/status.py --steps-left --queue campaign/queue.txt   # the steps a lane walks (scripts/campaign.sh)

A run is done when its done.json is in results/campaign/<sweep>/<run>/ of this checkout (committed or not: the
campaign commits it right after copying it), or in results/campaign_gpu/ (finished on a lent GPU, gpu_import.py);
under way when its folder in STATE/runs/ has a train.log but no done.json recorded here, or when it was carried from another machine (results/campaign/_carry/, campaign/carry.py).
The estimate gives each run not done the median training time (train.log's CPU clock `cpu_s`, or for runs trained
before it was logged its wall clock, which counts the lanes' pauses; summed over invocations; evaluation not
included) of the recorded runs of its sweep, dataset and configuration, or else of its sweep and
dataset, or else the median pace per update of recorded runs of the same arch, data and flags in other sweeps times
its budget in updates (paced_hours: e.g. a 50,000-update run from 5,000-update ones), or else the median of recorded
runs of other archs on the same data, recipe and flags (recorded_alike); a run under way with none of these, its
own pace so far extrapolated to its budget (extrapolated_hours); a run under way counts the part of its budget it has
not trained yet (done_fraction); runs with nothing to go by are counted apart. Times were measured
on whatever machine and load each run had, so read the sum as rough. Reads files only: it starts, stops and
changes nothing.
"""
import argparse
import json
import shlex
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fairseq_compgen import prep, recipes  # noqa: E402
from fairseq_compgen.errors import UsageError  # noqa: E402
from fairseq_compgen.pipelines import sweep  # noqa: E402
from fairseq_compgen.pipelines.train import last  # noqa: E402
from fairseq_compgen.pipelines.train_log import last_num_updates, read_records, train_cpu, train_wall  # noqa: E402


def train_seconds(log: Path) -> Optional[float]:
    """A run's training seconds: its CPU clock (train_cpu) where its log has one, else its wall clock (train_wall)."""
    cpu = train_cpu(log)
    return cpu if cpu is not None else train_wall(log)


def recorded_hours(results: Path):
    """(sweep, dataset, config) -> training hours of each recorded run, and (sweep, dataset) -> the same pooled."""
    by_config, by_dataset = {}, {}
    for log in results.glob("*/*/*/seed*/train.log"):
        seconds = train_seconds(log)
        if seconds is None:
            continue
        sweep_name, dataset, config = log.parts[-5:-2]
        by_config.setdefault((sweep_name, dataset, config), []).append(seconds / 3600)
        by_dataset.setdefault((sweep_name, dataset), []).append(seconds / 3600)
    return by_config, by_dataset


BUDGET_FLAGS = ("--max-update", "--max-epoch")


def model_flags(flags) -> tuple:
    """A run's flags less its budget (--max-update N, --max-epoch N): what makes two runs' updates cost the same."""
    out, skip = [], False
    for f in flags:
        if skip:
            skip = False
        elif f in BUDGET_FLAGS:
            skip = True
        else:
            out.append(f)
    return tuple(out)


def recorded_runs(results: Path):
    """(settings, num_updates, training hours) of each recorded run with a training time and a data folder (its
    done.json and train.log); what recorded_alike and recorded_pace group."""
    for done in results.glob("*/*/*/seed*/done.json"):
        log = done.with_name("train.log")
        seconds = train_seconds(log) if log.is_file() else None
        try:
            record = json.loads(done.read_text())
        except ValueError:
            continue
        settings = record.get("settings") or {}
        if seconds and settings.get("data"):
            yield settings, record.get("num_updates"), seconds / 3600


def recorded_alike(results: Path):
    """(the data folder's last three parts, recipe, flags) -> training hours of each recorded run, whatever its arch:
    the last resort for a run of an arch with nothing recorded (the same data, recipe and budget; another model)."""
    alike = {}
    for settings, _, hours in recorded_runs(results):
        key = (Path(settings["data"]).parts[-3:], settings.get("recipe"), tuple(settings.get("flags") or []))
        alike.setdefault(key, []).append(hours)
    return alike


def recorded_pace(results: Path):
    """(arch, the data folder's last three parts, model_flags) -> training hours per update of each recorded run
    (train.log's clock over done.json's num_updates)."""
    pace = {}
    for settings, updates, hours in recorded_runs(results):
        if updates and settings.get("arch"):
            key = (settings["arch"], Path(settings["data"]).parts[-3:], model_flags(settings.get("flags") or []))
            pace.setdefault(key, []).append(hours / int(updates))
    return pace


def paced_hours(run, pace) -> Optional[float]:
    """A run with no recorded run of its sweep: the median pace per update of recorded runs of the same arch, data
    and flags (other sweeps, other budgets) times its budget in updates (its --max-update, else its recipe's);
    None without both."""
    per_update = pace.get((run.arch, Path(run.data).parts[-3:], model_flags(run.flags)))
    budget = last(run.flags, "--max-update")
    if budget is None and run.recipe:
        budget = recipes.get(run.recipe).options.get("max-update")
    if not per_update or budget in (None, True) or int(budget) <= 0:
        return None
    return statistics.median(per_update) * int(budget)


def _fraction(folder: Path, epoch: Optional[int], updates: Optional[int]) -> Optional[float]:
    """The part of its budget (command.txt's last --max-epoch and --max-update) that a run had trained at `epoch` and
    `updates`: the further of the two (fairseq stops at the first); None without a budget or progress."""
    command = folder / "command.txt"
    if not command.is_file():
        return None
    words = shlex.split(command.read_text().splitlines()[0])
    max_epoch, max_update = last(words, "--max-epoch"), last(words, "--max-update")
    parts = [epoch / int(max_epoch) if max_epoch not in (None, "0") and epoch else 0,
             updates / int(max_update) if max_update not in (None, "0") and updates else 0]
    return min(1.0, max(parts)) if max(parts) > 0 else None


def _summaries(log: Path):
    return [r for r in read_records(log) if r.kind == "train"]  # epoch summaries (train_log: kind "train")


def done_fraction(folder: Path) -> Optional[float]:
    """How much of its budget a run under way has trained: its last summary's epoch, or its last logged update."""
    summaries = _summaries(folder / "train.log")
    return _fraction(folder, summaries[-1].epoch if summaries else None, last_num_updates(folder / "train.log"))


def extrapolated_hours(folder: Path) -> Optional[float]:
    """A run under way that has no recorded run like it: its training hours so far (train_seconds, to its last epoch
    summary) over the part of its budget they covered (at that summary); None without both."""
    summaries, seconds = _summaries(folder / "train.log"), train_seconds(folder / "train.log")
    fraction = _fraction(folder, summaries[-1].epoch, summaries[-1].num_updates) if summaries else None
    return seconds / 3600 / fraction if seconds and fraction else None


def steps(queue: Path):
    """(line number, sweep file, glob) of every sweep step of a queue file (prep steps are skipped)."""
    for number, line in enumerate(queue.read_text().splitlines(), 1):
        words = line.split()  # as bash's `read` splits it: spaces or tabs, before, between and after
        if not words or words[0].startswith("#"):
            continue
        if words[0] != "prep":
            yield number, words[0], " ".join(words[1:])


def committed_runs(repo: Path) -> set:
    """The runs (sweep/dataset/config/seedK) whose done.json is in `repo`'s HEAD under results/campaign or
    results/campaign_gpu: what scripts/campaign.sh's committed() asks git one run at a time."""
    listed = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", "--name-only", "HEAD", "--",
                             "results/campaign", "results/campaign_gpu"], capture_output=True, text=True, check=True)
    parts = [Path(f).parts for f in listed.stdout.splitlines()]  # results/campaign*/SWEEP/DATASET/CONFIG/seedK/done.json
    return {"/".join(p[2:6]) for p in parts if len(p) == 7 and p[6] == "done.json"}


def runs_of_step(sweep_file: str, glob: str, state: Path):
    """The runs of a queue step, planned as the lane's dry run plans them (its sweep's runs in STATE/runs/<sweep>)."""
    return sweep.select(sweep.plan(sweep.load_sweep(REPO / sweep_file), state / "runs" / Path(sweep_file).stem,
                                   cpu=True), [glob])


def steps_left(queue: Path, repo: Path, state: Path):
    """Each sweep step of `queue` (its line with single spaces, as scripts/campaign.sh compares steps) that has a run
    not committed in `repo` (committed_runs), or whose runs cannot be planned here (the lane's dry run says why):
    the steps a lane walks. The others are skipped without a dry run (several seconds each: fairseq's imports)."""
    done = committed_runs(repo)
    for _, sweep_file, glob in steps(queue):
        name = Path(sweep_file).stem
        try:
            runs = runs_of_step(sweep_file, glob, state)
        except UsageError:
            runs = []
        if not runs or any(f"{name}/{run.name}" not in done for run in runs):
            yield " ".join([sweep_file, *glob.split()])


def gpu_plan(sweep_file: str, glob: str, runs, state: Path, here: Path, jobs_max: int = 10):
    """The runbook (docs/experiments.md) for a step on a lent GPU, as lines: the wheels and the step's data folders,
    each here or how to make it (a copy of the lanes' folder in STATE, else the dataset's prep command), the device
    tool's call, and what follows it. The data goes with the call (PREP empty), as the folder its prep writes."""
    spec = sweep.load_sweep(REPO / sweep_file)
    carry, ready = [".whl"], []
    ready.append(".whl/ here" if any((here / ".whl").glob("*.whl")) else
                 ".whl/ missing: the wheels of fairseq and its dependencies for the GPU machine's Python "
                 "(on our machines: ../shared/tools/device-wheels.sh .whl; scripts/gpu_oneshot.sh's header)")
    for dataset in sorted({run.dataset for run in runs}):
        commands = sweep.prep_commands(sweep_file, spec, dataset)
        command = " && ".join(shlex.join(words) for words in commands)
        folder = prep.output_folder(commands[0][3:]) if commands else None
        folder = folder or str(Path(next(r.data for r in runs if r.dataset == dataset)).parent)
        carry.append(folder)
        if (here / folder).is_dir():
            ready.append(f"{folder}/ here")
        elif (state / folder).is_dir():
            ready.append(f"{folder}/ missing: cp -r {state / folder} {folder}")
        else:
            ready.append(f"{folder}/ missing: {command or 'its sweep file names no prep command'}")
    carry.append("commit.manifest")
    command = (f"PREP= PACK=1 JOBS={min(len(runs), jobs_max)} SLICE_S=470 bash scripts/gpu_oneshot.sh {sweep_file} "
               f"{shlex.quote(glob)}")
    return [f"  first, here: {'; '.join(ready)}; then, on the clean checkout: bash campaign/device_tree.sh slim",
            f"  the call: carry={json.dumps(carry)}, command: {command} (a second call on the warm machine: the "
            f"same with the SLICE_S its budget leaves)",
            "  after it: bash campaign/device_tree.sh restore; python campaign/gpu_import.py FILES_AT/results.tar.gz "
            "--carried FILES_AT/carry.tar.part00 (FILES_AT: the folder of the call's files, files_at in its reply)"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queue", type=Path, nargs="+", help="queue files (default: campaign/queue*.txt)")
    p.add_argument("--state", type=Path, default=REPO.parent / "campaign",
                   help="the campaign's state folder (default: ../campaign beside this checkout)")
    p.add_argument("--results", type=Path, default=REPO / "results" / "campaign",
                   help="where finished runs are recorded (default: results/campaign of this checkout)")
    p.add_argument("--here", type=Path, default=REPO,
                   help="the checkout a lent GPU's device tool sends, where its wheels and data must be (default: this "
                        "one)")
    p.add_argument("--steps-left", action="store_true",
                   help="print only the steps with a run not committed in --repo's HEAD, one per line, or that cannot "
                        "be planned (what scripts/campaign.sh walks; one --queue)")
    p.add_argument("--repo", type=Path, default=REPO,
                   help="with --steps-left: the repository whose HEAD records the finished runs (default: this one)")
    a = p.parse_args(argv)
    queues = a.queue or sorted((REPO / "campaign").glob("queue*.txt"))
    if a.steps_left:
        for queue in queues:
            print("\n".join(steps_left(queue, a.repo, a.state)))
        return 0
    results = a.results
    by_config, by_dataset = recorded_hours(results)
    pace = recorded_pace(results)
    alike = recorded_alike(results)
    seen = {}  # sweep name/run -> "done" | "under way" | "left", over all queues
    step_runs = {}  # (sweep file, glob) -> (lines after it in its queue, at the fewest; its runs' keys; its runs)
    cost = {}  # sweep name/run not done -> estimated training hours (None: nothing recorded to go by)
    for queue in queues:
        if not queue.is_file():
            print(f"status.py: --queue {queue}: no such file", file=sys.stderr)
            return 2
        print(f"{queue.name}:")
        listed = list(steps(queue))
        for position, (number, sweep_file, glob) in enumerate(listed):
            name = Path(sweep_file).stem
            runs = runs_of_step(sweep_file, glob, a.state)
            done, going, left = [], [], []
            for run in runs:
                key = f"{name}/{run.name}"
                if ((results / name / run.name / "done.json").is_file()
                        or (results.parent / "campaign_gpu" / name / run.name / "done.json").is_file()):
                    done.append(run.name)
                    seen[key] = "done"
                    continue
                known = by_config.get((name, run.dataset, run.config)) or by_dataset.get((name, run.dataset))
                cost[key] = statistics.median(known) if known else paced_hours(run, pace)
                if cost[key] is None:  # the last resort: runs of other archs on the same data, recipe and flags
                    same = alike.get((Path(run.data).parts[-3:], run.recipe, tuple(run.flags)))
                    cost[key] = statistics.median(same) if same else None
                log = a.state / "runs" / name / run.name / "train.log"
                carried = results / "_carry" / name / run.name / "train.log"  # campaign/carry.py save
                if log.is_file():
                    going.append(f"{run.name} (update {last_num_updates(log) or 0:,})")
                    seen[key] = "under way"
                    if cost[key] is None:  # nothing like it recorded: its own pace so far
                        cost[key] = extrapolated_hours(log.parent)
                    fraction = done_fraction(log.parent)
                    if cost[key] is not None and fraction is not None:  # what is left of it
                        cost[key] *= 1 - fraction
                elif carried.is_file():
                    going.append(f"{run.name} (carried, update {last_num_updates(carried) or 0:,})")
                    seen[key] = "under way"
                else:
                    left.append(run.name)
                    seen.setdefault(key, "left")
            after = len(listed) - 1 - position  # steps after it in this queue; a step in two queues: the fewer
            earlier = step_runs.get((sweep_file, glob), (after,))[0]
            step_runs[(sweep_file, glob)] = (min(after, earlier), [f"{name}/{run.name}" for run in runs], runs)
            line = f"  {number:3d} {sweep_file} {glob}: {len(done)}/{len(runs)} done"
            if going:
                line += "; under way: " + ", ".join(going)
            if left and len(left) < len(runs):
                line += f"; {len(left)} left"
            print(line)
    counts = {k: sum(v == k for v in seen.values()) for k in ("done", "under way", "left")}
    print(f"distinct runs: {len(seen)}; done {counts['done']}, under way {counts['under way']}, "
          f"left {counts['left']}")
    todo = [cost[k] for k, v in seen.items() if v != "done"]
    known = [h for h in todo if h is not None]
    print(f"training time to come: about {sum(known):.1f} core-hours for {len(known)} runs at the median of the "
          f"recorded runs like them (or the pace per update of runs of the same model, data and flags, or their own "
          f"pace so far, or runs of other models on the same data, recipe and flags; runs under way: the part of "
          f"their budget left); {len(todo) - len(known)} runs with none to go by")
    # a lent GPU takes a step that no lane has begun, the one the lanes reach last (docs/experiments.md, the runbook)
    fresh = [(after, step, keys, runs) for step, (after, keys, runs) in step_runs.items()
             if keys and all(seen.get(k) == "left" for k in keys)]
    if fresh:
        after, (sweep_file, glob), keys, runs = min(fresh, key=lambda f: f[0])
        print(f"for a lent GPU (no run begun, the lanes reach it last): {sweep_file} '{glob}' ({len(keys)} "
              f"run{'s' if len(keys) != 1 else ''})")
        print("\n".join(gpu_plan(sweep_file, glob, runs, a.state, a.here)))
    else:
        print("for a lent GPU: every step has a run begun or done (a lane would train the same runs)")
    return 0


if __name__ == "__main__":
    from fairseq_compgen.errors import install_excepthook

    install_excepthook()  # a UsageError (e.g. a queue line naming no sweep file) is one line, not a traceback
    sys.exit(main())
