"""A dataset in one file: what a module declares so that `fairseq-compgen prep NAME` prepares it.

A module becomes a dataset by assigning ``DATASET = Dataset(...)`` at its top level; its file name is the
dataset's name and the first paragraph of its docstring its one-line description in `fairseq-compgen prep
--help` (read from the source, so listing imports nothing).  It is found in ``fairseq_compgen/data/``, in the
files and folders of ``$FAIRSEQ_COMPGEN_DATASETS`` (``os.pathsep``-separated), or given as a path
(`fairseq-compgen prep ./toy.py --out DIR`).  A minimal one::

    \"\"\"Toy: copy a word list.\"\"\"
    from fairseq_compgen.data.dataset import Dataset

    def read(args):   # subset -> (source, target[, category]) examples
        return {"train": [("a b", "A B", "x")] * 8, "valid": [("b a", "B A", "y")], "gen": [("a", "A", "x")]}

    DATASET = Dataset(read=read, expected={"train": 8, "valid": 1, "gen": 1}, categories={"gen": 1},
                      folder=lambda args: "default")

Then, as for any dataset (``default``: the output subfolder ``folder=`` names)::

    fairseq-compgen prep ./toy.py --out data/toy
    fairseq-compgen train --recipe csordas/cogs --cpu compgen_transformer data/toy/default/bin runs/toy
    fairseq-compgen eval runs/toy/checkpoint_last.pt data/toy/default/bin gen --cpu   # per category: gen.cat

The shared machinery does the rest (:func:`prepare`): ``--out`` and the options every prep has
(:func:`~fairseq_compgen.data.binarize.add_common_args`: --joined-dictionary, --dict-from, --no-binarize,
--workers, --no-count-check), the text and binaries written staged (:func:`~fairseq_compgen.data.binarize.prepare_split`),
the declared counts and numbers of categories checked, ``<subset>.cat`` (one category per example, for
`fairseq-compgen eval`'s per-category exact match) and ``dataset.json`` (name, metric) beside the binaries.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from fairseq_compgen import scoring
from fairseq_compgen.errors import UsageError

Example = Tuple[str, ...]  # (source, target) or (source, target, category)
Counts = Mapping[str, int]


class Examples(list):
    """The examples of one subset and the file they were read from (named when the count differs)."""

    def __init__(self, items=(), source: Optional[str] = None):
        super().__init__(items)
        self.source = source


@dataclass
class Split:
    """One output folder of a run, as ``read`` returns it when a bare subset -> examples mapping is not enough:
    a run that writes several folders (SCAN's ``--split all-generated``, one folder per CFQ split, per
    Mathematics module, per algorithmic task) returns an iterable of them, each naming its ``folder``.

    subsets: subset -> examples, as ``read`` returns them for one folder (iterables are consumed once).
    folder: the subfolder of ``--out`` (default: ``Dataset.folder``, else ``--out`` itself).
    title: the heading of the printed summary (default: the dataset's name and the folder).
    expected: this folder's declared counts (default: ``Dataset.expected``).
    files: name -> one line per example of a subset, written beside the text and copied into ``bin/``
        (e.g. the COMP metadata ``test.comp`` of the noun-adjective data).
    side_files: name -> text or bytes written into the folder only (BPE codes, a sentencepiece model).
    check: a further check of the counts (subset -> examples) before anything is binarized.
    metric: this folder's metric where it is not the dataset's, written into ``dataset.json`` even for a dataset
        that writes none (CFQ-im targets are scored on the SPARQL they stand for: ``cfq_sparql``).
    """

    subsets: Mapping[str, Iterable[Example]]
    folder: Optional[str] = None
    title: str = ""
    expected: Optional[Counts] = None
    files: Mapping[str, Iterable[str]] = field(default_factory=dict)
    side_files: Mapping[str, Union[str, bytes]] = field(default_factory=dict)
    check: Optional[Callable[[Dict[str, int]], None]] = None
    metric: Optional[str] = None


@dataclass(frozen=True)
class Dataset:
    """What one dataset module declares (every callable takes the parsed options).

    read: subset (train, valid, test, gen, ...) -> its examples, (source, target) or (source, target, category),
        space-separated tokens; train is required (fairseq builds the dictionaries from it). Return them as
        :class:`Examples` (a list with ``source``, the file) to have a count mismatch name the file; return a
        :class:`Split` for files beside the text, or an iterable of Splits for several output folders.
    add_arguments: adds the dataset's own options to its parser (e.g. a local copy's folder); ``--out`` and
        the common options are added by the machinery.
    expected: the declared (published) counts, subset -> examples, or a function of the options giving them;
        a subset left out is not checked.
    categories: subset -> declared number of distinct categories; those subsets get ``<subset>.cat``.
    metric: the metric `fairseq-compgen eval` uses on this data (written into ``dataset.json``).
    folder: the output subfolder of ``--out`` (a function of the options; default: ``--out`` itself).
    urls: where the files come from for real users (shown in --help); downloading is the module's ``read``
        (with :func:`fairseq_compgen.data.download.fetch`).
    dict_from, joined: the defaults of --dict-from and of the dictionary layout.
    count_check: whether the dataset has --no-count-check (False: its counts are only printed).
    dataset_json: write ``dataset.json`` (False for the datasets whose outputs predate it, which stay as they were).
    parsed: checks or completes the parsed options, ``parsed(parser, args)`` (``parser.error`` on a bad value).
    run: the whole prep instead of ``read``, for a dataset whose outputs are not text pairs and fairseq binaries
        (COGS as tags, a held-out split inside a SCAN folder); with ``shared_options=False`` its parser has only
        the options ``add_arguments`` adds (no ``--out``, no common options).
    """

    read: Optional[Callable[[argparse.Namespace], object]] = None
    add_arguments: Optional[Callable[[argparse.ArgumentParser], None]] = None
    expected: Union[Counts, Callable[[argparse.Namespace], Counts]] = field(default_factory=dict)
    categories: Mapping[str, int] = field(default_factory=dict)
    metric: str = "exact_match"
    folder: Optional[Callable[[argparse.Namespace], str]] = None
    urls: Sequence[str] = ()
    dict_from: str = "all"
    joined: bool = False
    count_check: bool = True
    dataset_json: bool = True
    parsed: Optional[Callable[[argparse.ArgumentParser, argparse.Namespace], None]] = None
    run: Optional[Callable[[argparse.Namespace], object]] = None
    shared_options: bool = True

    def __post_init__(self):
        if not callable(self.read) and not callable(self.run):
            raise UsageError("Dataset(read=...): expected a function of the parsed options returning subset -> examples")
        scoring.get(self.metric, "Dataset(metric=...)")
        if self.dict_from not in ("train", "all"):
            raise UsageError(f"Dataset(dict_from={self.dict_from!r}): expected 'train' or 'all'")


def parser(name: str, doc: str, dataset: Dataset) -> argparse.ArgumentParser:
    """`fairseq-compgen prep NAME`'s parser: ``--out``, the dataset's options, the common options."""
    from fairseq_compgen.data.binarize import add_common_args

    # --help shows the module docstring's first paragraph as written
    p = argparse.ArgumentParser(prog=f"fairseq-compgen prep {name}", description=doc.strip().split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    if dataset.urls:
        p.epilog = "downloaded (without a local copy) from:\n  " + "\n  ".join(dataset.urls)
    if dataset.shared_options:
        p.add_argument("--out", required=True, type=Path, help="output folder")
    if dataset.add_arguments is not None:
        dataset.add_arguments(p)
    if dataset.shared_options:
        add_common_args(p, count_check=dataset.count_check, dict_from=dataset.dict_from, joined=dataset.joined)
    return p


def parse_args(name: str, doc: str, dataset: Dataset, argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The options of `fairseq-compgen prep NAME ARGV`, checked and completed by ``dataset.parsed``."""
    p = parser(name, doc, dataset)
    args = p.parse_args(argv)
    if dataset.parsed is not None:
        dataset.parsed(p, args)
    return args


