"""Carry the campaign's unfinished runs across machines: their last checkpoint and records, committed into this
repository before a session ends, and put back into a new state folder when the campaign starts on a fresh machine.

    python campaign/carry.py save                    # now: every unfinished run of ../campaign/runs with a checkpoint
    python campaign/carry.py save --after 165        # the same, 165 minutes from now (start it with the campaign)
    python campaign/carry.py restore --queue Q       # scripts/campaign.sh calls this before its queue Q

Why: the campaign's checkpoints live in its state folder (STATE, ../campaign beside the checkout), and a session's
machine is not always the next session's. On a fresh machine only the repository is left, so a run stopped by the
end of a session started again from scratch, and a run longer than one session (the 50,000-update Rel. Uni. run)
could never finish. `save` commits, for each run under STATE/runs/<sweep>/<dataset>/<config>/seedK/ that has a
checkpoint_last.pt and no done.json, that checkpoint and the run's records (settings, command, launch, commit and
machine records with their *.history, data.json, train.log) to results/campaign/_carry/<sweep>/<run>/, one commit
of that folder alone per run; a run whose carried checkpoint is already the same file, or at a later update, is
left as it is. A checkpoint_last.pt cut off (a session ended while fairseq copied a save over it) is carried as the
run's newest readable save, as the runner's repair_last resumes it; a run with nothing readable is reported and the
others are carried.
`restore` copies a carried run back into STATE/runs/ when that folder has no checkpoint of its own (a fresh
machine, or a run that never reached a checkpoint here) or one at an earlier update (a run a lane began again while a
further checkpoint, e.g. a lent GPU's, waited to be restored; this folder's files that differ are kept as
<name>.before-carry), and no sweep holds its lock; the campaign's sweep then
resumes it from the checkpoint as from its own (fairseq-train finds checkpoint_last.pt in the run folder; the
resume checks of tasks/checkpoint_guard.py compare the data, and the checkpoint is read by the package's
weights-only loader, fairseq_compgen/checkpoint_loading.py). When the run finishes, scripts/campaign.sh removes its
carried folder in the commit that records the run.

What it costs: every carried checkpoint stays in the repository's history, so `save` skips checkpoints larger
than --max-mb (default 16, in MiB: the SCAN-size presets' checkpoints are 4-12 MB, the campaign's Chaabouni curve
at d 128 15.4 MiB; the Chaabouni d = 256 presets', 64 MB, are not carried and resume only where the state folder
survives). Carry once per session, near its end, not
periodically. settings.json names the run's data folder absolutely, as it was on the machine the run began on
(another state folder, or a lent GPU's, campaign/gpu_import.py --carried); the sweep resumes it from the campaign's
own data folder when that holds the same files as the run's data.json (sweep.Run.same_data_moved), and refuses it
otherwise, so a run is restored only with its data.json.
"""
import argparse
import fcntl
import filecmp
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from campaign.status import steps  # noqa: E402  the queue files read as scripts/campaign.sh reads them
from fairseq_compgen.pipelines.runner import LOCK, RECORDS  # noqa: E402  the sweep's lock file; a run's records
from fairseq_compgen.checkpoint_loading import newest_readable  # noqa: E402
from fairseq_compgen.pipelines.train import checkpoint_updates  # noqa: E402

CARRY = Path("results") / "campaign" / "_carry"  # relative to the repository
CHECKPOINT = "checkpoint_last.pt"
SEED = re.compile(r"seed\d+")  # a run folder's name; not a carry's .tmp or .old left by a save cut short


def run_checkpoints(root: Path):
    """CHECKPOINT of every run folder <sweep>/<dataset>/<config>/seedK under `root`, sorted."""
    return [ck for ck in sorted(root.glob(f"*/*/*/seed*/{CHECKPOINT}")) if SEED.fullmatch(ck.parent.name)]


def unfinished_runs(state: Path):
    """(run folder relative to STATE/runs, i.e. <sweep>/<dataset>/<config>/seedK, its path) of every run with a
    checkpoint and no done.json."""
    runs = state / "runs"
    for ck in run_checkpoints(runs):
        if not (ck.parent / "done.json").exists():
            yield ck.parent.relative_to(runs).as_posix(), ck.parent


def num_updates(checkpoint: Path) -> int:
    """The update a checkpoint was saved at (the package's weights-only reader); a copy that does not load (a
    checkpoint caught while fairseq was writing it) raises."""
    updates = checkpoint_updates(checkpoint)
    if updates is None:
        raise ValueError(f"{checkpoint}: not a complete fairseq checkpoint")
    return updates


def git(repo: Path, *args, check=True):
    return subprocess.run(["git", "-C", str(repo), *args], check=check, capture_output=True, text=True)


def committed(repo: Path, path: str) -> bool:
    """`path` is in the repository's HEAD commit (staged alone does not count)."""
    return git(repo, "cat-file", "-e", f"HEAD:{path}", check=False).returncode == 0


