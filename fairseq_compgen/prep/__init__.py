"""`fairseq-compgen prep DATASET ...`: prepare a dataset as fairseq text and binary data (one module per dataset).

    fairseq-compgen prep --help                  the datasets, one line each
    fairseq-compgen prep DATASET --help          one dataset's options
    fairseq-compgen prep scan --split length_cutoff_26 --out data/scan
    python -m fairseq_compgen.prep.scan --split length_cutoff_26 --out data/scan   # the same, without compgen

Each module ``fairseq_compgen.prep.<dataset>`` has ``main(argv)``; it is imported only when its dataset is
asked for, so listing the datasets imports neither fairseq nor torch (the descriptions are read from the
modules' docstrings without importing them).
"""
from __future__ import annotations

import argparse
import ast
import importlib
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Optional, Sequence

from fairseq_compgen.errors import Interrupted, UsageError, check_output_folder

# the order of `fairseq-compgen prep --help`
DATASETS = ("scan", "cogs", "cogs_tagging", "cfq", "pcfg", "mathematics", "algorithmic", "noun_adj", "iwslt14",
            "flores", "russin")


def summary(doc: str) -> str:
    """The first paragraph of a docstring on one line (the description of `fairseq-compgen prep --help` and of each
    dataset's own --help)."""
    return " ".join(doc.strip().split("\n\n")[0].split())


def description(name: str) -> str:
    """The summary of ``fairseq_compgen.prep.<name>``'s docstring, read from its source (not imported)."""
    tree = ast.parse((Path(__file__).parent / f"{name}.py").read_text(encoding="utf-8"))
    return summary(ast.get_docstring(tree) or "")


def argument_parser(name: str, doc: str) -> argparse.ArgumentParser:
    """The parser of `fairseq-compgen prep NAME` (``doc``: the module's docstring; --help shows its first paragraph)."""
    return argparse.ArgumentParser(prog=f"fairseq-compgen prep {name}", description=doc.strip().split("\n\n")[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def module(name: str) -> ModuleType:
    """``fairseq_compgen.prep.<name>``; an unknown name raises UsageError listing the known ones."""
    if name not in DATASETS:
        raise UsageError(f"fairseq-compgen prep: unknown dataset {name!r} (known: {', '.join(DATASETS)})")
    return importlib.import_module(f"{__name__}.{name}")


def usage() -> str:
    width = max(map(len, DATASETS)) + 2
    lines = ["usage: fairseq-compgen prep DATASET [options]   (fairseq-compgen prep DATASET --help: its options)",
             "", "datasets:"]
    for name in DATASETS:
        lines += textwrap.wrap(description(name), width=110, initial_indent=f"  {name:{width}}",
                               subsequent_indent=" " * (width + 2))
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`fairseq-compgen prep NAME ARGS...`: runs ``fairseq_compgen.prep.<NAME>.main(ARGS)``; no NAME or --help lists the
    datasets."""
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
