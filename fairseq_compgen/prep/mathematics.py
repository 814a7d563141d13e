"""Prepare Mathematics dataset modules as fairseq text and binary data (character level).

Mathematics dataset: Saxton, Grefenstette, Hill & Kohli (2019), "Analysing
Mathematical Reasoning Abilities of Neural Models", ICLR.  Modules
arithmetic__add_or_sub and numbers__place_value as in Csordás, Irie &
Schmidhuber (2021).

    fairseq-compgen prep mathematics --module arithmetic__add_or_sub --out data/math \
        [--math-dir DIR | --math-tarball mathematics_dataset-v1.0.tar.gz] [--workers N] \
        [--joined-dictionary] [--no-binarize]

Without --math-dir, only the needed members are extracted from the 2.3 GB
release tarball (downloaded when --math-tarball is not given) in one streaming
pass, into ``$FAIRSEQ_COMPGEN_CACHE/math/mathematics_dataset-v1.0/`` (or
``--extract-dir``), with progress on stderr.  Writes
``OUT/<module>/{train,valid,gen}.{src,tgt}``: train = train-easy + train-medium
+ train-hard, valid = interpolate (IID), gen = extrapolate ``<module>_big``;
one token per character, a space written as ``_``.  Counts are printed (not
checked: Table 10's counts are those of the v1.0 release after the authors'
processing; the copy in ../shared/data/math is a regeneration).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, Optional, Sequence

from fairseq_compgen.data import download
from fairseq_compgen.data import math_dataset as md
from fairseq_compgen.data.binarize import add_common_args, common_options, prepare_split
from fairseq_compgen.prep import argument_parser


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argument_parser("mathematics", __doc__)
    p.add_argument("--module", action="append", required=True, choices=list(md.MODULES) + ["all"],
                   help="module (repeatable; 'all' = both)")
    p.add_argument("--out", required=True, type=Path, help="output folder (data/math); a module goes to OUT/<module>/")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--math-dir", type=Path, help="extracted release folder (train-easy/, ..., extrapolate/)")
    src.add_argument("--math-tarball", type=Path, help="local mathematics_dataset-v1.0.tar.gz")
    p.add_argument("--extract-dir", type=Path, default=None,
                   help="where the needed tarball members go (default: the cache folder)")
    add_common_args(p, count_check=False)
    args = p.parse_args(argv)
    args.module = list(dict.fromkeys(m for x in args.module for m in (md.MODULES if x == "all" else [x])))
    return args


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Dict[str, dict]]:
    args = parse_args(argv)
    math_dir = args.math_dir
    if math_dir is None:
        tarball = args.math_tarball if args.math_tarball is not None else md.download_tarball()
        dest = args.extract_dir or download.default_cache_dir("math") / md.TAR_ROOT
        math_dir = md.extract_members(tarball, dest, args.module)
    results = {}
    for module in args.module:
        results[module] = prepare_split(
            f"Mathematics {module} (character level, space = {md.SPACE!r})",
            args.out / module,
            md.load(module, math_dir),
            **common_options(args),
        )
    return results


if __name__ == "__main__":
    main()
