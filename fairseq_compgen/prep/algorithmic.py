"""Generate the six algorithmic tasks of Ontañón et al. (2022) (Table 7, spec_001 §9.2) as fairseq data.

    fairseq-compgen prep algorithmic --out data/algorithmic [--tasks add reverse ...] [--seed 0] \
        [--train-size 200000] [--test-size 1024] [--joined-dictionary] [--no-binarize]

Writes ``OUT/<task>/{train,valid,test}.{src,tgt}`` (valid: a fresh in-distribution sample; test: the longer
out-of-distribution lengths the paper reports) and fairseq binaries in ``OUT/<task>/bin/``. Tasks: add, addneg,
reverse, dup, cart, inters. The copy-decoder models (`ontanon_*_c`, small-*, large-*) need
``--joined-dictionary`` (the paper's unified vocabulary). Repetitions of the paper regenerate the data
(spec §7): use a different ``--seed`` per repetition.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, Optional, Sequence

from fairseq_compgen.data import algorithmic
from fairseq_compgen.data.binarize import add_common_args, common_options, prepare_split
from fairseq_compgen.prep import argument_parser


def prepare(args: argparse.Namespace) -> Dict[str, dict]:
    out = {}
    for task in args.tasks:
        data = algorithmic.make_task(task, seed=args.seed, train_size=args.train_size, test_size=args.test_size)
        out[task] = prepare_split(
            f"{task} (Ontañón et al. 2022, seed {args.seed})",
            args.out / task,
            data,
            expected={subset: len(ex) for subset, ex in data.items()},
            **common_options(args),
        )
    return out


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argument_parser("algorithmic", __doc__)
    p.add_argument("--out", required=True, type=Path, help="output folder; data goes to OUT/<task>/")
    p.add_argument("--tasks", nargs="+", choices=algorithmic.TASKS, default=list(algorithmic.TASKS))
    p.add_argument("--seed", type=int, default=0, help="data seed (default 0)")
    p.add_argument("--train-size", type=int, default=algorithmic.TRAIN_SIZE, help="default 200000 (Table 7)")
    p.add_argument("--test-size", type=int, default=algorithmic.TEST_SIZE,
                   help="size of valid and test (default 1024, Table 7; the authors' code uses 512 for add/addneg)")
    add_common_args(p, count_check=False, dict_from="all")
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, dict]:
    return prepare(parse_args(argv))


if __name__ == "__main__":
    main()
