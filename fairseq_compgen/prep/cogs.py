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
with ``<unk>`` can then never match).  Counts are checked against
spec_000 Table 10 (24,155 / 3,000 / 21,000; test 3,000).  Without --cogs-dir
the files are downloaded from https://github.com/najoungkim/COGS.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, Optional, Sequence

from fairseq_compgen.data import cogs
from fairseq_compgen.data.binarize import add_common_args, common_options, prepare_split
from fairseq_compgen.prep import argument_parser


def split_name(train: str) -> str:
    return "default" if train == "train" else train


def prepare(args: argparse.Namespace) -> Dict[str, dict]:
    data = cogs.load(train=args.train, cogs_dir=args.cogs_dir)
    cats = [c for _, _, c in data["gen"]]
    n_cats = len(set(cats))

    summary = prepare_split(
        f"COGS ({args.train}.tsv)",
        args.out / split_name(args.train),
        {subset: [(s, t) for s, t, _ in ex] for subset, ex in data.items()},
        expected=cogs.expected_counts(args.train),
        extra_files={"gen.cat": cats},
        extra_check=lambda counts: cogs.check_categories(cats, strict=not args.no_count_check),
        **common_options(args),
    )
    print(f"gen categories: {n_cats} (gen.cat{' and bin/gen.cat' if not args.no_binarize else ''})")
    return summary


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argument_parser("cogs", __doc__)
    p.add_argument("--out", required=True, type=Path, help="output folder (data/cogs); data goes to OUT/<name>/")
    p.add_argument(
        "--cogs-dir", type=Path, default=None,
        help="local copy of COGS data/ (train.tsv, dev.tsv, test.tsv, gen.tsv[, train_100.tsv]); default: download",
    )
    p.add_argument("--train", choices=cogs.TRAIN_FILES, default="train", help="training file (default train)")
    add_common_args(p, dict_from="all")
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, dict]:
    return prepare(parse_args(argv))


if __name__ == "__main__":
    main()
