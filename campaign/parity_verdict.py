"""The bf16-autocast parity verdict of campaign/autocast_parity_scan26.yaml, from committed raw files.

    python campaign/parity_verdict.py results/campaign/csordas_scan26_5k/scan/rel_uni_trafo \
        results/campaign/autocast_parity_scan26/scan/rel_uni_trafo_bf16 --seeds 1 2 3

The rule, as that sweep file fixed it before any result: the bf16 mean of valid and of gen accuracy at 5,000 updates
lies within 2 standard deviations of the fp32 seeds' mean, or within 0.05 where 2 standard deviations are smaller
(the same floor as the headline verdicts' 0.05), and the loss curves overlap within seed noise.

The file left "within seed noise" open; this script, written on 2026-11-25 when seeds 1-2 of both arms were in and
seed 3 was not, makes it: at every validation, for each subset's loss, the two arms' means differ by at most 2
standard errors of that difference, sqrt(s_fp32^2 / n + s_bf16^2 / n), the seed noise of both arms (a two-sample
test). It also prints a stricter check that is not part of the verdict, because it is stated here after its first
result: the bf16 mean inside the fp32 seeds' [min, max] widened by 2 of their standard deviations. On seeds 1-2 it
failed at one point (valid loss at 4,000 updates: fp32 0.001 and 0.001, bf16 0.001 and 0.026), where the fp32
seeds agree at the log's 3-decimal resolution, so its width is zero and any one spike fails it; the fp32 arm spikes
the same way (seed 2's valid loss at 3,000 updates: 0.167 against seed 1's 0.011).

Accuracies are done.json's (greedy generation of the last checkpoint); losses are the validation records of each
run's train.log. Prints per-seed values, both tests and the verdict; exit status 0 either way, 2 on missing files.
"""
import argparse
import statistics
import sys
from pathlib import Path

from fairseq_compgen.errors import UsageError
from fairseq_compgen.pipelines.curves import learning_curves
from fairseq_compgen.pipelines.pooling import read_done

SUBSETS = ("valid", "gen")


def seeds_of(folder: Path, seeds):
    """{seed: (accuracy per subset, loss curve per subset)} of a configuration's seedK folders."""
    out = {}
    for k in seeds:
        run = folder / f"seed{k}"
        acc = read_done(run)["accuracy"]
        out[k] = ({s: float(acc[s]) for s in SUBSETS}, learning_curves(run / "train.log", metric="loss"))
    return out


def band(values):
    """(mean, std, tolerance) of the fp32 seeds: tolerance = max(2 std, 0.05)."""
    mean, std = statistics.mean(values), statistics.stdev(values)
    return mean, std, max(2 * std, 0.05)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("fp32", type=Path, help="the fp32 configuration's folder (seedK/ below it)")
    p.add_argument("bf16", type=Path, help="the bf16-autocast configuration's folder")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    a = p.parse_args(argv)
    if len(set(a.seeds)) != len(a.seeds):
        p.error(f"--seeds {' '.join(map(str, a.seeds))}: a seed named twice would count twice")
    if len(a.seeds) < 2:
        p.error(f"--seeds {' '.join(map(str, a.seeds))}: the fp32 band needs a standard deviation, so 2 seeds at least")
    try:
        fp32, bf16 = seeds_of(a.fp32, a.seeds), seeds_of(a.bf16, a.seeds)
    except (UsageError, FileNotFoundError, KeyError) as e:
        print(f"parity_verdict.py: {e}", file=sys.stderr)
        return 2
    ok = True
    print("| subset | fp32 per seed | fp32 mean ± std | bf16 per seed | bf16 mean | |bf16 - fp32| | tolerance | within |")
    print("|---|---|---|---|---|---|---|---|")
    for s in SUBSETS:
        f = [fp32[k][0][s] for k in a.seeds]
        b = [bf16[k][0][s] for k in a.seeds]
        mean, std, tol = band(f)
        diff = abs(statistics.mean(b) - mean)
        ok &= diff <= tol
        print(f"| {s} accuracy | {', '.join(f'{x:.4f}' for x in f)} | {mean:.4f} ± {std:.4f} | "
              f"{', '.join(f'{x:.4f}' for x in b)} | {statistics.mean(b):.4f} | {diff:.4f} | {tol:.4f} | "
              f"{'yes' if diff <= tol else 'no'} |")
    print()
    print("| subset | update | fp32 loss per seed | bf16 loss per seed | mean difference | 2 standard errors | within "
          "| strict: fp32 [min, max] ± 2 std (not in the verdict) |")
    print("|---|---|---|---|---|---|---|---|")
    for s in SUBSETS:
        steps = sorted(set.intersection(*(set(fp32[k][1].get(s, {})) for k in a.seeds),
                                        *(set(bf16[k][1].get(s, {})) for k in a.seeds)))
        if not steps:
            print(f"parity_verdict.py: no {s} loss recorded at a common update in every train.log", file=sys.stderr)
            return 2
        for u in steps:
            f = [fp32[k][1][s][u] for k in a.seeds]
            b = [bf16[k][1][s][u] for k in a.seeds]
            diff = statistics.mean(b) - statistics.mean(f)
            se2 = 2 * (statistics.variance(f) / len(f) + statistics.variance(b) / len(b)) ** 0.5
            inside = abs(diff) <= se2 + 1e-12
            ok &= inside
            lo, hi = min(f) - 2 * statistics.stdev(f), max(f) + 2 * statistics.stdev(f)
            strict = "yes" if lo <= statistics.mean(b) <= hi else "no"
            print(f"| {s} loss | {u} | {', '.join(f'{x:.3f}' for x in f)} | {', '.join(f'{x:.3f}' for x in b)} | "
                  f"{diff:+.3f} | {se2:.3f} | {'yes' if inside else 'no'} | [{lo:.3f}, {hi:.3f}]: {strict} |")
    print()
    print(f"verdict: {'parity holds' if ok else 'parity does not hold'} (seeds {', '.join(map(str, a.seeds))})")
    return 0


if __name__ == "__main__":
    from fairseq_compgen.errors import install_excepthook

    install_excepthook()  # a UsageError (e.g. a queue line naming no sweep file) is one line, not a traceback
    sys.exit(main())
