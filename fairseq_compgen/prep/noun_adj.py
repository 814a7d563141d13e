"""Prepare the noun-adjective ordering En->Fr data set (the paper's Section 4.2, Table 2) from Europarl v7.

    fairseq-compgen prep noun_adj --out data/noun_adj [--europarl-dir DIR] [--tagger auto|spacy|pattern] \
        [--bpe-tokens 40000] [--separate-dictionaries] [--no-binarize]

``--europarl-dir`` holds ``europarl-v7.fr-en.{en,fr}``; default: download fr-en.tgz (194 MB).
Writes ``OUT/en-fr/{train,valid,test}.{src,tgt}``, ``test.comp`` (COMP metadata, also in ``bin/``),
``code`` (BPE) and ``bin/`` (joined dictionary, as the WMT'14 En-Fr recipe shares embeddings), and prints
how many pairs were read, kept per subset and dropped per reason.  The paper's test set has 659
sentences (full corpus, CoreNLP parser); a different count is only reported.  Scoring:

    python -m fairseq_compgen.scoring.comp gen.txt --meta OUT/en-fr/bin/test.comp
    python -m fairseq_compgen.scoring.bleu gen.txt --lang fr
    fairseq-train ... --task compgen --valid-subset valid,test --eval-comp OUT/en-fr/bin/test.comp
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, Optional, Sequence

from fairseq_compgen.data import download, noun_adj
from fairseq_compgen.data.binarize import add_common_args, common_options, prepare_split
from fairseq_compgen.data.iwslt14 import extract_archive, learn_apply_bpe
from fairseq_compgen.prep import argument_parser

URL = "https://www.statmt.org/europarl/v7/fr-en.tgz"


def europarl_dir(arg: Optional[Path]) -> Path:
    if arg is not None:
        return arg
    tgz = download.fetch(URL, "europarl", "fr-en.tgz", progress=True,
                         hint="if there is no network, pass --europarl-dir holding europarl-v7.fr-en.{en,fr}")
    out = tgz.parent / "extracted"
    if not (out / "europarl-v7.fr-en.en").is_file():
        extract_archive(tgz, out)
    return out


def prepare(args: argparse.Namespace) -> Dict[str, dict]:
    en, fr = noun_adj.default_paths(europarl_dir(args.europarl_dir))
    data, meta, report = noun_adj.build(en, fr, tagger=args.tagger, spacy_model=args.spacy_model)
    print(noun_adj.format_report(report))
    if report["kept"]["test"] != noun_adj.EXPECTED_TEST_PAPER:
        print(f"note: {report['kept']['test']} test sentences; the paper has {noun_adj.EXPECTED_TEST_PAPER} "
              "(full corpus, CoreNLP parser)")
    out = args.out / "en-fr"
    data, codes = learn_apply_bpe(data, args.bpe_tokens)

    def check_meta(counts):
        if counts.get("test", 0) != len(meta):
            raise RuntimeError(f"test.comp has {len(meta)} lines for {counts.get('test', 0)} test examples")

    summary = prepare_split(
        "noun-adjective En-Fr (Europarl v7)", out, data, extra_files={"test.comp": meta}, extra_check=check_meta,
        side_files={"code": codes}, **common_options(args),
    )
    summary["_report"] = report
    return summary


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argument_parser("noun_adj", __doc__)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--europarl-dir", type=Path, help="folder with europarl-v7.fr-en.{en,fr} (default: download)")
    p.add_argument("--tagger", choices=noun_adj.TAGGERS, default="auto",
                   help="adjective-noun finder: spaCy parse if installed (auto), or the Table-2 pattern")
    p.add_argument("--spacy-model", default="en_core_web_sm")
    p.add_argument("--bpe-tokens", type=int, default=noun_adj.BPE_TOKENS, help="BPE merges (40000)")
    add_common_args(p, count_check=False, joined=True)
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, dict]:
    return prepare(parse_args(argv))


if __name__ == "__main__":
    main()