def _split(subset: str, examples: Sequence[Example], name: str) -> Tuple[List[Tuple[str, str]], Optional[List[str]]]:
    pairs, cats = [], []
    for i, ex in enumerate(examples, start=1):
        if not isinstance(ex, (tuple, list)) or len(ex) not in (2, 3):
            raise UsageError(f"{name} {subset} example {i}: expected (source, target) or (source, target, category), "
                             f"got {ex!r:.80}")
        pairs.append((ex[0], ex[1]))
        cats.append(ex[2] if len(ex) == 3 else None)
    if all(c is None for c in cats):
        return pairs, None
    missing = next((i for i, c in enumerate(cats, start=1) if not c), None)
    if missing is not None:
        raise UsageError(f"{name} {subset} example {missing}: no category, but other examples of {subset} have one")
    return pairs, cats


def category_checker(name: str, declared: Mapping[str, int], cats: Mapping[str, List[str]], strict: bool):
    """A check for prepare_split: each subset of ``declared`` has that many distinct categories."""
    from fairseq_compgen.data.binarize import CountMismatch

    def check(counts) -> None:
        bad = [f"{s}: {len(set(cats[s]))} categories, expected {n}" for s, n in declared.items()
               if len(set(cats[s])) != n]
        if bad:
            msg = f"{name}: " + "; ".join(bad)
            if strict:
                raise CountMismatch(msg + " (not the official release? --no-count-check accepts it)")
            print(f"warning: {msg}", file=sys.stderr)

    return check


