"""Record the campaign's runs that finished on a lent GPU (scripts/gpu_oneshot.sh) in this repository, so that the
campaign's CPU lanes skip them and the tables pool them with the CPU seeds.

    python campaign/gpu_import.py /work/.device/1/results.tar.gz [more results.tar.gz or unpacked folders]
    python campaign/gpu_import.py --carried /work/.device/1/carry.tar.part00   # the slice's unfinished runs

Each finished run (<sweep>/<dataset>/<config>/seedK/ with done.json) of a campaign sweep (one named in
campaign/queue*.txt, or the --queue files) is copied, with its records, eval JSONs and outputs (runner.EVAL_KEPT) and data.sha256, to
results/campaign_gpu/<sweep>/<dataset>/<config>/seedK/, beside the GPU sweep's own sweep.json, and committed, one
commit per run of that folder alone (and the sweep.json when new or changed). Why a folder of its own: a run's
settings name its data folder absolutely, and the GPU machine's is not the campaign's, so `fairseq-compgen
aggregate` reads the GPU runs against their own plan and pools them with the CPU runs by dataset, configuration and
seed: `fairseq-compgen aggregate results/campaign/<sweep> results/campaign_gpu/<sweep>`. scripts/campaign.sh
treats a run recorded here as done, as one under results/campaign/.

Refused, each with its reason on one line (exit status 1 when any was): a run recorded on a tree that was not a
clean commit ("dirty" or "unknown" in commit.txt), a run whose data files differ from the CPU runs' of the same sweep
and dataset, or, where that sweep has none, of another campaign sweep whose file declares the same data folder
(data.sha256, fairseq-preprocess's log aside), a run not of a campaign sweep. Skipped: a run already
recorded (committed under results/campaign/ or here; a copy left by a commit that failed is committed again). A
checkpoint that campaign/carry.py carried for the same run is removed in the run's commit. A CPU lane training the same run meanwhile is not stopped; its result is
not recorded when it finishes.

--carried hands a slice's unfinished runs (its carry.tar.part00.., whose other parts are read with the first) to the
CPU lanes instead of leaving them to the next lent GPU: each, refused for the same reasons, goes with its checkpoint
and records to results/campaign/_carry/, as campaign/carry.py saves a lane's, one commit per run; a lane whose queue
runs that sweep restores it and resumes it on the CPU (its sweep takes the run folder, whose settings name the GPU
machine's data folder, because the lane's data folder holds the same files: sweep.Run.same_data_moved). The run's
records then keep both machines (machine.history, launch.history, command.history). Skipped: a run recorded, or
carried already at the same or a later update.
"""
import argparse
import json
import shutil
import sys
import tarfile
import tempfile
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from campaign.carry import CARRY, CHECKPOINT, carry, commit_paths, committed, num_updates, recorded  # noqa: E402
from campaign.status import steps  # noqa: E402  the queue files read as scripts/campaign.sh reads them
from fairseq_compgen.pipelines.runner import DONE, RECORDS, kept_eval_files, trained_at  # noqa: E402
from fairseq_compgen.pipelines.sweep import data_folder  # noqa: E402
from fairseq_compgen.pipelines.sweep_schema import load_spec  # noqa: E402
from fairseq_compgen.pipelines.train import recorded_data_key  # noqa: E402

GPU = Path("results") / "campaign_gpu"  # relative to the repository
CPU = Path("results") / "campaign"


def campaign_sweeps(queues) -> dict:
    """The sweeps that the queue files run: name -> sweep file (as the queue names it, relative to the repository)."""
    return {Path(sweep_file).stem: sweep_file for queue in queues for _, sweep_file, _ in steps(queue)}


def finished_runs(tree: Path):
    """(<sweep>/<dataset>/<config>/seedK, its folder) of every finished run in an unpacked one-shot results tree."""
    for done in sorted(tree.glob(f"*/*/*/seed*/{DONE}")):
        yield done.parent.relative_to(tree).as_posix(), done.parent


