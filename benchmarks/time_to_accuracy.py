"""Time to accuracy: train architectures on a prepared split with the real training command and record, at every
validation, the update count, wall time, CPU time and exact-match accuracy on each validation subset; write JSON
and a PNG learning curve.

    python benchmarks/time_to_accuracy.py data/scan/length_cutoff_26/bin \
        --archs rel_uni_transformer_scan compgen_transformer_scan --seeds 1 --updates 6000 --eval-every 500 \
        --threads 1 --out results/time_to_accuracy/scan_length26
    python benchmarks/time_to_accuracy.py --report results/time_to_accuracy/scan_length26.json   # markdown table

Each (arch, seed) is one `fairseq-compgen train --recipe csordas/DATASET ARCH ...` process (Table 4's hyperparameters
for DATASET) run side by side with the others (`--jobs`, default all at once), with `--threads` intra-op threads each
(OMP_NUM_THREADS / torch threads), `--log-format json`, and validation on every subset of the data folder other
than `train` every `--eval-every` updates. The learning curve is read from fairseq's JSON validation lines as they
are printed; wall time is measured from the process start, CPU time from /proc (user + system of the trainer).
`--stop-at TARGET` stops a run once its generalization metric (`--target-subset`, default `gen`) reaches TARGET,
so the benchmark measures time *to* accuracy; without it every run goes to `--updates`.
Extra fairseq-train flags follow `--` (e.g. `-- --encoder-layers 2`).

Writes OUT.json (machine, commit, command of every run, all points) and OUT.png (titled --title, the lines named
as the papers name the models), plus each run's log and checkpoint_last.pt under --runs (default
runs/time_to_accuracy): fairseq writes every save as checkpoint_E_U.pt and copies it to checkpoint_best.pt and
checkpoint_last.pt, so after a finished run the copies identical to checkpoint_last.pt (the one fairseq-train resumes
from and `fairseq-compgen eval` reads) are removed.
"""
import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time

from pathlib import Path

from fairseq_compgen.pipelines import train
from fairseq_compgen.pipelines.train import drop_copies_of_last
from fairseq_compgen.pipelines.train_log import parse_line

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of a live process (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def parse_valid_line(line: str, subsets):
    """fairseq's progress line for one validation of a requested subset -> (subset, {metric: float, num_updates})
    or None (fairseq_compgen.pipelines.train_log reads the line)."""
    r = parse_line(line)
    if r is None or r.kind != "valid" or r.subset not in subsets or r.num_updates is None:
        return None
    return r.subset, {**r.stats, "num_updates": float(r.num_updates)}


def accuracies(metrics: dict) -> dict:
    """The exact-match metrics of one validation line: {"accuracy": x} (and greedy_accuracy with --eval-greedy)."""
    return {k: v for k, v in metrics.items() if k in ("accuracy", "greedy_accuracy")}


class Run:
    def __init__(self, a, arch, seed):
        self.arch, self.seed = arch, seed
        self.save = os.path.join(a.runs, f"{arch}_s{seed}")
        os.makedirs(self.save, exist_ok=True)
        self.cmd = [sys.executable, "-m", "fairseq_compgen.cli", "train", "--recipe", f"csordas/{a.dataset}", "--cpu",
                    arch, a.data, self.save, "--seed", str(seed), "--max-update", str(a.updates),
                    *(["--valid-subset", a.valid_subsets] if a.valid_subsets else []),
                    "--validate-interval-updates", str(a.eval_every), "--save-interval-updates", str(a.eval_every),
                    "--log-format", "json", "--log-interval", "100", "--num-workers", "0", *a.extra]
        self.points, self.reached, self.status = [], None, None

    def start(self, a):
        env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), MKL_NUM_THREADS=str(a.threads))  # OMP_WAIT_POLICY: cli.py
        self.t0 = time.time()
        self.log = open(os.path.join(self.save, "train.log"), "w")
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                     cwd=ROOT, start_new_session=True)
        self.thread = threading.Thread(target=self.follow, args=(a,), daemon=True)
        self.thread.start()

    def follow(self, a):
        pending = {}
        for line in self.proc.stdout:
            self.log.write(line)
            self.log.flush()
            parsed = parse_valid_line(line, a.subset_names)
            if parsed is None:
                continue
            subset, m = parsed
            upd = int(m["num_updates"])
            pt = pending.setdefault(upd, {"updates": upd, "wall_s": round(time.time() - self.t0, 1),
                                          "cpu_s": round(cpu_seconds(self.proc.pid), 1)})
            pt[subset] = accuracies(m)
            if all(s in pt for s in a.subset_names):
                self.points.append(pending.pop(upd))
                print(f"[{self.arch} s{self.seed}] {json.dumps(self.points[-1])}", flush=True)
                gen = pt.get(a.target_subset, {}).get("accuracy")
                if self.reached is None and gen is not None and gen >= a.target:
                    self.reached = dict(self.points[-1])
                    if a.stop_at is not None:
                        self.status = f"stopped at {a.target_subset} >= {a.target}"
                        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait()
        self.log.close()
        if self.status is None:
            self.status = "finished" if self.proc.returncode == 0 else f"failed (exit {self.proc.returncode})"
        if self.status == "finished":
            drop_copies_of_last(Path(self.save), best=True)

    def result(self):
        if self.status is None and hasattr(self, "proc"):
            status = "running"
        else:
            status = self.status or "not started"
        return {"arch": self.arch, "seed": self.seed, "command": self.cmd, "save_dir": self.save,
                "status": status, "points": list(self.points), "target_reached_at": self.reached}


