"""Prepare PCFG SET splits as fairseq text and binary data.

PCFG SET: Hupkes, Dankers, Mul & Bruni (2020), "Compositionality Decomposed:
How do Neural Networks Generalise?", JAIR.  Productivity and systematicity
splits as in Csordás, Irie & Schmidhuber (2021) (add --joined-dictionary for
their shared vocabulary); ``pcfgset`` is the IID basis corpus.

    fairseq-compgen prep pcfg --split productivity --out data/pcfg [--pcfg-dir DIR] \
        [--joined-dictionary] [--no-binarize] [--no-count-check] [--no-validate]

Reads ``<split>/{train,test}.{src,tgt}`` (pcfgset: train/dev/test) from
``--pcfg-dir`` (layout of am-i-compositional's data/pcfgset/) or downloads
them; every target is checked against the PCFG SET interpreter
(fairseq_compgen/data/pcfg.py), a mismatch stops with file:line.  Writes
``OUT/<split>/{train,test}.{src,tgt}`` and binaries in ``OUT/<split>/bin/``.
Counts are checked against spec_000 Table 10 (productivity 81,010 / 11,333;
systematicity 82,168 / 10,175).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, Optional, Sequence

from fairseq_compgen.data import pcfg
from fairseq_compgen.data.binarize import add_common_args, common_options, prepare_split
from fairseq_compgen.prep import argument_parser


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argument_parser("pcfg", __doc__)
    p.add_argument("--split", action="append", required=True, choices=sorted(pcfg.SPLITS), help="split (repeatable)")
    p.add_argument("--out", required=True, type=Path, help="output folder (data/pcfg); a split goes to OUT/<split>/")
    p.add_argument("--pcfg-dir", type=Path, default=None, help="local copy of data/pcfgset/; default: download")
    p.add_argument("--no-validate", action="store_true", help="do not check targets with the interpreter")
    add_common_args(p)
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Dict[str, dict]]:
    args = parse_args(argv)
    results = {}
    for split in dict.fromkeys(args.split):
        data = pcfg.load(split, pcfg_dir=args.pcfg_dir, validate=not args.no_validate)
        results[split] = prepare_split(
            f"PCFG SET split {split}" + ("" if args.no_validate else " (targets checked by the interpreter)"),
            args.out / split,
            data,
            expected=pcfg.EXPECTED.get(split),
            **common_options(args),
        )
    return results


if __name__ == "__main__":
    main()
