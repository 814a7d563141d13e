"""Prepare SCAN splits as fairseq text and binary data.

SCAN: Lake & Baroni (2018), "Generalization without systematicity: On the
compositional skills of sequence-to-sequence recurrent networks", ICML.
Length cutoff splits: Csordás, Irie & Schmidhuber (2021), "The Devil is in the
Detail: Simple Tricks Improve Systematic Generalization of Transformers", EMNLP.

    fairseq-compgen prep scan --split length_cutoff_26 --out data/scan \
        [--scan-dir DIR] [--joined-dictionary] [--no-binarize]

Writes ``OUT/<split>/<subset>.src`` and ``.tgt`` (one example per line,
space-separated tokens), then binarizes them with fairseq-preprocess (``--padding-factor 1``: no filler
words in the dictionaries) into
``OUT/<split>/bin/`` (dictionaries built from ``train`` only), naming the
binary subsets like the text ones (train, valid, test, gen).  The binary
folder is built in a temporary folder and renamed into place at the end.
``--split all-generated`` prepares every rule-based split (no download).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, Optional, Sequence

from fairseq_compgen.data.binarize import add_common_args, prepare_split
from fairseq_compgen.data.scan import GENERATED_SPLITS, build_split, split_names
from fairseq_compgen.prep import argument_parser


def prepare(
    split: str, out: Path, scan_dir: Optional[Path], joined: bool, binarize_data: bool, workers: int = 1,
    dict_from: str = "train",
) -> Dict[str, dict]:
    data = build_split(split, scan_dir=scan_dir)
    return prepare_split(
        f"SCAN split {split}", out / split, data, joined=joined, binarize_data=binarize_data, workers=workers,
        dict_from=dict_from,
    )


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argument_parser("scan", __doc__)
    p.add_argument(
        "--split", required=True,
        help="SCAN split: all-generated, " + ", ".join(split_names()),
    )
    p.add_argument("--out", required=True, type=Path, help="output folder (data/scan); the split goes to OUT/<split>/")
    p.add_argument(
        "--scan-dir", type=Path, default=None,
        help="local copy of https://github.com/brendenlake/SCAN (for the official splits); "
        "default: download the needed files",
    )
    add_common_args(p, count_check=False)
    args = p.parse_args(argv)
    if args.split != "all-generated" and args.split not in split_names():
        p.error(f"unknown split {args.split!r}; choose from all-generated, {', '.join(split_names())}")
    return args


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Dict[str, dict]]:
    args = parse_args(argv)
    splits = list(GENERATED_SPLITS) if args.split == "all-generated" else [args.split]
    results = {}
    for split in splits:
        results[split] = prepare(
            split, args.out, args.scan_dir, args.joined_dictionary, not args.no_binarize, args.workers, args.dict_from
        )
    return results


if __name__ == "__main__":
    main()
