"""`fairseq-compgen aggregate --export DIR` (pipelines/aggregate.py): copy what a table's numbers are made of into
the repository's results/, so that the tables can be written again from DIR alone (tests/test_results_trace.py
checks every export under results/).
"""
from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from fairseq_compgen.data.io import atomic_write_text, staged_path
from fairseq_compgen.errors import UsageError, read_json
from fairseq_compgen.pipelines import train_log
from fairseq_compgen.pipelines.pooling import (EXPORTED_LOG, PLAN_OF, POOLED_PLAN, RECORD, finished, plan_files,
                                                run_log)
from fairseq_compgen.pipelines.runner import kept_eval_files

# what --export keeps of a run: its records and results, not its checkpoints
EXPORTED = ("done.json", "settings.json", "command.txt", "launch.txt", "commit.txt", "machine.txt", "command.history",
            "commit.history", "data.json", "data.sha256")


def _metric_line(line: str) -> bool:
    """A validation or epoch-summary line of a train.log (either log format), or the sweep's line that starts an
    invocation (train_log.train_wall adds up the invocations' clocks)."""
    record = train_log.parse_line(line)
    return record is not None and record.kind in ("valid", "train", "start")


def table_files(out: Path) -> List[Path]:
    """The tables that main writes in OUT: table.*, runs.* and the optional views, those that exist."""
    out = Path(out)
    return [p for p in [out / "table.md", out / "table.csv", out / "runs.md", out / "runs.csv",
                        *(p for view in ("categories", "by_length", "early_stopping", "compare", "against")
                          for p in sorted(out.glob(f"{view}_*.md")))] if p.is_file()]


def _copy(src: Path, dst: Path) -> None:
    """shutil.copy2 to a temporary name, then renamed to `dst` (no half-written copy); nothing where `dst` is `src`
    (an export into a folder it reads, or into --tables)."""
    if Path(src).resolve() != Path(dst).resolve():
        with staged_path(dst, hidden=True) as tmp:
            shutil.copy2(src, tmp)


def check_destination(dest) -> None:
    """Before anything is written: an export goes into a new or empty folder or into an earlier export (which holds
    RECORD). Any other folder is refused, since an export replaces files by name and removes its earlier tables."""
    dest = Path(dest)
    if dest.is_dir() and not (dest / RECORD).is_file() and any(dest.iterdir()):
        raise UsageError(f"--export {dest}: the folder holds files but no {RECORD}, so it is no earlier export: "
                         f"expected a new or empty folder, or an export to write again")


def _earlier_export(dest: Path) -> Tuple[Optional[set], set]:
    """What the export recorded in DEST wrote: (the files, names in DEST, or None where its record predates that
    list: then every table and pooled plan in DEST counts as the export's, as before; the run folders,
    "<dataset>/<config>/seed<k>", its "plans"). Nothing for a DEST without a record."""
    if not (dest / RECORD).is_file():
        return set(), set()
    record = read_json(dest / RECORD, "an export's record (JSON with options, runs, plans)")
    record = record if isinstance(record, dict) else {}
    files, plans = record.get("files"), record.get("plans")
    return (set(files) if isinstance(files, list) else None), (set(plans) if isinstance(plans, dict) else set())


def _clear_run(folder: Path) -> None:
    """Remove from an exported run's FOLDER what an export copies into it (EXPORTED, EXPORTED_LOG, the EVAL_KEPT
    files of eval/), then the folders left empty up to DEST's dataset level; a file the user put there stays."""
    for p in [*kept_eval_files(folder), *(folder / name for name in (*EXPORTED, EXPORTED_LOG))]:
        if p.is_file():
            p.unlink()
    for d in (folder / "eval", folder, folder.parent, folder.parent.parent):
        if d.is_dir() and not any(d.iterdir()):
            d.rmdir()


REPOSITORY = Path(__file__).resolve().parents[2]  # the checkout holding fairseq_compgen/ (where --spec paths start)


def from_repository(path) -> str:
    """`path` relative to the checkout's root where it lies inside it, else absolute: how aggregate.json names a
    file, so that its command works from the root."""
    full = Path(path).resolve()
    return str(full.relative_to(REPOSITORY)) if full.is_relative_to(REPOSITORY) else str(full)


