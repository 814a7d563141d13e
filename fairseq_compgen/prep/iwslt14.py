"""Prepare IWSLT'14 De-En as fairseq's prepare-iwslt14.sh does (tokenize, lowercase, clean, BPE), binarized
with a joined dictionary (the paper's A.2 setup, Table 4).

    fairseq-compgen prep iwslt14 --out data/iwslt14 [--iwslt-dir DIR] [--bpe-tokens 10000] \
        [--separate-dictionaries] [--no-binarize] [--no-count-check]

``--iwslt-dir``: the extracted ``de-en/`` folder of de-en.tgz (train.tags.de-en.{de,en} and the
IWSLT14.TED*.xml files); default: download it.  Writes ``OUT/de-en/{train,valid,test}.{src,tgt}``,
``OUT/de-en/code`` (BPE codes) and ``OUT/de-en/bin/``.  Counts are checked against fairseq's
160,239 / 7,283 / 6,750.  BLEU: ``python -m fairseq_compgen.scoring.bleu gen.txt`` (detokenized;
``--tokenized`` for the tokenized number fairseq's example prints).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, Optional, Sequence

from fairseq_compgen.data import iwslt14
from fairseq_compgen.data.binarize import add_common_args, common_options, prepare_split
from fairseq_compgen.prep import argument_parser


def prepare(args: argparse.Namespace) -> Dict[str, dict]:
    folder = iwslt14.locate(args.iwslt_dir)
    out = args.out / iwslt14.PAIR
    data, codes, dropped = iwslt14.prepare_text(folder, args.bpe_tokens)
    print(f"IWSLT'14 training pairs dropped by clean-corpus (ratio 1.5, 1-175 tokens): {dropped}")
    return prepare_split(
        "IWSLT'14 De-En", out, data, expected=iwslt14.EXPECTED, side_files={"code": codes}, **common_options(args),
    )


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argument_parser("iwslt14", __doc__)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--iwslt-dir", type=Path, help="extracted de-en/ folder of de-en.tgz (default: download)")
    p.add_argument("--bpe-tokens", type=int, default=iwslt14.BPE_TOKENS, help="BPE merges (10000)")
    add_common_args(p, joined=True)
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, dict]:
    return prepare(parse_args(argv))


if __name__ == "__main__":
    main()