def plot(results, a, path):
    from fairseq_compgen.pipelines.plotting import pyplot

    plt = pyplot()
    from fairseq_compgen.models.archs import paper_name  # imports fairseq and torch: only here, once

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, r in enumerate(results):
        c = colors[i % len(colors)]
        for subset, style in zip(a.subset_names, ("--", "-", ":", "-.")):  # IID dashed, generalization solid
            pts = [p for p in r["points"] if "accuracy" in p.get(subset, {})]
            ys = [p[subset]["accuracy"] for p in pts]
            axes[0].plot([p["updates"] for p in pts], ys, style, color=c, label=f"{paper_name(r['arch'])} s{r['seed']} {subset}")
            axes[1].plot([p["wall_s"] / 60 for p in pts], ys, style, color=c)
    axes[0].set_xlabel("updates")
    axes[1].set_xlabel(f"wall minutes ({a.threads} thread(s) per run, {len(results)} run(s) side by side)")
    for ax in axes:
        ax.set_ylabel("exact-match accuracy")
        ax.axhline(a.target, color="grey", lw=0.5)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(a.title)
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, path)


def report(path: str) -> str:
    """A markdown table of the learning curves in a JSON written by this script."""
    d = json.load(open(path))
    subsets = sorted({k for r in d["runs"] for p in r["points"] for k in p if isinstance(p[k], dict)},
                     key=lambda k: (k != "valid", k))
    lines = [f"{path}: commit {d['commit']}, {d['date']}, {d['threads']} thread(s) per run, {d['jobs']} run(s) at "
             f"once, {d['machine']['cpus']} cores", "",
             "| arch | seed | updates | wall min | CPU min | " + " | ".join(subsets) + " |",
             "|---|---|---|---|---|" + "---|" * len(subsets)]
    for r in d["runs"]:
        for p in r["points"]:
            accs = " | ".join(f"{p[s]['accuracy']:.4f}" if s in p else "-" for s in subsets)
            lines.append(f"| {r['arch']} | {r['seed']} | {p['updates']} | {p['wall_s'] / 60:.1f} | {p['cpu_s'] / 60:.1f} | "
                         f"{accs} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", help="fairseq-preprocess folder (e.g. data/scan/length_cutoff_26/bin)")
    p.add_argument("--dataset", default="scan", help="the recipe csordas/DATASET (default scan)")
    p.add_argument("--archs", nargs="+", default=["rel_uni_transformer_scan", "compgen_transformer_scan"])
    p.add_argument("--seeds", nargs="+", type=int, default=[1])
    p.add_argument("--updates", type=int, default=6000, help="--max-update of every run")
    p.add_argument("--eval-every", type=int, default=500, help="validate (and checkpoint) every N updates")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per run")
    p.add_argument("--jobs", type=int, default=0, help="runs at once (default: all)")
    p.add_argument("--valid-subsets", default="valid,gen", help="validation subsets, IID first")
    p.add_argument("--target-subset", default="gen")
    p.add_argument("--target", type=float, default=0.99,
                   help="the accuracy on --target-subset counted as solving the split (default 0.99)")
    p.add_argument("--stop-at", action="store_const", const=True, default=None,
                   help="stop a run once its `accuracy` on --target-subset reaches --target")
    p.add_argument("--runs", default="runs/time_to_accuracy")
    p.add_argument("--out", required=True, help="output prefix: writes OUT.json and OUT.png")
    p.add_argument("--title", help="the plot's title (default: --dataset and the data folder's split name)")
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--report"]:  # python benchmarks/time_to_accuracy.py --report OUT.json
        print(report(argv[1]))
        return 0
    cut = argv.index("--") if "--" in argv else len(argv)  # after `--`: extra fairseq-train flags
    a = p.parse_args(argv[:cut])
    a.extra = argv[cut + 1:]
    a.subset_names = a.valid_subsets.split(",")
    split = os.path.basename(os.path.normpath(a.data))
    split = os.path.basename(os.path.dirname(os.path.normpath(a.data))) if split == "bin" else split
    a.title = a.title or f"{a.dataset.upper()}, {split.replace('_', ' ')}: accuracy during training"
    if a.target_subset not in a.subset_names:
        p.error(f"--target-subset {a.target_subset} is not among --valid-subsets {a.valid_subsets}")
    if not os.path.isfile(os.path.join(a.data, "dict.src.txt")):
        p.error(f"{a.data}: no dict.src.txt; prepare the data first (e.g. fairseq-compgen prep scan --split ... --out ...)")
    # an earlier measurement is never written over: its JSON and plot, or a run's train.log (opened anew below)
    earlier = [f for f in (a.out + ".json", a.out + ".png") if os.path.exists(f)] + [
        os.path.join(a.runs, f"{arch}_s{seed}", "train.log") for arch in a.archs for seed in a.seeds
        if os.path.exists(os.path.join(a.runs, f"{arch}_s{seed}", "train.log"))]
    if earlier:
        p.error(f"{earlier[0]} holds an earlier measurement: expected a new --out and --runs (or remove it)")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)

    head, *dirty = train.commit().split()  # "HASH" or "HASH dirty"
    runs = [Run(a, arch, seed) for arch in a.archs for seed in a.seeds]
    jobs = a.jobs or len(runs)
    t0 = time.time()
    date = time.strftime("%Y-%m-%d %H:%M")

    def snapshot(final: bool) -> dict:
        """Write OUT.json (after every new point too, so an interrupted benchmark keeps what it measured)."""
        out = {"data": a.data, "dataset": a.dataset, "updates": a.updates, "eval_every": a.eval_every,
               "threads": a.threads, "jobs": jobs, "target": a.target, "target_subset": a.target_subset,
               "stop_at_target": bool(a.stop_at), "commit": head[:7] + ("+dirty" if dirty else ""), "date": date,
               "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "processor": platform.processor()},
               "complete": final, "total_wall_s": round(time.time() - t0, 1), "runs": [r.result() for r in runs]}
        tmp = a.out + ".json.tmp"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=1)
        os.replace(tmp, a.out + ".json")
        return out

    active, queue, seen = [], list(runs), 0
    while queue or active:
        while queue and len(active) < jobs:
            r = queue.pop(0)
            r.start(a)
            active.append(r)
        time.sleep(1)
        for r in list(active):
            if not r.thread.is_alive():
                active.remove(r)
        n = sum(len(r.points) for r in runs)
        if n != seen:
            seen = n
            snapshot(final=False)
    out = snapshot(final=True)
    plot(out["runs"], a, a.out + ".png")
    print(f"\ntime to {a.target_subset} >= {a.target} (--target: the accuracy counted as solving the split; "
          f"the grey line of the plot):")
    for r in out["runs"]:
        hit = r["target_reached_at"]
        when = (f"{hit['updates']} updates, {hit['wall_s'] / 60:.1f} wall min, {hit['cpu_s'] / 60:.1f} CPU min" if hit
                else "not reached")
        last = r["points"][-1] if r["points"] else {}
        print(f"  {r['arch']} seed {r['seed']}: {when}; last point {json.dumps(last)} [{r['status']}]")
    print(f"wrote {a.out}.json and {a.out}.png")
    return 0 if all(not r["status"].startswith("failed") for r in out["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