def export(runs: List[dict], outs: Sequence[Path], dest: Path, plots: Optional[Dict[Path, Path]] = None,
           options: Sequence[str] = (), tables: Sequence[Path] = ()) -> int:
    """Copy every finished run's evaluation JSONs and outputs (runner.EVAL_KEPT), records (EXPORTED) and the
    metric lines of its train.log (fairseq's validation and epoch summary lines, EXPORTED_LOG) to
    DEST/<dataset>/<config>/seed<k>/, so that the tables can be recomputed from the repository; also the first
    folder's sweep.json and the tables this call wrote (`tables`: table.md, table.csv, runs.*, and the optional
    views; a view an earlier call recorded writing in DEST is removed), the plots of this call (`plots`: written path -> its path under DEST/plots/, with what a t5-biases
    plot prints beside it), every other plan that was pooled (plan_files: another folder's sweep.json, or one that
    an exported folder carried) as sweep.<i>.<name>.json (the earlier call's are removed), and
    DEST/aggregate.json (RECORD): the options that shaped the tables (`options`), the plan each run is of ("plans")
    and the files this call wrote in DEST ("files": what the next export there may remove), so
    that `fairseq-compgen aggregate DEST --no-plots OPTIONS` writes the same tables from DEST's runs and plans (a
    --spec file aside). Returns the number of runs."""
    # ours to remove (a file the user put into DEST stays); the earlier export's runs: each is cleared before this
    # export writes it, or removed if this one does not (a seed no longer finished, an eval/ subset no longer
    # evaluated would otherwise stay and mix into the tables)
    earlier, earlier_runs = _earlier_export(dest)
    sources = {Path(r["dir"]).resolve() for r in runs}
    n = 0
    for r in runs:
        src = Path(r["dir"])
        if not finished(r):
            continue
        key = f"{r['dataset']}/{r['config']}/seed{r['seed']}"
        to = dest / key
        if key in earlier_runs and to.resolve() != src.resolve():  # an export exported again into itself: kept
            _clear_run(to)
        earlier_runs.discard(key)
        (to / "eval").mkdir(parents=True, exist_ok=True)
        for p in kept_eval_files(src):  # results and the outputs they were scored from
            _copy(p, to / "eval" / p.name)
        for name in EXPORTED:
            if (src / name).is_file():
                _copy(src / name, to / name)
        log = run_log(src)  # train.log, or of a run in an export (an export exported again) its metric lines
        if log.is_file():
            lines = [line for line in log.read_text(errors="replace").splitlines(keepends=True) if _metric_line(line)]
            atomic_write_text(to / EXPORTED_LOG, "".join(lines))
        n += 1
    for key in sorted(earlier_runs):  # runs of the earlier export that this one does not hold
        if (dest / key).is_dir() and (dest / key).resolve() not in sources:
            _clear_run(dest / key)
    written = {Path(t).name for t in tables}
    for path in table_files(dest):  # a view of an earlier call, which this call's options would not write again
        if path.name not in written and (earlier is None or path.name in earlier):
            path.unlink()
    for path in [outs[0] / "sweep.json", *map(Path, tables)]:
        _copy(path, dest / path.name)
    for src, rel in (plots or {}).items():
        for path in (src, src.with_suffix(".txt")):
            if path.is_file():
                (dest / "plots" / rel).parent.mkdir(parents=True, exist_ok=True)
                _copy(path, dest / "plots" / rel.with_suffix(path.suffix))
    sources = [(str(o), name) for o in outs for name in plan_files(o)]
    names = {sources[0]: "sweep.json"}  # each plan read -> its name in DEST
    for i, (o, name) in enumerate(sources[1:], 2):
        m = POOLED_PLAN.fullmatch(name)
        names[o, name] = f"sweep.{i}.{m.group(2) if m else Path(o).resolve().name}.json"
        shutil.copy2(Path(o) / name, dest / (names[o, name] + ".tmp"))  # all read before any is replaced: DEST
    for name in plan_files(dest)[1:]:                                     # may be one of `outs`
        if earlier is None or name in earlier:
            (dest / name).unlink()
    for source in sources[1:]:
        (dest / (names[source] + ".tmp")).replace(dest / names[source])
    plans = {f"{r['dataset']}/{r['config']}/seed{r['seed']}": names[r[PLAN_OF]] for r in runs if finished(r)}
    command = ["fairseq-compgen", "aggregate", from_repository(dest), "--no-plots", *options]
    files = sorted({"sweep.json", RECORD, *written, *names.values()})
    atomic_write_text(dest / RECORD, json.dumps({
        "options": list(options), "runs": n, "plans": plans, "files": files,
        "tables": f"{shlex.join(command)} --tables DIR, run from the repository's root, writes to DIR the same "
                  f"table.*, runs.* and optional views"}, indent=1) + "\n")
    return n