def cpu_data(repo: Path, rel: str, sweeps: dict):
    """(the data a CPU run trained on, to compare with: train.recorded_data_key, its files but fairseq-preprocess's
    log, which names the folder's path and differs wherever the same data is prepared; "<sweep>/<dataset>" it is
    of), or (None, None): a CPU run of the same sweep and dataset (they all trained on one data folder's files, prepared again on each new
    machine), else one of another campaign sweep whose file declares the same data folder (`data:`) for a dataset
    (a sweep whose runs all trained on a lent GPU, beside one that ran here on the same data)."""
    sweep, dataset = rel.split("/")[:2]

    def first_cpu_run(name, d):
        found = sorted((repo / CPU / name / d).glob("*/seed*/data.sha256"))
        return (recorded_data_key(found[0].parent), f"{name}/{d}") if found else None

    own = first_cpu_run(sweep, dataset)
    if own:  # the usual case: no sweep file needs reading
        return own
    declared = {(name, d): data_folder(d, entry or {}) for name, sweep_file in sweeps.items()
                if (repo / sweep_file).is_file()
                for d, entry in (load_spec(repo / sweep_file).get("datasets") or {}).items() if "data" in (entry or {})}
    for key, folder in sorted(declared.items()):
        if key != (sweep, dataset) and folder == declared.get((sweep, dataset)) and first_cpu_run(*key):
            return first_cpu_run(*key)
    return None, None


def refusal(repo: Path, rel: str, run: Path, sweeps: dict):
    """Why this GPU run (finished, or carried to be handed over) cannot be recorded, or None."""
    if rel.split("/")[0] not in sweeps:
        return f"{rel}: not a run of a campaign sweep (the queues name {', '.join(sorted(sweeps))})"
    commits = trained_at(run)  # every commit a resumed run trained at, not only its first
    unclean = [c for c in commits if c.endswith(" dirty") or c.startswith("unknown")]
    if not commits or unclean:
        return f"{rel}: trained on {unclean[0] if unclean else 'an unrecorded commit'}, not a clean commit"
    mine, (theirs, of) = recorded_data_key(run), cpu_data(repo, rel, sweeps)
    if mine is None:
        return f"{rel}: no data.sha256 or data.json: its data cannot be checked"
    if theirs is not None and mine != theirs:
        source = "data.json" if (run / "data.json").is_file() else "data.sha256"
        return f"{rel}: its data ({source}) differs from the CPU runs' of {of}"
    return None


def record(repo: Path, rel: str, run: Path, tree: Path) -> str:
    """Copy the run into results/campaign_gpu/ (through a temporary name) and commit that folder alone."""
    dest = repo / GPU / rel
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "eval").mkdir(parents=True)
    for name in RECORDS + (DONE, "data.sha256"):
        if (run / name).is_file():
            shutil.copy2(run / name, tmp / name)
    for j in kept_eval_files(run):
        shutil.copy2(j, tmp / "eval" / j.name)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    paths = [str(GPU / rel)]
    plan = tree / rel.split("/")[0] / "sweep.json"
    target = repo / GPU / rel.split("/")[0] / "sweep.json"
    if plan.is_file() and not (target.is_file() and target.read_bytes() == plan.read_bytes()):
        shutil.copy2(plan, target.with_name("sweep.json.tmp"))
        target.with_name("sweep.json.tmp").rename(target)
        paths.append(str(GPU / rel.split("/")[0] / "sweep.json"))
    # a CPU lane's carried checkpoint of this run: removed in the same commit (named while it is in HEAD, so a rerun
    # after a failed commit still commits the removal)
    if (repo / CARRY / rel).is_dir() or committed(repo, f"{CARRY / rel}/{CHECKPOINT}"):
        shutil.rmtree(repo / CARRY / rel, ignore_errors=True)
        paths.append(str(CARRY / rel))
    accuracy = json.loads((run / DONE).read_text()).get("accuracy") or {}
    acc = ", ".join(f"{k} {v:.4f}" for k, v in sorted(accuracy.items()) if isinstance(v, (int, float)))
    machine = json.loads((run / "machine.txt").read_text()) if (run / "machine.txt").is_file() else {}
    commit = (run / "commit.txt").read_text().split()[0][:12]
    message = (f"Campaign (lent GPU): {rel} finished (accuracy: {acc or 'see done.json'}; trained at {commit} on "
               f"{machine.get('gpu') or 'a GPU'})")
    commit_paths(repo, paths, message)
    return message


def unpack(source: Path, scratch: Path):
    """The folder a one-shot's results.tar.gz, carry.tar.part00.. (given together, joined in name order) or unpacked
    folder holds; None for anything else."""
    if source.is_dir():
        return source
    parts = sorted(source.parent.glob(source.name[:-2] + "[0-9][0-9]")) if source.name[-2:].isdigit() else [source]
    if not all(p.is_file() for p in parts):
        return None
    scratch.mkdir(parents=True, exist_ok=True)
    joined = scratch / (source.name + ".joined")
    with open(joined, "wb") as out:
        for part in parts:
            out.write(part.read_bytes())
    if not tarfile.is_tarfile(joined):
        return None
    tree = scratch / (source.name + ".tree")
    try:
        with tarfile.open(joined) as tar:
            tar.extractall(tree, filter="data")
    except (EOFError, tarfile.TarError, zlib.error) as e:  # a copy cut short: an EOFError traceback before
        raise Truncated(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__) from None
    joined.unlink()
    return tree


