"""The 5-seed budget of the Chaabouni step, from the committed curve runs, by the rule campaign/chaabouni_jump_curve.yaml
fixed before the curve existed:

    python campaign/budget_rule.py results/campaign/chaabouni_jump_curve/jump --seed 1

    "the 5-seed budget is the smallest multiple of 10 epochs from which both models' training loss stays within
    10 % of its value at 250 epochs (training data only; the test curve is reported, never used to choose). If
    that is 250 epochs, the 5-seed runs use the paper's whole budget."

Read as: for each configuration folder under DATASET_FOLDER (every one, or --configs), L(e) is the training loss of
fairseq's end-of-epoch summary of epoch e in seedK/train.log (the last summary of an epoch where a resumed run
logged it twice); the configuration's budget is the smallest multiple of --every epochs E such that
|L(e) - L(final)| <= --tolerance * L(final) for every logged epoch e >= E; the step's budget is the largest over
the configurations ("both models"). The test accuracy logged every 10 epochs is printed beside, never used.

Prints the losses at each multiple of --every epochs, each configuration's budget and the step's; exit status 0,
2 when a run is missing or has not reached --final epochs (the rule needs the whole curve).
"""
import argparse
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fairseq_compgen.pipelines.train_log import read_records  # noqa: E402


def epoch_losses(log: Path) -> Dict[int, float]:
    """{epoch: training loss of its end-of-epoch summary}; a later summary of the same epoch (a resume) wins."""
    return {r.epoch: r.stats["loss"] for r in read_records(log)
            if r.kind == "train" and r.epoch is not None and "loss" in r.stats}


def epoch_accuracy(log: Path, subset: str) -> Dict[int, float]:
    """{epoch: the subset's validation accuracy} (reported only)."""
    return {r.epoch: r.stats["accuracy"] for r in read_records(log)
            if r.kind == "valid" and r.subset == subset and r.epoch is not None and "accuracy" in r.stats}


def budget(losses: Dict[int, float], final: int, every: int, tolerance: float) -> int:
    """The smallest multiple of `every` from which every logged epoch's loss is within `tolerance` (relative) of the
    loss at epoch `final`."""
    if final not in losses:
        raise ValueError(f"no training summary of epoch {final}")
    ref = losses[final]
    # `final` itself, a multiple of `every` (main checks it), always qualifies: next() finds one
    return next(start for start in range(every, final + 1, every)
                if all(abs(loss - ref) <= tolerance * ref for e, loss in losses.items() if start <= e <= final))


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("folder", type=Path, help="the dataset's folder of the curve runs (CONFIG/seedK/train.log)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--configs", nargs="+", help="configuration folders (default: every one)")
    p.add_argument("--final", type=int, default=250, help="the whole budget in epochs (default 250)")
    p.add_argument("--every", type=int, default=10, help="candidate budgets: multiples of this (default 10)")
    p.add_argument("--tolerance", type=float, default=0.10, help="relative (default 0.10)")
    p.add_argument("--subset", default="test", help="validation subset printed beside, never used (default test)")
    a = p.parse_args(argv)
    for flag, value in (("--every", a.every), ("--final", a.final)):
        if value <= 0:
            p.error(f"{flag} {value}: expected a positive number of epochs")
    if not a.tolerance >= 0:  # nan too
        p.error(f"--tolerance {a.tolerance}: expected a relative tolerance >= 0")
    if a.final % a.every:
        p.error(f"--final {a.final} is not a multiple of --every {a.every}")
    if not a.folder.is_dir():
        print(f"budget_rule: {a.folder}: no such folder", file=sys.stderr)
        return 2
    configs: List[str] = a.configs or sorted(d.name for d in a.folder.iterdir() if d.is_dir())
    if not configs:
        print(f"budget_rule: no configuration folders under {a.folder}", file=sys.stderr)
        return 2
    budgets = {}
    for c in configs:
        log = a.folder / c / f"seed{a.seed}" / "train.log"
        losses = epoch_losses(log)
        if a.final not in losses:
            last = max(losses) if losses else None
            print(f"budget_rule: {log}: the curve is not finished (last epoch summary: {last}; the rule needs "
                  f"epoch {a.final})", file=sys.stderr)
            return 2
        acc = epoch_accuracy(log, a.subset)
        budgets[c] = budget(losses, a.final, a.every, a.tolerance)
        ref = losses[a.final]
        print(f"{c} (seed {a.seed}): training loss at epoch {a.final} {ref:g}; within ±{a.tolerance:.0%}: "
              f"[{ref * (1 - a.tolerance):g}, {ref * (1 + a.tolerance):g}]")
        print(f"  {'epoch':>5} {'train loss':>10} {a.subset + ' accuracy':>14}")
        for e in range(a.every, a.final + 1, a.every):
            loss = losses.get(e)
            print(f"  {e:>5} {'-' if loss is None else f'{loss:g}':>10} "
                  f"{'-' if e not in acc else f'{acc[e]:.4f}':>14}{'  <- from here' if e == budgets[c] else ''}")
        print(f"  budget: {budgets[c]} epochs")
    step = max(budgets.values())
    print(f"the step's budget (largest of {', '.join(f'{c} {b}' for c, b in budgets.items())}): {step} epochs"
          + (" (the paper's whole budget)" if step == a.final else ""))
    return 0


if __name__ == "__main__":
    from fairseq_compgen.errors import install_excepthook

    install_excepthook()  # a UsageError (e.g. a queue line naming no sweep file) is one line, not a traceback
    sys.exit(main())
