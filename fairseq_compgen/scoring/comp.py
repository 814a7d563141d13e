"""COMP (the paper's Section 5): the share of hypotheses containing both the target French adjective and
the target French noun, in any inflection and either order, of the noun-adjective En->Fr test set.

    python -m fairseq_compgen.scoring.comp GENERATE_LOG --meta OUT/bin/test.comp [--json OUT.json]

The metadata ``test.comp`` is written by ``fairseq-compgen prep noun_adj``: line k (0-based) is example id k,
tab-separated ``en_adjective  en_noun  fr_adjective_forms  fr_noun_forms`` (forms comma-separated).
Hypotheses are matched after subword removal (sentencepiece / subword-nmt), lowercased, split into
words on anything that is not a letter or a digit (so ``l'institution`` and ``&apos;`` escapes match).
COMP is a proxy: a synonym in the right order counts as a miss (the paper's footnote 7).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple

from fairseq_compgen.data.io import DataError, read_text_lines
from fairseq_compgen.errors import MissingFileError
from fairseq_compgen.scoring import Scorer, read_generate_output, register
from fairseq_compgen.scoring.bleu import remove_bpe
from fairseq_compgen.scoring.exact_match import ScoringError, _ids, parse_generate_output, run_cli, write_json

Meta = Tuple[str, str, frozenset, frozenset]
_WORD = re.compile(r"[^\W_]+")


def read_meta(path) -> List[Meta]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"COMP metadata not found: {path} (fairseq-compgen prep noun_adj writes test.comp)")
    lines = "".join(read_text_lines(path, "the COMP metadata (fairseq-compgen prep noun_adj's test.comp)")).split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    out = []
    for lineno, line in enumerate(lines, start=1):
        f = line.split("\t")
        if len(f) != 4 or not all(x.strip() for x in f):
            raise DataError(path, lineno, "expected 4 tab-separated fields: en_adj, en_noun, fr_adj_forms, fr_noun_forms", line)
        out.append((f[0], f[1], frozenset(w.lower() for w in f[2].split(",")),
                    frozenset(w.lower() for w in f[3].split(","))))
    return out


def words(hypothesis: str) -> set:
    return set(_WORD.findall(remove_bpe(hypothesis, "auto").lower()))


def comp_hit(hypothesis: str, adj_forms, noun_forms) -> bool:
    """True iff some form of the adjective and some form of the noun are words of the hypothesis."""
    w = words(hypothesis)
    return bool(w & set(adj_forms)) and bool(w & set(noun_forms))


def score_generate_output(lines: Iterable[str], meta: Sequence[Meta], source: str = "<generate output>") -> dict:
    """{"n", "hits", "comp"}; every metadata id needs an H- line and every H- id a metadata line."""
    _, hyps = parse_generate_output(lines, source=source)
    missing = sorted(set(range(len(meta))) - set(hyps))
    extra = sorted(i for i in hyps if i >= len(meta))
    if missing:
        raise ScoringError(f"{source}: {len(missing)} test id(s) without a hypothesis (H-): {_ids(missing)}")
    if extra:
        raise ScoringError(f"{source}: hypothesis id(s) beyond the {len(meta)} metadata lines: {_ids(extra)}")
    hits = sum(comp_hit(" ".join(hyps[i]), m[2], m[3]) for i, m in enumerate(meta))
    return {"n": len(meta), "hits": hits, "comp": hits / len(meta) if meta else 0.0}


def main(argv: Optional[Sequence[str]] = None) -> dict:
    p = argparse.ArgumentParser(description="COMP of fairseq-generate output on the noun-adjective test set.")
    p.add_argument("generate_log", help="fairseq-generate output (or a run's eval/SUBSET.outputs.gz); '-' for stdin")
    p.add_argument("--meta", required=True, help="test.comp written by fairseq-compgen prep noun_adj")
    p.add_argument("--json", dest="json_out")
    args = p.parse_args(argv)
    meta = read_meta(args.meta)
    lines, source = read_generate_output(args.generate_log)
    res = score_generate_output(lines, meta, source)
    print(f"COMP: {res['comp']:.4f} ({res['hits']}/{res['n']} hypotheses with both the French adjective and noun)")
    if args.json_out:
        write_json(args.json_out, res)
    return res


def check(data: Path, subset: str) -> None:
    meta = data / f"{subset}.comp"
    if not meta.is_file():
        raise MissingFileError(f"{meta}: COMP needs the subset's metadata (fairseq-compgen prep noun_adj writes it)")


def eval_argv(generated: Path, data: Path, subset: str, n: int) -> List[str]:
    check(data, subset)
    return [str(generated), "--meta", str(data / f"{subset}.comp")]


register(Scorer(
    name="comp", key="comp", label="COMP",
    paper='Chaabouni et al. (2021), "Can Transformers Jump Around Right in Natural Language?", Section 5',
    help="share of hypotheses with both the target French adjective and noun (needs --meta SUBSET.comp)",
    main=main, eval_argv=eval_argv, check=check,
))

if __name__ == "__main__":
    run_cli(main)
