"""Learning curves of a sweep's runs, for `fairseq-compgen aggregate` (pipelines/aggregate.py): the in-loop
validation values of fairseq's train.log (pipelines/train_log.py), plotted per dataset as the mean over seeds with
a ±std band; early stopping read from them (the value of every subset where one subset's was best, as fairseq's
checkpoint_best.pt); and the learned T5 biases of the runs that have them (pipelines/t5_biases.py).
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from fairseq_compgen import scoring
from fairseq_compgen.data.io import atomic_write_text, staged_path
from fairseq_compgen.errors import UsageError
from fairseq_compgen.pipelines import by_length, train_log
from fairseq_compgen.pipelines.pooling import finished, run_log, subset_order
from fairseq_compgen.pipelines.tables import label


def learning_curves(log: Path, metric: str = "accuracy", logged: Optional[set] = None) -> Dict[str, Dict[int, float]]:
    """subset -> {num_updates: value of `metric`} from the validation records of a fairseq train.log, simple or
    JSON format (a later record for the same update wins, e.g. after a resume). `logged`, if given, receives the
    names of every validated metric."""
    scorer = scoring.by_key(metric)  # its names in the validation records (cogs_tagging logs `exact_match`)
    names = scorer.logged_as if scorer else (metric,)
    curves: Dict[str, Dict[int, float]] = defaultdict(dict)
    for subset, step, stats in train_log.validation_records(log):
        if logged is not None:
            logged.update(stats)
        value = next((stats[k] for k in names if k in stats), None)
        if value is not None:
            curves[subset][step] = value
    return dict(curves)


def at_best(curves: Dict[str, Dict[int, float]], select: str) -> Optional[Tuple[int, Dict[str, float]]]:
    """Early stopping from a run's learning curves: (update, {subset: value at that update}) at the best `select`
    value, a tie going to the later update as fairseq's checkpoint_best.pt does (it is rewritten when
    `--maximize-best-checkpoint-metric` sees a value >= the best so far); None without `select` values."""
    steps = sorted(curves.get(select, {}))
    if not steps:
        return None
    best = max(steps, key=lambda u: (curves[select][u], u))
    return best, {subset: c[best] for subset, c in curves.items() if best in c}


def early_stopping_table(spec: dict, runs: List[dict], select: str, metric: str, scale: float = 1.0,
                         digits: int = 2) -> str:
    """Per finished run: the in-loop validation values of every subset at the update where `select` was best
    (at_best), e.g. Russin et al.'s test accuracy at the best validation accuracy."""
    rows = []
    for r in runs:
        if not finished(r):
            continue
        found = at_best(learning_curves(run_log(r["dir"]), metric), select)
        if found:
            rows.append((r, *found))
    if not rows:
        raise UsageError(f"no finished run logged a validation {metric!r} on {select!r} (--early-stopping {select})")
    subsets = subset_order(list(dict.fromkeys(s for _, _, values in rows for s in values)))
    header = ["dataset", "configuration", "seed", f"update (best {select})"] + subsets
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r, step, values in rows:
        cells = [f"{scale * values[s]:.{digits}f}" if s in values else "" for s in subsets]
        lines.append("| " + " | ".join([label(spec, "datasets", r["dataset"]), label(spec, "configurations", r["config"]),
                                        str(r["seed"]), f"{step:,}", *cells]) + " |")
    return "\n".join(lines) + "\n"


def plot_curves(spec: dict, runs: List[dict], folder, scale: float = 1.0, metric: str = "accuracy") -> List[Path]:
    from fairseq_compgen.pipelines.plotting import pyplot

    plt = pyplot()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written, without, logged = [], [], set()
    for dataset in dict.fromkeys(r["dataset"] for r in runs):
        # config -> subset -> update -> [value per seed]
        data: Dict[str, Dict[str, Dict[int, List[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
        for r in runs:  # finished runs only, as in the tables: a run under way would be averaged in up to its update
            if r["dataset"] == dataset and finished(r):
                for subset, curve in learning_curves(run_log(r["dir"]), metric, logged).items():
                    for step, value in curve.items():
                        data[r["config"]][subset][step].append(value * scale)
        subsets = subset_order({s for c in data.values() for s in c})
        if not subsets:
            without.append(dataset)
            continue
        fig, axes = plt.subplots(1, len(subsets), figsize=(4.5 * len(subsets), 3.5), squeeze=False)
        for ax, subset in zip(axes[0], subsets):
            for config, per_subset in data.items():
                pts = sorted(per_subset.get(subset, {}).items())
                if not pts:
                    continue
                x = [p[0] for p in pts]
                mean = [statistics.fmean(v) for _, v in pts]
                std = [statistics.stdev(v) if len(v) > 1 else 0.0 for _, v in pts]
                line, = ax.plot(x, mean, label=label(spec, "configurations", config), marker="." if len(x) < 30 else None)
                ax.fill_between(x, [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)],
                                color=line.get_color(), alpha=0.2, linewidth=0)
            ax.set_title(textwrap.fill(f"{label(spec, 'datasets', dataset)}: {subset}", 36))  # inside its panel
            ax.set_xlabel("updates")
            ax.set_ylabel(metric + by_length.unit(scale))
            ax.grid(alpha=0.3)
        axes[0][-1].legend(fontsize="small")
        fig.tight_layout()
        path = folder / f"{dataset}.png"
        with staged_path(path) as tmp:  # no half-written plot
            fig.savefig(tmp, dpi=120, format="png")
        plt.close(fig)
        written.append(path)
    if without:
        print(f"aggregate: no learning-curve plot for {', '.join(without)}: no validation {metric!r} in the runs' "
              f"train.log (validations there log: {', '.join(sorted(logged)) or 'nothing'})", file=sys.stderr)
    return written


def plot_t5_biases(runs: List[dict], folder) -> List[Path]:
    folder = Path(folder)
    written = []
    for r in runs:
        ckpt = Path(r["dir"]) / "checkpoint_last.pt"
        if "t5" not in r["arch"] and "--self-attn-pos" not in r.get("flags", []) or not finished(r):
            continue
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{r['dataset']}_{r['config']}_seed{r['seed']}.png"
        # its own process: torch stays out of this one
        p = subprocess.run([sys.executable, "-m", "fairseq_compgen.pipelines.t5_biases", str(ckpt), "-o", str(path)],
                           capture_output=True, text=True)
        if p.returncode == 0:  # beside the plot, its printed summary: each layer's gate and heads' preferences
            atomic_write_text(path.with_suffix(".txt"), "\n".join(line for line in p.stdout.splitlines()
                                                                  if not line.startswith("wrote ")) + "\n")
            written.append(path)
        else:
            print(f"aggregate: no T5 bias plot for {r['dir']}: {p.stderr.strip()[-300:]}", file=sys.stderr)
    return written
