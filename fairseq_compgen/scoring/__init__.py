"""The scorers of fairseq-generate output and their one registry.

Each scorer is one file of this folder that calls :func:`register` at import time with a :class:`Scorer`: its
name (``fairseq-compgen score NAME``, ``fairseq-compgen eval --metric NAME``, a sweep's ``metric:``, a dataset's
``Dataset(metric=...)``), the key of its value in the result JSON (which `fairseq-compgen aggregate` tabulates),
its paper, and how `fairseq-compgen eval` calls it on a subset. :func:`names` imports every module of this folder
(and nothing else: no fairseq, no torch), so adding a scorer is adding its file here.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from fairseq_compgen.data.io import read_text_lines
from fairseq_compgen.errors import UsageError

GENERATE_OUTPUT = "fairseq-generate output (S-/T-/H- lines)"


def read_generate_output(arg: str) -> Tuple[list, str]:
    """(lines, name for messages) of a scorer's GENERATE_LOG argument: a file, read decompressed if it is gzip (a
    run's eval/SUBSET.outputs.gz), or "-" for standard input (the same)."""
    if arg != "-" and not Path(arg).is_file():
        raise FileNotFoundError(f"fairseq-generate output not found: {arg}")
    return read_text_lines(arg, GENERATE_OUTPUT), ("<stdin>" if arg == "-" else str(arg))


def _needs_nothing(data: Path, subset: str) -> None:
    return None


@dataclass(frozen=True)
class Scorer:
    """name: the metric's name; key: the key of its value in the result dict `main` returns (and SUBSET.json);
    label: what `fairseq-compgen eval` prints before the value (a result's own "label" wins); paper: where the
    metric is defined; help: one line for `fairseq-compgen score --help`; main: the scorer's command line
    (argv -> result dict; prints its table); eval_argv: (generate output, DATA, subset, examples) -> the argv
    `fairseq-compgen eval` passes to main; check: (DATA, subset) -> None, raising a one-line UsageError when DATA
    lacks what the scorer reads (checked before anything is decoded); logged_as: the names of the metric in
    fairseq-train's validation records (aggregate's learning curves)."""
    name: str
    key: str
    label: str
    paper: str
    help: str
    main: Callable[[Sequence[str]], dict]
    eval_argv: Callable[[Path, Path, str, int], List[str]]
    check: Callable[[Path, str], None] = _needs_nothing
    logged_as: Tuple[str, ...] = field(default=())

    def __post_init__(self):
        if not self.logged_as:
            object.__setattr__(self, "logged_as", (self.key,))


_REGISTRY: Dict[str, Scorer] = {}


def _source(scorer: Scorer) -> Optional[str]:
    code = getattr(scorer.main, "__code__", None)
    return code.co_filename if code is not None else None


def register(scorer: Scorer) -> Scorer:
    """Adds `scorer` under its name; UsageError if another file already registered that name. (The same file
    registering again is allowed: `python -m fairseq_compgen.scoring.X` imports X twice, as __main__ and by name.)"""
    old = _REGISTRY.get(scorer.name)
    if old is not None and old is not scorer and _source(old) != _source(scorer):
        raise UsageError(f"scorer {scorer.name!r} registered twice: by {_source(old)} and by {_source(scorer)}; "
                         f"expected one file per scorer name")
    _REGISTRY[scorer.name] = scorer
    return scorer


def _discover() -> None:
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")


def names() -> Tuple[str, ...]:
    """Every registered scorer's name, exact_match (the default) first."""
    _discover()
    return tuple(sorted(_REGISTRY, key=lambda n: (n != "exact_match", n)))


def get(name: str, where: str = "metric") -> Scorer:
    """The scorer called `name`; UsageError naming `where` (a file, a flag) and the known names otherwise."""
    known = names()
    if not isinstance(name, str) or name not in _REGISTRY:
        raise UsageError(f"{where}: metric {name!r} is not one of {', '.join(known)} (the scorers of "
                         f"fairseq_compgen/scoring/)")
    return _REGISTRY[name]


def by_key(key: str) -> Optional[Scorer]:
    """The scorer whose result value is under `key` (e.g. "accuracy" -> exact_match), or None; where several share
    a key (cfq_sparql's is "accuracy" too), the first in names()' order: exact_match first."""
    return next((_REGISTRY[n] for n in names() if _REGISTRY[n].key == key), None)
