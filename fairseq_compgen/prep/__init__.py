"""`fairseq-compgen prep DATASET ...`: prepare a dataset as fairseq text and binary data (one file per dataset).

    fairseq-compgen prep --help                  the datasets, one line each
    fairseq-compgen prep DATASET --help          one dataset's options
    fairseq-compgen prep scan --split length_cutoff_26 --out data/scan
    python -m fairseq_compgen.cli prep scan --split length_cutoff_26 --out data/scan   # the same

Every dataset is one file (:mod:`fairseq_compgen.data.dataset`): a module assigning ``DATASET = Dataset(...)``
at its top level, found in ``fairseq_compgen/data/`` (``data/scan.py``, ``data/cogs.py``, ``data/slog.py``, ...),
in the ``.py`` files and folders named by ``$FAIRSEQ_COMPGEN_DATASETS`` (``os.pathsep``-separated), or given as
a path (``fairseq-compgen prep ./toy.py --out DIR``). Its name is its file name; it is imported only when asked
for, so listing the datasets imports neither fairseq nor torch (the descriptions are read from the modules'
docstrings without importing them).
"""
from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import os
import re
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Dict, List, Optional, Sequence

from fairseq_compgen.errors import Interrupted, UsageError, check_output_folder

def summary(doc: str) -> str:
    """The first paragraph of a docstring on one line (the description of `fairseq-compgen prep --help` and of each
    dataset's own --help)."""
    return " ".join(doc.strip().split("\n\n")[0].split())


ENV = "FAIRSEQ_COMPGEN_DATASETS"  # more one-file datasets: .py files or folders, os.pathsep-separated
DATA_DIR = Path(__file__).resolve().parents[1] / "data"
_MARKER = re.compile(r"^DATASET\s*[:=]", re.M)


def declares_dataset(path: Path) -> Optional[str]:
    """The docstring of the module at ``path`` if it assigns ``DATASET`` at its top level (a one-file dataset),
    else None; read from the source, not imported."""
    text = path.read_text(encoding="utf-8")
    if not _MARKER.search(text):
        return None
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as e:
        raise UsageError(f"{path}:{e.lineno}: expected Python (a one-file dataset): {e.msg}") from None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "DATASET" for t in targets):
            return ast.get_docstring(tree) or ""
    return None


def _candidates(entry: str) -> List[Path]:
    path = Path(entry)
    if path.is_dir():
        return sorted(p for p in path.glob("*.py") if p.name != "__init__.py")
    if path.is_file() and path.suffix == ".py":
        return [path]
    raise UsageError(f"${ENV}: {entry}: expected a .py file or a folder of them (one-file datasets)")


def one_file_datasets() -> Dict[str, Path]:
    """name -> file of every one-file dataset: ``fairseq_compgen/data/`` first, then ``$FAIRSEQ_COMPGEN_DATASETS``.
    A name taken twice is a UsageError naming both."""
    found: Dict[str, Path] = {}
    entries = [str(DATA_DIR)] + [e for e in os.environ.get(ENV, "").split(os.pathsep) if e]
    for entry in entries:
        for path in _candidates(entry):
            if declares_dataset(path) is None:
                continue
            name = path.stem
            if name in found:
                other = found[name]
                if other.resolve() == path.resolve():
                    continue
                raise UsageError(f"{path}: dataset name {name!r} is already taken by {other}: expected a file name "
                                 f"that no other dataset has")
            found[name] = path
    return found


def names() -> List[str]:
    """Every dataset `fairseq-compgen prep` knows: those of ``fairseq_compgen/data/``, then those of the
    environment variable."""
    return list(one_file_datasets())


def description(name: str) -> str:
    """The summary of the dataset's docstring, read from its source (not imported)."""
    path = one_file_datasets().get(name)
    if path is None:
        raise UsageError(f"fairseq-compgen prep: unknown dataset {name!r} (known: {', '.join(names())})")
    return summary(declares_dataset(path) or "")


class OneFileDataset:
    """A one-file dataset module seen as a prep module: ``main(argv)`` prepares it."""

    def __init__(self, name: str, module: ModuleType):
        from fairseq_compgen.data.dataset import Dataset

        self.name, self.module = name, module
        self.dataset = getattr(module, "DATASET", None)
        if not isinstance(self.dataset, Dataset):
            raise UsageError(f"{module.__file__}: DATASET is a {type(self.dataset).__name__}: expected "
                             f"fairseq_compgen.data.dataset.Dataset(...)")

    def parse_args(self, argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
        from fairseq_compgen.data import dataset

        return dataset.parse_args(self.name, self.module.__doc__ or self.name, self.dataset, argv)

    def main(self, argv: Optional[Sequence[str]] = None) -> Dict[str, dict]:
        from fairseq_compgen.data import dataset

        return dataset.prepare(self.name, self.dataset, self.parse_args(argv))


def load_file(path: Path) -> OneFileDataset:
    """Import the one-file dataset at ``path`` (outside the package) under the name of its file."""
    path = Path(path).resolve()
    if declares_dataset(path) is None:
        raise UsageError(f"{path}: not a dataset: expected a module assigning DATASET = Dataset(...) at its top level")
    modname = f"fairseq_compgen_datasets.{path.stem}"
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[modname]
        raise
    return OneFileDataset(path.stem, mod)


def module(name: str):
    """A dataset (by name, or a path to its ``.py`` file), as an object with ``main(argv)``; an unknown name
    raises UsageError listing the known ones."""
    if name.endswith(".py") and Path(name).is_file():
        return load_file(Path(name))
    path = one_file_datasets().get(name)
    if path is None:
        raise UsageError(f"fairseq-compgen prep: unknown dataset {name!r} (known: {', '.join(names())}; "
                         f"or the path of a one-file dataset's .py)")
    if path.parent == DATA_DIR:
        return OneFileDataset(name, importlib.import_module(f"fairseq_compgen.data.{name}"))
    return load_file(path)


def usage() -> str:
    descriptions = {name: summary(declares_dataset(path) or "") for name, path in one_file_datasets().items()}
    width = max(map(len, descriptions)) + 2
    lines = ["usage: fairseq-compgen prep DATASET [options]   (fairseq-compgen prep DATASET --help: its options;",
             "       fairseq-compgen prep PATH.py [options]: a one-file dataset outside the package)",
             "", "datasets:"]
    for name, text in descriptions.items():
        lines += textwrap.wrap(text, width=110, initial_indent=f"  {name:{width}}",
                               subsequent_indent=" " * (width + 2))
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`fairseq-compgen prep NAME ARGS...`: prepares the dataset NAME (its module's ``DATASET``) with the options
    ARGS; no NAME or --help lists the datasets."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    mod = module(argv[0])
    out = output_folder(argv[1:])
    if out is not None and not any(a in ("-h", "--help") for a in argv[1:]):
        check_output_folder(out, "--out")
    try:
        mod.main(argv[1:])
    except KeyboardInterrupt:
        raise Interrupted(f"fairseq-compgen prep {argv[0]} stopped; a split is written into {out or 'OUT'} only when "
                          f"complete, so it keeps the splits finished before and none half-written; rerun the same "
                          f"command to prepare the rest") from None
    return 0


def output_folder(args: Sequence[str]) -> Optional[str]:
    """The value of the last --out in a dataset's arguments (every dataset's --out is a folder); None if absent."""
    value = None
    for i, a in enumerate(args):
        if a == "--out" and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith("--out="):
            value = a.split("=", 1)[1]
    return value
