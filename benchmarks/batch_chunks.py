"""Seconds per training update with batches drawn at random (`--random-batches`), computed whole or in length-sorted
chunks (`--batch-chunks K`, tasks/batch_chunks.py), as ratios to fairseq's own length-sorted batches, measured in one
run with the real training command on a prepared split.

    python benchmarks/batch_chunks.py data/scan/length_cutoff_26/bin --arch rel_uni_transformer_scan \
        --chunks 2 4 8 --updates 100 --rounds 2 --json results/batch_chunks_rel_uni/bench.json

Each setting is one `fairseq-compgen train --recipe csordas/DATASET ARCH DATA ...` process (the recipe's batch size
and model; one thread, no checkpoints, no validation), run one at a time, the settings in the same order in every
round. Time: the mean of 1 / `ups` (fairseq's updates per second over each log interval) from the second interval
on (the first holds the start-up); per setting the median over rounds. Extra training flags
follow `--` (e.g. `-- --autocast-bf16`).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def seconds_per_update(log: str) -> float:
    """Seconds per update over the train_inner lines after the first (JSON log format): the mean of 1 / `ups`, the
    rate fairseq measures over each interval (its `train_wall` is rounded to whole seconds, too coarse here)."""
    rates = [float(json.loads(line.split("| train_inner | ", 1)[1])["ups"])
             for line in log.splitlines() if "| train_inner | " in line]
    if len(rates) < 2:
        raise SystemExit(f"batch_chunks: expected at least two train_inner lines (raise --updates); the log ends:\n"
                         f"{log[-2000:]}")
    return statistics.mean(1 / r for r in rates[1:])


def run(data, arch, dataset, flags, updates, interval, threads, extra) -> float:
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "fairseq_compgen.cli", "train", "--recipe", f"csordas/{dataset}", "--cpu", arch,
               data, os.path.join(out, "run"), *flags, "--max-update", str(updates), "--log-interval", str(interval),
               "--log-format", "json", "--no-save", "--disable-validation", "--num-workers", "0", *extra]
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise SystemExit(f"batch_chunks: {' '.join(cmd)} failed:\n{p.stderr[-3000:]}")
        return seconds_per_update(p.stdout + p.stderr)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", help="a prepared split's bin/ folder (e.g. data/scan/length_cutoff_26/bin)")
    p.add_argument("--arch", default="rel_uni_transformer_scan")
    p.add_argument("--dataset", default="scan", help="the recipe csordas/DATASET (default scan)")
    p.add_argument("--chunks", nargs="+", type=int, default=[2, 4, 8], help="the --batch-chunks values to measure")
    p.add_argument("--updates", type=int, default=100)
    p.add_argument("--interval", type=int, default=25, help="--log-interval: the timing's unit")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", help="also write the results here")
    a, extra = p.parse_known_args(argv)
    extra = [x for x in extra if x != "--"]
    if a.rounds < 1 or a.threads < 1 or a.interval < 1 or a.updates < 2 * a.interval:  # a median of nothing before
        p.error(f"--rounds {a.rounds} --threads {a.threads} --interval {a.interval} --updates {a.updates}: expected "
                f"positive numbers, and at least two intervals of updates")
    settings = {"fairseq's batches": [], "random": ["--random-batches"]}
    settings.update({f"random, {k} chunks": ["--random-batches", "--batch-chunks", str(k)] for k in a.chunks})
    times = {name: [] for name in settings}
    for r in range(a.rounds):
        for name, flags in settings.items():
            times[name].append(run(a.data, a.arch, a.dataset, flags, a.updates, a.interval, a.threads, extra))
            print(f"round {r + 1}: {name}: {times[name][-1]:.3f} s/update", file=sys.stderr, flush=True)
    base = statistics.median(times["fairseq's batches"])
    print(f"{a.arch} on {a.data}, {a.updates} updates per run, {a.threads} thread(s), {a.rounds} round(s)"
          + (f", extra flags {' '.join(extra)}" if extra else ""))
    print("| batches | s/update (median) | per round | ratio to fairseq's batches |")
    print("|---|---|---|---|")
    rows = []
    for name, values in times.items():
        median = statistics.median(values)
        rows.append({"setting": name, "flags": settings[name], "s_per_update": values, "median": median,
                     "ratio": median / base})
        print(f"| {name} | {median:.3f} | {', '.join(f'{v:.3f}' for v in values)} | {median / base:.2f} |")
    if a.json:
        from fairseq_compgen.pipelines import train

        record = {"arch": a.arch, "data": a.data, "updates": a.updates, "interval": a.interval, "rounds": a.rounds,
                  "threads": a.threads, "extra": extra, "commit": train.commit(),
                  "machine": json.loads(train.machine(cpu=True)), "rows": rows}
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        tmp = a.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(record, f, indent=1)
        os.replace(tmp, a.json)


if __name__ == "__main__":
    main()
