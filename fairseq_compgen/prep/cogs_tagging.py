"""Prepare COGS as sequence tagging (Ontañón et al. 2022, "Making Transformers
Solve Compositional Tasks", ACL, Section 4.5.1; spec_001 §6.1).

COGS: Kim & Linzen (2020), EMNLP.  Every sentence token gets 5 tags
(fairseq_compgen/data/cogs_tagging.py), written as aligned text files:

    fairseq-compgen prep cogs_tagging --out data/cogs-tagging [--cogs-dir DIR] [--train train_100]

Writes ``OUT/{train,valid,test,gen}.{src,parent,role,category,noun_type,verb_name,lf}``
(``.src`` = the sentence, whitespace tokens with the final "."; one tag per
token on each tag line, ``_`` for an empty tag; ``.lf`` = the reference
logical form), ``gen.cat`` (the category of every gen line) and the fairseq
dictionaries ``dict.src.txt`` and ``dict.<tag>.txt`` over every subset (so gen
words are known, as fairseq-compgen prep cogs --dict-from all; the cogs_tagging task
loads them, so a checkpoint decodes with the vocabularies it was trained with).  Every example
is checked to round-trip (tags -> the reference logical form) before anything
is written; a failure is an error naming file and line.  The counts and the 21 gen categories are checked
against the published statistics (``--no-count-check`` only warns); the files are written in a staging
folder and renamed into ``OUT`` together at the end (an error leaves the previous files as they were).
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Dict, Optional, Sequence

from fairseq_compgen.data import cogs
from fairseq_compgen.data import cogs_tagging as ct
from fairseq_compgen.data.binarize import count_checker, nonempty_checker
from fairseq_compgen.data.io import DataError, staged_files
from fairseq_compgen.prep import argument_parser


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argument_parser("cogs_tagging", __doc__)
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument("--cogs-dir", type=Path, help="local copy of the COGS data/ folder (else downloaded)")
    p.add_argument("--train", default="train", choices=cogs.TRAIN_FILES)
    p.add_argument("--no-count-check", action="store_true",
                   help="only warn when the counts or gen categories differ from the published statistics")
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, int]:
    args = parse_args(argv)
    data = cogs.load(args.train, args.cogs_dir)
    counts = {subset: len(examples) for subset, examples in data.items()}
    nonempty_checker("COGS tagging")(counts)
    count_checker(cogs.expected_counts(args.train), "COGS tagging", strict=not args.no_count_check)(counts)
    cogs.check_categories([c for _, _, c in data["gen"]], strict=not args.no_count_check)
    stems = {"train": args.train, **cogs.SUBSET_FILES}
    files: Dict[str, str] = {}
    for subset, examples in data.items():
        cols = {k: [] for k in ("src", "lf", *ct.FIELDS)}
        source = str((args.cogs_dir or Path("<download>")) / f"{stems[subset]}.tsv")
        for lineno, (src, lf, cat) in enumerate(examples, start=1):
            try:
                tags = ct.to_tags(src, lf, primitive=(cat == "primitive"), where=f"{source}:{lineno}")
                if ct.from_tags(src, tags) != lf:
                    raise ct.TaggingError("tags do not reconstruct the logical form")
            except ct.TaggingError as e:
                raise DataError(source, lineno, f"a taggable COGS example ({e})", src) from None
            cols["src"].append(src)
            cols["lf"].append(lf)
            for k, v in ct.tags_to_lines(tags).items():
                cols[k].append(v)
        for k, lines in cols.items():
            files[f"{subset}.{k}"] = "\n".join(lines) + "\n"
        if subset == "gen":
            files["gen.cat"] = "\n".join(c for _, _, c in examples) + "\n"
    files.update(dictionaries(files, list(data)))
    with staged_files(args.out) as stage:  # every file replaced together, or none
        for name, text in files.items():
            (stage / name).write_text(text, encoding="utf-8")
    print(f"COGS tagging: wrote {args.out} ({', '.join(f'{k} {v}' for k, v in counts.items())})")
    return counts


def dictionaries(files: Dict[str, str], subsets) -> Dict[str, str]:
    """``dict.src.txt`` and ``dict.<tag>.txt`` (fairseq's "symbol count" format) over the given subsets."""
    from fairseq.data import Dictionary

    out = {}
    for name in ("src", *ct.FIELDS[1:]):  # parent is a position, not a symbol
        d = Dictionary()
        for sub in subsets:
            for line in files[f"{sub}.{name}"].split("\n"):
                for w in line.split():
                    d.add_symbol(w)
        d.finalize()
        buf = io.StringIO()
        d.save(buf)
        out[f"dict.{name}.txt"] = buf.getvalue()
    return out


if __name__ == "__main__":
    main()
