"""What a sweep would cost on this machine, measured before it is run.

For each (dataset, configuration) of a sweep, or those --only selects, this runs the sweep's own training command
(`fairseq-compgen train` with the run's recipe, flags and first seed, as `fairseq-compgen sweep --dry-run` shows it)
on the real data for a few updates, with validation and checkpoints off, and reads fairseq's clock (`wall`) from
the JSON log: seconds per update between the first and the last logged interval, so that start-up, data loading
and the first --log-every updates are left out. Times the run's budget -- --max-update, or --max-epoch times the
updates per epoch that fairseq's fractional epoch counter gives (the smaller when both are set) -- and the number
of seeds, that is the training time of the cell. Validation and the final evaluation are not included, so these
are lower bounds for the sweep.

    python benchmarks/sweep_cost.py csordas_table3 --only 'scan/*' --cpu --threads 1 --updates 50 \\
        --json results/sweep_cost_cpu.json

The sweep's data folders must exist (fairseq-compgen prep ...). fairseq logs `wall` in whole seconds: measure over
at least ~30 s (--updates) for a few per cent.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from fairseq_compgen import recipes
from fairseq_compgen.pipelines import runner, sweep, train


def budget(run: sweep.Run, updates_per_epoch: float) -> int:
    """The run's training budget in updates: its --max-update, or --max-epoch x updates per epoch."""
    args = recipes.train_args(run.recipe, run.arch, run.data, run.dir, run.flags)
    limits = []
    if train.max_update(args):
        limits.append(train.max_update(args))
    epochs = train.last(args, "--max-epoch")
    if epochs not in (None, "0"):
        limits.append(round(int(epochs) * updates_per_epoch))
    if not limits:
        raise SystemExit(f"sweep_cost: {run.name} has neither --max-update nor --max-epoch: no budget to scale to")
    return min(limits)


def intervals(log: Path) -> list:
    """(num_updates, fractional epoch, wall seconds) of each train_inner line of a --log-format json log."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if "| train_inner | {" in line:
            stats = json.loads(line.split("| train_inner | ", 1)[1])
            found.append((int(stats["num_updates"]), float(stats["update"]), float(stats["wall"])))
    return found


def measure(run: sweep.Run, updates: int, log_every: int, threads, scratch: Path) -> dict:
    """Train `run` for log_every + updates updates into scratch; seconds per update and updates per epoch."""
    save = scratch / run.name.replace("/", "_")
    cmd = [str(save) if word == run.dir else word for word in run.train_command()]
    cmd += ["--max-update", str(log_every + updates), "--log-interval", str(log_every), "--log-format", "json",
            "--disable-validation", "--no-save"]
    log = scratch / (save.name + ".log")
    with open(log, "w") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, env=runner.tool_env(threads))
    found = intervals(log)
    if rc != 0 or len(found) < 2:
        raise SystemExit(f"sweep_cost: {run.name}: training failed or logged fewer than two intervals: "
                         f"{log.read_text(errors='replace')[-2000:]}")
    (n0, _, wall0), (n1, epoch1, wall1) = found[0], found[-1]
    # fairseq's fractional epoch: batch i of L in epoch e logs e - 1 + i / L, rounded to 3 decimals, so L is
    # the whole number nearest n1 / epoch1: exact while L * L / n1 < 1000 (L = 65 SCAN batches of 256 at n1 = 60);
    # beyond that an estimate, off by about L * L / n1 / 2000
    return {"s_per_update": (wall1 - wall0) / (n1 - n0), "updates_per_epoch": round(n1 / epoch1),
            "measured_updates": n1 - n0, "measured_s": wall1 - wall0}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sweep", help="sweep file or packaged sweep name")
    p.add_argument("--only", action="append", help="glob over dataset/config/seedK, as fairseq-compgen sweep's")
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--threads", type=int, help="OMP/MKL threads of the measured process")
    p.add_argument("--updates", type=int, default=50, help="timed updates per (dataset, configuration)")
    p.add_argument("--log-every", type=int, default=10, help="untimed warm-up updates, and the log interval")
    p.add_argument("--json", help="also write the rows and the machine to this file")
    a = p.parse_args(argv)
    if a.updates % a.log_every:
        raise SystemExit("sweep_cost: --updates must be a multiple of --log-every (fairseq logs every interval)")
    spec = sweep.load_sweep(a.sweep)
    runs = sweep.select(sweep.plan(spec, Path(tempfile.gettempdir()) / "sweep_cost_plan", cpu=a.cpu), a.only)
    cells = {}
    for r in runs:  # one measurement per (dataset, configuration), scaled by its planned seeds
        cells.setdefault((r.dataset, r.config), []).append(r)
    rows = []
    with tempfile.TemporaryDirectory(prefix="sweep_cost_") as scratch:
        for (dataset, config), seeds in cells.items():
            run = seeds[0]
            m = measure(run, a.updates, a.log_every, a.threads, Path(scratch))
            n = budget(run, m["updates_per_epoch"])
            rows.append({"dataset": dataset, "config": config, "arch": run.arch, "recipe": run.recipe,
                         **m, "budget_updates": n, "hours_per_run": m["s_per_update"] * n / 3600,
                         "seeds": len(seeds), "hours": m["s_per_update"] * n * len(seeds) / 3600})
            print(f"{dataset}/{config}: {m['s_per_update']:.3f} s/update x {n:,} updates = "
                  f"{rows[-1]['hours_per_run']:.1f} h per run, x {len(seeds)} seeds = {rows[-1]['hours']:.1f} h",
                  flush=True)
    machine = json.loads(train.machine(a.cpu))
    print(f"\n| dataset | configuration | s / update | budget (updates) | h / run | seeds | h |\n|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['dataset']} | {r['config']} | {r['s_per_update']:.3f} | {r['budget_updates']:,} | "
              f"{r['hours_per_run']:.1f} | {r['seeds']} | {r['hours']:.1f} |")
    total = sum(r["hours"] for r in rows)
    print(f"\ntraining alone, one run at a time: {total:.1f} h on {machine['host']} ({machine['cpu']}, "
          f"{machine['threads']} threads{', ' + machine['gpu'] if machine['gpu'] else ''})")
    if a.json:
        out = Path(a.json)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps({"command": " ".join(sys.argv), "commit": train.commit(), "machine": machine,
                                   "rows": rows, "total_hours": total}, indent=1))
        tmp.replace(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
