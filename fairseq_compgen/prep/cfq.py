"""Prepare CFQ splits as fairseq text and binary data.

CFQ: Keysers et al. (2020), "Measuring Compositional Generalization: A
Comprehensive Method on Realistic Data", ICLR.  Splits MCD1/2/3 and the
output-length split (query_complexity), as in Csordás, Irie & Schmidhuber (2021).

    fairseq-compgen prep cfq --split mcd1 [--split mcd2 ...] --out data/cfq \
        [--cfq-tarball cfq1.1.tar.gz | --cfq-dir DIR | --preprocessed-dir DIR] \
        [--joined-dictionary] [--no-binarize] [--no-count-check] [--intermediate]

Source: ``cfq1.1.tar.gz`` (downloaded when no local source is given), read in
one streaming pass ('r|gz'; dataset.json parsed incrementally, progress on
stderr) with the google-research preprocessing (see fairseq_compgen/data/cfq.py);
or ``--cfq-dir``, the extracted ``cfq/`` folder; or ``--preprocessed-dir``, already
preprocessed ``{train,dev,test}.question.txt`` / ``.query.txt`` files of one split.
Writes ``OUT/<split>/{train,valid,test}.{src,tgt}`` (valid = CFQ's dev set, from
the generalization distribution) and binaries in ``OUT/<split>/bin/``.
Counts are checked against spec_000 Table 10.  ``--intermediate`` writes the
targets in the CFQ-im form of Ontañón et al. (2022) (fairseq_compgen/data/cfq_im.py;
restore hypotheses with ``python -m fairseq_compgen.data.cfq_im restore``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, Optional, Sequence

from fairseq_compgen.data import cfq, cfq_im
from fairseq_compgen.data.binarize import add_common_args, common_options, prepare_split
from fairseq_compgen.prep import argument_parser


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argument_parser("cfq", __doc__)
    p.add_argument(
        "--split", action="append", required=True, choices=sorted(cfq.SPLIT_FILES) + ["all"],
        help="split to prepare (repeatable; 'all' = mcd1, mcd2, mcd3, query_complexity)",
    )
    p.add_argument("--out", required=True, type=Path, help="output folder (data/cfq); a split goes to OUT/<split>/")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--cfq-tarball", type=Path, help="local cfq1.1.tar.gz")
    src.add_argument("--cfq-dir", type=Path, help="extracted release folder (dataset.json, splits/)")
    src.add_argument(
        "--preprocessed-dir", type=Path,
        help="already preprocessed {train,dev,test}.question.txt/.query.txt of ONE split (given by --split)",
    )
    p.add_argument("--intermediate", action="store_true",
                   help="write targets as CFQ-im (Cartesian products compressed; fairseq_compgen/data/cfq_im.py)")
    add_common_args(p)
    args = p.parse_args(argv)
    splits = []
    for s in args.split:
        for x in (sorted(cfq.SPLIT_FILES) if s == "all" else [s]):
            if x not in splits:
                splits.append(x)
    args.split = splits
    if args.preprocessed_dir is not None and len(splits) != 1:
        p.error("--preprocessed-dir holds one split: give exactly one --split")
    return args


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Dict[str, dict]]:
    args = parse_args(argv)
    if args.preprocessed_dir is not None:
        data = {args.split[0]: cfq.load_preprocessed(args.preprocessed_dir)}
    elif args.cfq_dir is not None:
        data = cfq.load_from_dir(args.cfq_dir, args.split)
    else:
        tarball = args.cfq_tarball if args.cfq_tarball is not None else cfq.download_tarball()
        data = cfq.load_from_tarball(tarball, args.split)
    results = {}
    for split in args.split:
        pairs = data.pop(split)
        if args.intermediate:
            pairs = {sub: [(q, cfq_im.to_im(y)) for q, y in ps] for sub, ps in pairs.items()}
        results[split] = prepare_split(
            f"CFQ split {split}" + (" (CFQ-im targets)" if args.intermediate else ""),
            args.out / split,
            pairs,
            expected=cfq.EXPECTED[split],
            **common_options(args),
        )
    return results


if __name__ == "__main__":
    main()