def prepare(name: str, dataset: Dataset, args: argparse.Namespace):
    """Read, check and write one dataset (its parsed options ``args``): prepare_split's summary, or folder ->
    summary when ``read`` returned several :class:`Split` (``run``'s result for a dataset that declares ``run``)."""
    if dataset.run is not None:
        return dataset.run(args)
    data = dataset.read(args)
    if isinstance(data, (Split, Mapping)):
        return prepare_folder(name, dataset, args, data if isinstance(data, Split) else Split(data))
    out = {}
    for split in data:
        if not isinstance(split, Split) or split.folder is None:
            raise UsageError(f"{name}: read() returned {type(split).__name__}: expected subset -> examples, a Split, "
                             f"or Splits naming their folder")
        out[split.folder] = prepare_folder(name, dataset, args, split)
    return out


def prepare_folder(name: str, dataset: Dataset, args: argparse.Namespace, split: Split) -> Dict[str, dict]:
    """Check and write one output folder; returns prepare_split's summary."""
    from fairseq_compgen.data.binarize import common_options, prepare_split

    data = split.subsets
    if "train" not in data:
        raise UsageError(f"{name}: read() returned no train subset (fairseq builds the dictionaries from it)")
    pairs: Dict[str, List[Tuple[str, str]]] = {}
    cats: Dict[str, List[str]] = {}
    for subset, examples in data.items():
        pairs[subset], c = _split(subset, examples, name)
        if subset in dataset.categories:
            if c is None:
                raise UsageError(f"{name}: {subset} declares categories but its examples have none")
            cats[subset] = c
    unknown = sorted(set(dataset.categories) - set(data))
    if unknown:
        raise UsageError(f"{name}: categories declared for {', '.join(unknown)}, which read() did not return")
    if split.expected is not None:
        expected = dict(split.expected)
    else:
        expected = dataset.expected(args) if callable(dataset.expected) else dict(dataset.expected)
    extra = {f"{s}.cat": c for s, c in cats.items()}
    extra.update(split.files)
    if dataset.dataset_json or split.metric:
        metric = scoring.get(split.metric, f"{name}: Split(metric=...)").name if split.metric else dataset.metric
        extra["dataset.json"] = [json.dumps({"dataset": name, "metric": metric,
                                             "categories": {s: f"{s}.cat" for s in cats}}, sort_keys=True)]
    folder = split.folder if split.folder is not None else dataset.folder(args) if dataset.folder else ""
    sources = {s: ex.source for s, ex in data.items() if getattr(ex, "source", None)}
    strict = not getattr(args, "no_count_check", False)
    checks = [category_checker(name, dataset.categories, cats, strict)] if cats else []
    checks += [split.check] if split.check is not None else []
    summary = prepare_split(
        split.title or f"{name} {folder}".strip(), Path(args.out) / folder, pairs, expected=expected,
        extra_files=extra, sources=sources, side_files=split.side_files or None,
        extra_check=(lambda counts: [check(counts) for check in checks]) if checks else None,
        writer=f"prep {name}", **common_options(args),
    )
    for subset, c in cats.items():
        print(f"{subset} categories: {len(set(c))} ({subset}.cat)")
    return summary


def declared_metric(data: Path) -> Optional[str]:
    """The metric ``DATA/dataset.json`` declares (a one-file dataset's binaries), or None."""
    path = Path(data) / "dataset.json"
    if not path.is_file():
        return None
    try:
        metric = json.loads(path.read_text(encoding="utf-8"))["metric"]
    except (ValueError, KeyError, TypeError):
        raise UsageError(f"{path}: expected the JSON object a prep wrote ({{\"metric\": ...}})") from None
    scoring.get(metric, str(path))
    return metric