def recorded(repo: Path, rel: str) -> bool:
    """The finished run `rel` (<sweep>/<dataset>/<config>/seedK) is committed under results/campaign/, or under
    results/campaign_gpu/ (finished on a lent GPU), as scripts/campaign.sh reads it."""
    return any(committed(repo, f"results/{where}/{rel}/done.json") for where in ("campaign", "campaign_gpu"))


def commit_paths(repo: Path, paths, message: str, tries: int = 6) -> None:
    """git add and commit `paths` alone, retried: a lane may be committing a finished run this second
    (index.lock). RuntimeError when every try failed."""
    for _ in range(tries):
        if (git(repo, "add", "-A", "--", *paths, check=False).returncode == 0
                and git(repo, "commit", "-q", "-m", message, "--", *paths, check=False).returncode == 0):
            return
        time.sleep(5)
    raise RuntimeError(f"git could not commit {', '.join(map(str, paths))} ({tries} tries)")


def copy_stable(src: Path, dest: Path, tries: int = 5) -> None:
    """Copy `src` to `dest` such that the copy is one version of the file: fairseq copies a new checkpoint over
    checkpoint_last.pt in place, so a copy taken meanwhile could mix two; retried until the file's size and mtime
    are the same before and after the copy."""
    for _ in range(tries):
        before = src.stat()
        shutil.copy2(src, dest)
        after = src.stat()
        if before.st_mtime_ns == after.st_mtime_ns and before.st_size == after.st_size == dest.stat().st_size:
            return
        time.sleep(2)
    raise RuntimeError(f"{src} kept changing while it was copied ({tries} tries)")


def carry(repo: Path, rel: str, run: Path, where: str = ""):
    """Put the run folder `run`'s checkpoint and records under results/campaign/_carry/REL (through a temporary
    name: nothing half-written under the carried name) and commit that folder alone: (the checkpoint's update, the
    commit message).
    `where`: the machine it trained on, when not a lane's (campaign/gpu_import.py --carried: a lent GPU)."""
    ck = run / CHECKPOINT
    mb = ck.stat().st_size / 2 ** 20
    dest = repo / CARRY / rel
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        copy_stable(ck, tmp / CHECKPOINT)
        try:
            updates = num_updates(tmp / CHECKPOINT)
        except ValueError:  # cut off (a session ended while fairseq copied a save over it): its newest readable
            # save, as the runner's repair_last resumes it
            newest, _, _ = newest_readable(run, exclude=ck)
            if newest is None:
                raise
            copy_stable(Path(newest), tmp / CHECKPOINT)
            updates = num_updates(tmp / CHECKPOINT)
        before = carried_updates(dest)
        if before is not None and before > updates:
            raise Behind(f"its carried checkpoint is at update {before}, this state folder's at {updates}")
        for name in RECORDS:
            if (run / name).is_file():
                shutil.copy2(run / name, tmp / name)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = dest.with_name(dest.name + ".old")  # the earlier carry stays under its name until the new one is whole
    shutil.rmtree(old, ignore_errors=True)
    if dest.exists():
        dest.rename(old)
    tmp.rename(dest)
    shutil.rmtree(old, ignore_errors=True)
    at = (dest / "commit.txt").read_text().split()[0][:12] if (dest / "commit.txt").is_file() else "?"
    path = (CARRY / rel).as_posix()
    msg = (f"Campaign carry: {rel} at update {updates} (training at {at}{' on ' + where if where else ''}; "
           f"{mb:.1f} MB), to resume on a fresh machine")
    commit_paths(repo, [path], msg)
    return updates, msg


class Behind(ValueError):
    """The run's checkpoint here is at an earlier update than the one carried already (e.g. a run a lane began
    again while a lent GPU's further checkpoint waited to be restored): not carried over it."""


def carried_updates(dest: Path):
    """The update of the checkpoint carried at `dest`, or None (none, or not readable)."""
    try:
        return num_updates(dest / CHECKPOINT) if (dest / CHECKPOINT).is_file() else None
    except (ValueError, OSError):
        return None


def save(repo: Path, state: Path, max_mb: float) -> int:
    carried = failed = 0
    for rel, run in unfinished_runs(state):
        if recorded(repo, rel):
            continue
        ck = run / CHECKPOINT
        mb = ck.stat().st_size / 2 ** 20
        if mb > max_mb:
            print(f"carry: {rel}: not carried, its checkpoint is {mb:.0f} MB (over --max-mb {max_mb:g})")
            continue
        dest = repo / CARRY / rel
        # already carried: the same checkpoint there and committed (a save whose commit failed left it uncommitted:
        # carried again)
        if (dest / CHECKPOINT).is_file() and filecmp.cmp(dest / CHECKPOINT, ck, shallow=False) and not git(
                repo, "status", "--porcelain", "--", (CARRY / rel).as_posix(), check=False).stdout.strip():
            print(f"carry: {rel}: already carried at this checkpoint")
            continue
        try:
            updates, _ = carry(repo, rel, run)
        except Behind as e:
            print(f"carry: {rel}: not carried: {e}")
            continue
        except RuntimeError as e:  # one run's failed commit (a held index lock): the others are still carried
            print(f"carry: {rel}: not carried: {e}; its files are under {CARRY / rel}, committed by a later save",
                  file=sys.stderr)
            failed += 1
            continue
        except (ValueError, OSError) as e:  # no readable checkpoint (cut off, no readable save): the others still
            print(f"carry: {rel}: not carried: {e}", file=sys.stderr)
            failed += 1
            continue
        print(f"carry: committed {rel} at update {updates}")
        carried += 1
    print(f"carry: {carried} run(s) carried" + (f", {failed} not (why: above)" if failed else ""))
    return 1 if failed else 0


