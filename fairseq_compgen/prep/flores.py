"""Prepare FLoRes v1 Ne<->En / Si<->En as fairseq text and binary data (sentencepiece BPE, joined dictionary).

Guzmán et al. (2019); the paper's Tables 5 and 7.

    fairseq-compgen prep flores --out data/flores --direction ne-en [--flores-dir DIR] [--train-dir DIR] \
        [--vocab-size 5000] [--separate-dictionaries] [--no-binarize] [--no-count-check]

Writes ``OUT/<direction>/{train,valid,test[,dev]}.{src,tgt}`` (sentencepiece pieces), the model
``OUT/<direction>/sentencepiece.bpe.model`` and binaries in ``OUT/<direction>/bin/`` (joined
dictionary).  valid = devtest, test = test.  ``--train-dir`` holds ``train.<xx>`` / ``train.en`` (the
supervised data of floresv1's download-data.sh); without it dev is the training set.  Without
--flores-dir the test-set archive is downloaded.  Score with

    fairseq-generate OUT/ne-en/bin --user-dir fairseq_compgen --task compgen --gen-subset test \
        --path CKPT --beam 5 --lenpen 1.2 > gen.txt
    python -m fairseq_compgen.scoring.bleu gen.txt               # X->En: detokenized BLEU
    python -m fairseq_compgen.scoring.bleu gen.txt --tokenized   # En->X: tokenized BLEU (labelled)
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, Optional, Sequence

from fairseq_compgen.data import flores
from fairseq_compgen.data.binarize import add_common_args, common_options, prepare_split
from fairseq_compgen.prep import argument_parser


def prepare(args: argparse.Namespace) -> Dict[str, dict]:
    raw = flores.load(args.direction, flores_dir=args.flores_dir, train_dir=args.train_dir)
    out = args.out / args.direction
    model = flores.train_sentencepiece(raw["train"], vocab_size=args.vocab_size)
    data = {k: flores.encode(model, v) for k, v in raw.items()}
    return prepare_split(
        f"FLoRes v1 {args.direction}", out, data,
        expected=flores.expected_counts(args.direction, train_on_dev=args.train_dir is None),
        side_files={flores.MODEL_FILE: model}, **common_options(args),
    )


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argument_parser("flores", __doc__)
    p.add_argument("--out", required=True, type=Path, help="output folder; data goes to OUT/<direction>/")
    p.add_argument("--direction", required=True, choices=flores.DIRECTIONS)
    p.add_argument("--flores-dir", type=Path, help=f"folder holding {flores.ARCHIVE} (default: download)")
    p.add_argument("--train-dir", type=Path, help="folder with train.<xx>/train.en (default: train on dev)")
    p.add_argument("--vocab-size", type=int, default=flores.VOCAB_SIZE, help="sentencepiece vocabulary (5000)")
    add_common_args(p, joined=True)
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, dict]:
    return prepare(parse_args(argv))


if __name__ == "__main__":
    main()