class Truncated(Exception):
    """A one-shot's archive that starts like one but cannot be read to its end (a copy or a download cut short)."""


def import_each(repo: Path, runs, sweeps: dict, put) -> int:
    """For each (<sweep>/<dataset>/<config>/seedK, its folder) of `runs`: skipped when recorded already, refused
    (refusal) with its reason, else put(rel, run), which commits it and returns the commit message (or None when it
    skipped the run and said why). Returns the number refused, git's failures included (a rerun commits them)."""
    refused = 0
    for rel, run in runs:
        if recorded(repo, rel):  # committed; a copy left uncommitted by a failed commit is done again
            print(f"gpu_import: {rel}: already recorded, skipped")
            continue
        why = refusal(repo, rel, run, sweeps)
        if why:
            print(f"gpu_import: refused {why}", file=sys.stderr)
            refused += 1
            continue
        try:
            message = put(rel, run)
        except (RuntimeError, ValueError, OSError) as e:  # git kept failing, or a checkpoint that does not load: the
            # other runs are still imported
            print(f"gpu_import: {rel}: {e}", file=sys.stderr)
            refused += 1
            continue
        if message:
            print(f"gpu_import: {message}")
    return refused


def record_finished(repo: Path, source: Path, tree: Path, sweeps: dict) -> int:
    """Each finished run of a slice's results (its unpacked `tree`) recorded under results/campaign_gpu/ (record).
    Returns the number refused."""
    finished = list(finished_runs(tree))
    if not finished:
        print(f"gpu_import: {source}: no finished run (<sweep>/<dataset>/<config>/seedK/done.json) in it")
    return import_each(repo, finished, sweeps, lambda rel, run: record(repo, rel, run, tree))


def hand_over(repo: Path, tree: Path, sweeps: dict) -> int:
    """--carried: each unfinished run of a slice's carry (checkpoint_last.pt and no done.json) goes under
    results/campaign/_carry/, as campaign/carry.py saves a lane's, so that the CPU lanes resume it (carry.py restore,
    then the sweep, which accepts its data folder there when it holds the files of the run's data.json) instead of
    training it again; refused as a finished run is. Skipped also: a run carried already at the same or a later
    update. Returns the number refused."""
    def put(rel, run):
        updates, there = num_updates(run / CHECKPOINT), repo / CARRY / rel / CHECKPOINT
        if there.is_file() and num_updates(there) >= updates:
            print(f"gpu_import: {rel}: carried already at update {num_updates(there)} (this one: {updates}), skipped")
            return None
        machine = json.loads((run / "machine.txt").read_text()) if (run / "machine.txt").is_file() else {}
        return carry(repo, rel, run, machine.get("gpu") or "a GPU")[1]

    unfinished = [(ck.parent.relative_to(tree).as_posix(), ck.parent)
                  for ck in sorted(tree.glob(f"*/*/*/seed*/{CHECKPOINT}")) if not (ck.parent / DONE).exists()]
    return import_each(repo, unfinished, sweeps, put)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="*", type=Path, help="a one-shot's results.tar.gz, or the folder it unpacks to")
    p.add_argument("--repo", type=Path, default=REPO, help="the repository to record them in (default: this one)")
    p.add_argument("--queue", type=Path, nargs="+",
                   help="the campaign's queue files (default: REPO/campaign/queue*.txt)")
    p.add_argument("--carried", type=Path, nargs="+", default=[], metavar="CARRY",
                   help="a slice's carry.tar.part00 (its other parts are read with it) or unpacked carry/ folder: "
                        "its unfinished runs go to results/campaign/_carry/ for the CPU lanes to resume")
    a = p.parse_args(argv)
    sweeps, refused = campaign_sweeps(a.queue or sorted((a.repo / "campaign").glob("queue*.txt"))), 0
    with tempfile.TemporaryDirectory() as scratch:
        for i, source in enumerate(a.results + a.carried):
            try:
                tree = unpack(source, Path(scratch) / str(i))
            except Truncated as e:
                print(f"gpu_import: {source}: the archive cannot be read to its end ({e}): expected the whole file; "
                      f"copy it again (nothing was recorded from it)", file=sys.stderr)
                return 2
            if tree is None:
                print(f"gpu_import: {source}: expected a one-shot's results.tar.gz, carry.tar.part00 or an unpacked "
                      f"folder of either", file=sys.stderr)
                return 2
            carried = i >= len(a.results)
            refused += hand_over(a.repo, tree, sweeps) if carried else record_finished(a.repo, source, tree, sweeps)
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
