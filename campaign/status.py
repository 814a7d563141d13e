"""Where the campaign stands: every step of the queue files, read as scripts/campaign.sh reads them, with how many of
its runs are recorded under results/campaign/ (done), which are under way in the state folder (the last update
their train.log reached), and how many are left; then the totals over the distinct runs of all the queues.

    python campaign/status.py                          # campaign/queue*.txt; state folder ../campaign beside the checkout
    python campaign/status.py --queue campaign/queue.txt --state /elsewhere/campaign

A run is done when its done.json is in results/campaign/<sweep>/<run>/ of this checkout (committed or not: the
campaign commits it right after copying it); under way when its folder in STATE/runs/ has a train.log but no
done.json recorded here. Reads files only: it starts, stops and changes nothing.
"""
import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fairseq_compgen.pipelines import sweep  # noqa: E402
from fairseq_compgen.pipelines.train_log import read_records  # noqa: E402


def last_update(log: Path):
    """The highest update a train.log reports (its last invocation may have restarted below it), or None."""
    updates = [r.num_updates for r in read_records(log) if r.num_updates is not None]
    return max(updates) if updates else None


def steps(queue: Path):
    """(line number, sweep file, glob) of every sweep step of a queue file (prep steps are skipped)."""
    for number, line in enumerate(queue.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        first, _, rest = line.partition(" ")
        if first != "prep":
            yield number, first, rest.strip()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queue", type=Path, nargs="+", help="queue files (default: campaign/queue*.txt)")
    p.add_argument("--state", type=Path, default=REPO.parent / "campaign",
                   help="the campaign's state folder (default: ../campaign beside this checkout)")
    p.add_argument("--results", type=Path, default=REPO / "results" / "campaign",
                   help="where finished runs are recorded (default: results/campaign of this checkout)")
    a = p.parse_args(argv)
    queues = a.queue or sorted((REPO / "campaign").glob("queue*.txt"))
    results = a.results
    seen = {}  # sweep name/run -> "done" | "under way" | "left", over all queues
    for queue in queues:
        if not queue.is_file():
            print(f"status.py: --queue {queue}: no such file", file=sys.stderr)
            return 2
        print(f"{queue.name}:")
        for number, sweep_file, glob in steps(queue):
            spec = sweep.load_sweep(REPO / sweep_file)
            name = Path(sweep_file).stem
            runs = sweep.select(sweep.plan(spec, a.state / "runs" / name, cpu=True), [glob])
            done, going, left = [], [], []
            for run in runs:
                key = f"{name}/{run.name}"
                if (results / name / run.name / "done.json").is_file():
                    done.append(run.name)
                    seen[key] = "done"
                    continue
                log = a.state / "runs" / name / run.name / "train.log"
                if log.is_file():
                    going.append(f"{run.name} (update {last_update(log) or 0:,})")
                    seen[key] = "under way"
                else:
                    left.append(run.name)
                    seen.setdefault(key, "left")
            line = f"  {number:3d} {sweep_file} {glob}: {len(done)}/{len(runs)} done"
            if going:
                line += "; under way: " + ", ".join(going)
            if left and len(left) < len(runs):
                line += f"; {len(left)} left"
            print(line)
    counts = {k: sum(v == k for v in seen.values()) for k in ("done", "under way", "left")}
    print(f"distinct runs: {len(seen)}; done {counts['done']}, under way {counts['under way']}, "
          f"left {counts['left']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
