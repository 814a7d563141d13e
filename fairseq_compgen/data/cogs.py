"""Prepare COGS as fairseq text and binary data.

COGS: Kim & Linzen (2020), "COGS: A Compositional Generalization Challenge
Based on Semantic Interpretation", EMNLP.  As in Csordás, Irie & Schmidhuber
(2021), train on train.tsv, IID validation on dev.tsv, generalization on gen.tsv
(add --joined-dictionary for their shared vocabulary).

    fairseq-compgen prep cogs --out data/cogs [--cogs-dir DIR] [--train train_100] \
        [--joined-dictionary] [--no-binarize] [--no-count-check]

Writes ``OUT/<name>/{train,valid,test,gen}.{src,tgt}`` (``<name>`` is
``default`` for train.tsv, ``train_100`` for train_100.tsv) and ``gen.cat``
(the generalization category of every gen line), then fairseq binaries in
``OUT/<name>/bin/`` with ``bin/gen.cat`` beside them, so that

    python -m fairseq_compgen.scoring.exact_match GEN_LOG --categories OUT/default/bin/gen.cat

reports the accuracy of each of the 21 categories.  The dictionaries are
counted over every subset by default (``--dict-from all``): gen's logical forms
use 40 variable indices (``x _ 19`` ... ``x _ 58``) never seen in train, and
Table 10's vocabulary of 871 words is exactly train's 831 plus those 40;
``--dict-from train`` gives fairseq's train-only dictionaries (gen references
with ``<unk>`` can then never match).  Counts are checked against the published
statistics (Csordás et al. 2021, Table 10: 24,155 / 3,000 / 21,000; test 3,000).
Without --cogs-dir the files are downloaded from https://github.com/najoungkim/COGS.

Reading the official TSV files:

    Najoung Kim and Tal Linzen. 2020. "COGS: A Compositional Generalization
    Challenge Based on Semantic Interpretation". EMNLP 2020.
    https://github.com/najoungkim/COGS

Each line of ``{train,train_100,dev,test,gen}.tsv`` is
``<sentence>\\t<logical form>\\t<category>``; both sides are already
space-tokenized.  Subsets: ``train`` (or ``train_100``), ``valid`` (dev.tsv, IID),
``test`` (test.tsv, IID) and ``gen`` (gen.tsv, 21 generalization categories ×
1,000).  The category of every gen example is kept (``gen.cat``) for
per-category accuracy; ``gen_cases_to_paper_sections.json`` maps them to the
paper's sections.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Tuple

from fairseq_compgen.data import download
from fairseq_compgen.data.dataset import Dataset, Split
from fairseq_compgen.data.io import DataError, read_data_lines
from fairseq_compgen.errors import MissingFileError, UsageError

COGS_RAW_URL = "https://raw.githubusercontent.com/najoungkim/COGS/main/data/"
TRAIN_FILES = ("train", "train_100")
# our subset -> official file stem (the train file is chosen by ``train=``)
SUBSET_FILES = {"valid": "dev", "test": "test", "gen": "gen"}

# Csordás et al. (2021) Table 10 (COGS: 24,155 train / 3,000 IID valid / 21,000 gen); test.tsv has 3,000 lines
EXPECTED = {"train": 24155, "valid": 3000, "test": 3000, "gen": 21000}
N_GEN_CATEGORIES = 21

Example = Tuple[str, str, str]  # sentence, logical form, category

HINT = "if there is no network, pass --cogs-dir pointing to a local copy of the COGS data/ folder"


def read_tsv(path, what: str = "COGS data") -> List[Example]:
    """(sentence, logical form, category) triples of a COGS TSV file.

    Every line must have exactly 3 tab-separated non-empty fields (a trailing
    empty line is allowed); otherwise :class:`DataError` names the file and line.
    """
    path = Path(path)
    lines = read_data_lines(path, what, complete=True)
    out = []
    for lineno, line in enumerate(lines, start=1):
        fields = line.rstrip("\r").split("\t")
        if len(fields) != 3:
            raise DataError(
                path, lineno, f"expected 3 tab-separated fields (sentence, logical form, category), got {len(fields)}",
                line,
            )
        src, tgt, cat = (" ".join(x.split()) for x in fields)
        if not src or not tgt or not cat:
            raise DataError(path, lineno, "expected non-empty sentence, logical form and category", line)
        out.append((src, tgt, cat))
    return out


def _path(stem: str, cogs_dir: Optional[Path], cache_dir: Optional[Path]) -> Path:
    name = f"{stem}.tsv"
    if cogs_dir is not None:
        path = Path(cogs_dir) / name
        if not path.is_file():
            raise MissingFileError(f"COGS {stem} file not found: {path} (--cogs-dir must hold the files of COGS data/)")
        return path
    return download.fetch(COGS_RAW_URL + name, "cogs", name, cache_dir=cache_dir, hint=HINT)


def load(train: str = "train", cogs_dir: Optional[Path] = None, cache_dir: Optional[Path] = None) -> Dict[str, List[Example]]:
    """Subset (train, valid, test, gen) -> examples, from ``cogs_dir`` or downloaded."""
    if train not in TRAIN_FILES:
        raise UsageError(f"unknown COGS training file {train!r}; known: {TRAIN_FILES}")
    stems = {"train": train, **SUBSET_FILES}
    return {
        subset: read_tsv(_path(stem, cogs_dir, cache_dir), what=f"COGS {subset} ({stem}.tsv)")
        for subset, stem in stems.items()
    }


def expected_counts(train: str = "train") -> Dict[str, int]:
    """Published counts for the subsets (train_100's training size is not in Table 10)."""
    exp = dict(EXPECTED)
    if train != "train":
        del exp["train"]
    return exp


def check_categories(categories, strict: bool = True) -> None:
    """gen must hold the :data:`N_GEN_CATEGORIES` published categories: :class:`CountMismatch` if not (only a
    warning with ``strict=False``, i.e. --no-count-check)."""
    import sys

    from fairseq_compgen.data.binarize import CountMismatch

    n = len(set(categories))
    if n != N_GEN_CATEGORIES:
        msg = f"COGS gen: {n} categories, expected {N_GEN_CATEGORIES}"
        if strict:
            raise CountMismatch(msg + " (not the official release? --no-count-check accepts it)")
        print(f"warning: {msg}", file=sys.stderr)


# ---------------------------------------------------------------------------
# fairseq-compgen prep cogs
# ---------------------------------------------------------------------------


def split_name(train: str) -> str:
    return "default" if train == "train" else train


def add_arguments(p) -> None:
    p.add_argument(
        "--cogs-dir", type=Path, default=None,
        help="local copy of COGS data/ (train.tsv, dev.tsv, test.tsv, gen.tsv[, train_100.tsv]); default: download",
    )
    p.add_argument("--train", choices=TRAIN_FILES, default="train", help="training file (default train)")


def read(args) -> Split:
    return Split(load(train=args.train, cogs_dir=args.cogs_dir), folder=split_name(args.train),
                 title=f"COGS ({args.train}.tsv)", expected=expected_counts(args.train))


DATASET = Dataset(
    read=read,
    add_arguments=add_arguments,
    categories={"gen": N_GEN_CATEGORIES},
    urls=[COGS_RAW_URL + "{train,train_100,dev,test,gen}.tsv"],
    dict_from="all",
    dataset_json=False,
)