def updates_here(run: Path):
    """The update a run folder resumes from: its checkpoint_last.pt's, or where that is cut off its newest readable
    save's (as the runner's repair_last resumes it); None when it has none."""
    try:
        return num_updates(run / CHECKPOINT)
    except (ValueError, OSError):
        return newest_readable(run, exclude=run / CHECKPOINT)[1] if run.is_dir() else None


def goes_on_here(run: Path, carried: Path) -> bool:
    """The run folder `run` of this state folder resumes at least as far as the carried checkpoint `carried`: it
    goes on from its own (a carried checkpoint that does not load is never restored over it)."""
    if not (run / CHECKPOINT).exists():
        return False
    here, there = updates_here(run), carried_updates(carried.parent)
    return there is None or (here is not None and here >= there)


def restore(repo: Path, state: Path, queues=()) -> int:
    """Put each carried run back into STATE/runs where it has no checkpoint and no live sweep holds it; with
    `queues` (queue files), only the runs of the sweeps they run (a lane restores what its queue trains)."""
    sweeps = {Path(sweep_file).stem for queue in queues for _, sweep_file, _ in steps(queue)}
    root = repo / CARRY
    for ck in run_checkpoints(root):
        carried = ck.parent
        rel = carried.relative_to(root).as_posix()
        if queues and rel.split("/")[0] not in sweeps:
            continue  # another queue's
        if recorded(repo, rel):
            continue  # recorded: the campaign skips it (its carried folder is removed when it is recorded)
        run = state / "runs" / rel
        if goes_on_here(run, ck):
            continue  # this state folder's own checkpoint, as far as the carried one: the run goes on from it
        if not (carried / "data.json").is_file():
            print(f"carry: {rel}: not restored: no data.json, so the campaign's sweep could not tell whether its "
                  f"data folder here holds the files it trained on")
            continue
        run.mkdir(parents=True, exist_ok=True)
        with open(run / LOCK, "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                print(f"carry: {rel}: not restored: a sweep is running it here")
                continue
            if goes_on_here(run, ck):
                continue  # restored by the other lane's campaign a moment ago
            if (run / CHECKPOINT).exists():
                print(f"carry: {rel}: this state folder's checkpoint is at update {updates_here(run)}, the carried "
                      f"one at {carried_updates(carried)}: restored over it (this folder's files that differ are "
                      f"kept as <name>.before-carry)")
            # the records first, the checkpoint last, each whole under its name (written to .tmp, then renamed):
            # a restore cut short leaves no checkpoint, and the next restore starts it again
            # a record of an attempt here that saved no checkpoint (its train.log) is kept as <name>.before-carry
            files = [f for f in carried.iterdir() if f.is_file() and f.name != CHECKPOINT] + [ck]
            for f in files:
                shutil.copy2(f, run / (f.name + ".tmp"))
                if (run / f.name).is_file() and not filecmp.cmp(run / f.name, f, shallow=False):
                    os.replace(run / f.name, run / (f.name + ".before-carry"))
                os.replace(run / (f.name + ".tmp"), run / f.name)
        print(f"carry: restored {rel} into {run}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=("save", "restore"))
    p.add_argument("--state", type=Path, default=REPO.parent / "campaign",
                   help="the campaign's state folder (default: ../campaign beside this checkout)")
    p.add_argument("--repo", type=Path, default=REPO, help="the repository to commit into or restore from "
                   "(default: this checkout)")
    p.add_argument("--max-mb", type=float, default=16.0,
                   help="save: leave out checkpoints larger than this many MiB (default 16)")
    p.add_argument("--after", type=float, default=0.0, metavar="MINUTES",
                   help="save: wait this many minutes first (default 0)")
    p.add_argument("--queue", type=Path, action="append", default=[],
                   help="restore: only the runs of the sweeps this queue file runs (repeatable; default: every "
                        "carried run)")
    a = p.parse_args(argv)
    if a.action == "restore":
        return restore(a.repo, a.state, a.queue)
    if a.after > 0:
        print(f"carry: saving at {time.strftime('%H:%M', time.localtime(time.time() + a.after * 60))}", flush=True)
        time.sleep(a.after * 60)
    return save(a.repo, a.state, a.max_mb)


if __name__ == "__main__":
    sys.exit(main())
