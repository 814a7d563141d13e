"""Exact match per reference length, over seeds: the length-generalization view of a sweep. Length generalization
is read as accuracy against output length (Csordás, Irie & Schmidhuber 2021, SCAN length; Ontañón et al. 2022's
Reverse and Duplication, whose test inputs are longer than the training ones; Ruoss et al. 2023, Figure 1), not
as one number: two encodings with the same mean can fail at different lengths.

    fairseq-compgen aggregate runs/positions_length --by-length test   # OUT/by_length_test.md, plots/*_by_length_test.png

The counts come from each run's eval/<subset>.json, whose ``per_length`` (scoring/exact_match.py) holds, per
reference length in tokens, the examples and how many were exactly right. Per (dataset, configuration) and length:
the mean over seeds ± the sample standard deviation (n - 1; none for one seed). Runs evaluated before the counts were
recorded have no ``per_length``: where their decoded outputs were kept (eval/<subset>.outputs.gz), the counts are
taken from those, checked against the result's overall count; the others are left out and named (the table says
how many).

(the runs are read by pooling.by_length_groups)
"""
import statistics
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

from fairseq_compgen.data.io import staged_path

# (dataset, configuration) -> seed -> eval JSON's per_length: {"<length>": {"n", "correct", "accuracy"}}
Groups = Dict[Tuple[str, str], Dict[int, dict]]
Label = Callable[[str, str], str]  # (kind: "datasets" | "configurations", name) -> label


def lengths(groups: Groups, dataset: str) -> Dict[int, int]:
    """Reference length -> examples of that length, for `dataset` (the same in every run: aggregate checks that
    pooled runs share their data)."""
    counts: Dict[int, int] = {}
    for (d, _), seeds in groups.items():
        if d == dataset:
            for per_length in seeds.values():
                for length, c in per_length.items():
                    counts[int(length)] = int(c["n"])
    return dict(sorted(counts.items()))


def accuracies(seeds: Dict[int, dict], length: int) -> List[float]:
    """One value per seed whose subset has examples of `length`."""
    return [float(p[str(length)]["accuracy"]) for p in seeds.values() if str(length) in p]


def unit(scale: float) -> str:
    """What a value times `scale` is written in: " (%)" for 100, else nothing."""
    return " (%)" if scale == 100 else ""


def _mean_std(values: Sequence[float], scale: float, digits: int) -> str:
    if not values:
        return ""
    mean = f"{scale * statistics.fmean(values):.{digits}f}"
    return mean if len(values) == 1 else f"{mean} ± {scale * statistics.stdev(values):.{digits}f}"


def table(groups: Groups, subset: str, label: Label, left_out: Sequence[str] = (), scale: float = 1.0,
          digits: int = 3) -> str:
    """Markdown: per dataset, one row per reference length (with its number of examples), one column per
    configuration (its seeds in the header), the values times `scale` (100: percent) to `digits` decimals; then
    the runs left out."""
    out = []
    for dataset in dict.fromkeys(d for d, _ in groups):
        configs = [c for d, c in groups if d == dataset]
        header = ["reference length", "examples"] + [
            f"{label('configurations', c)} (seeds {', '.join(map(str, sorted(groups[dataset, c])))})" for c in configs]
        out += [f"### {label('datasets', dataset)}: {subset}, exact match{unit(scale)} per reference length (tokens), "
                "mean ± std over seeds", "", "| " + " | ".join(header) + " |",
                "|" + "|".join("---" for _ in header) + "|"]
        for length, n in lengths(groups, dataset).items():
            cells = [_mean_std(accuracies(groups[dataset, c], length), scale, digits) for c in configs]
            out.append("| " + " | ".join([str(length), f"{n:,}", *cells]) + " |")
        out.append("")
    if left_out:
        out.append(f"Left out: {len(left_out)} finished run(s) whose eval/{subset}.json has no per_length (evaluated "
                   f"before it was recorded) and whose outputs were not kept: {', '.join(left_out)}.")
        out.append("")
    return "\n".join(out)


def plot(groups: Groups, subset: str, label: Label, folder, scale: float = 1.0) -> List[Path]:
    """One figure per dataset, folder/<dataset>_by_length_<subset>.png: accuracy (times `scale`) against reference
    length, a line per configuration (mean over seeds, ±std band)."""
    from fairseq_compgen.pipelines.plotting import pyplot

    plt = pyplot()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for dataset in dict.fromkeys(d for d, _ in groups):
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for (d, config), seeds in groups.items():
            if d != dataset:
                continue
            pts = [(length, accuracies(seeds, length)) for length in lengths(groups, dataset)]
            pts = [(x, v) for x, v in pts if v]
            mean = [scale * statistics.fmean(v) for _, v in pts]
            std = [scale * statistics.stdev(v) if len(v) > 1 else 0.0 for _, v in pts]
            x = [p[0] for p in pts]
            line, = ax.plot(x, mean, marker=".", label=f"{label('configurations', config)} ({len(seeds)})")
            ax.fill_between(x, [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)],
                            color=line.get_color(), alpha=0.15, linewidth=0)
        ax.set_title(f"{label('datasets', dataset)}: {subset}")
        ax.set_xlabel("reference length (tokens)")
        ax.set_ylabel("exact match" + unit(scale))
        ax.set_ylim(-0.02 * scale, 1.02 * scale)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small", title="configuration (seeds)", title_fontsize="x-small")
        fig.tight_layout()
        path = folder / f"{dataset}_by_length_{subset}.png"
        with staged_path(path) as tmp:  # no half-written plot
            fig.savefig(tmp, dpi=120, format="png")
        plt.close(fig)
        written.append(path)
    return written
