"""BLEU of fairseq-generate output with sacrebleu (Post 2018, "A Call for Clarity in Reporting BLEU Scores").

    python -m fairseq_compgen.scoring.bleu GENERATE_LOG [--remove-bpe auto|none|sentencepiece|subword_nmt]
        [--detok auto|none|moses] [--lang en] [--tokenized] [--json OUT.json] [--expected-count N]

Default: **detokenized BLEU** -- subword units removed (``auto``: sentencepiece if the text has ``▁``,
subword-nmt if it has ``@@ ``), Moses-detokenized when the text was Moses-tokenized (``--detok moses``;
``auto`` detokenizes subword-nmt text, i.e. the IWSLT'14 / Europarl recipes), then sacrebleu's own
13a tokenization; the sacrebleu signature is printed with the score.

``--tokenized``: **tokenized BLEU** (labelled so in the output) -- sacrebleu with ``tokenize=none`` on
the whitespace tokens after subword removal, no detokenization: the number fairseq's recipes and
Guzmán et al. (2019) report (for En->Ne/Si they tokenize with the Indic NLP tokenizer first, which is
not applied here).  T-/H- lines are read as in :mod:`fairseq_compgen.scoring.exact_match` (run
fairseq-generate without ``--post-process`` or with it: already-removed subwords are left alone; but text whose
subword-nmt units fairseq removed is still Moses-tokenized, and ``auto`` cannot tell it from detokenized text: it is
scored as it is and labelled so). ``--expected-count N`` (``fairseq-compgen eval`` passes the subset's size): fail
unless exactly N sentences are scored, so that sentences fairseq-generate skipped are never left out in silence.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Iterable, List, Optional, Sequence

from fairseq_compgen.scoring import Scorer, read_generate_output, register
from fairseq_compgen.scoring.exact_match import ScoringError, _ids, parse_generate_output, run_cli, write_json


def remove_bpe(text: str, kind: str) -> str:
    if kind == "auto":
        kind = "sentencepiece" if "\u2581" in text else ("subword_nmt" if "@@" in text else "none")
    if kind == "sentencepiece":
        return "".join(text.split()).replace("\u2581", " ").strip()
    if kind == "subword_nmt":
        return (text + " ").replace("@@ ", "").rstrip()
    if kind == "none":
        return text
    raise ValueError(f"unknown subword scheme {kind!r}")


def read_pairs(lines: Iterable[str], source: str = "<generate output>"):
    """(ids, hyps, refs) as strings of tokens, every id with both a T- and an H- line."""
    refs, hyps = parse_generate_output(lines, source=source)
    missing = sorted(set(refs) ^ set(hyps))
    if missing:
        raise ScoringError(f"{source}: id(s) without both a T- and an H- line: {_ids(missing)}")
    if not refs:
        raise ScoringError(f"{source}: no T-/H- lines found (was fairseq-generate run with --quiet?)")
    ids = sorted(refs)
    return ids, [" ".join(hyps[i]) for i in ids], [" ".join(refs[i]) for i in ids]


def score(hyps: List[str], refs: List[str], remove: str = "auto", detok: str = "auto", lang: str = "en",
          tokenized: bool = False) -> dict:
    import sacrebleu
    from sacrebleu.metrics import BLEU

    subword = remove
    if subword == "auto":
        sample = " ".join(refs[:100] + hyps[:100])
        subword = "sentencepiece" if "\u2581" in sample else ("subword_nmt" if "@@" in sample else "none")
    hyps = [remove_bpe(h, subword) for h in hyps]
    refs = [remove_bpe(r, subword) for r in refs]
    if tokenized:
        detok = "none"
    elif detok == "auto":
        detok = "moses" if subword == "subword_nmt" else "none"
    if detok == "moses":
        from sacremoses import MosesDetokenizer

        md = MosesDetokenizer(lang=lang)
        hyps = [md.detokenize(h.split()) for h in hyps]
        refs = [md.detokenize(r.split()) for r in refs]
    elif detok != "none":
        raise ValueError(f"unknown detokenizer {detok!r}")
    metric = BLEU(tokenize="none" if tokenized else "13a")
    res = metric.corpus_score(hyps, [refs])
    if tokenized:
        label = "tokenized BLEU (tokenize=none, on whitespace tokens)"
    elif subword == "none" and detok == "none":
        # no subword marks: text detokenized already, or Moses-tokenized text whose BPE fairseq-generate's
        # --remove-bpe removed; the scorer cannot tell which, so the label says what was scored
        label = "BLEU (sacrebleu, on the text as decoded: no subword marks found, nothing detokenized)"
    else:
        label = "detokenized BLEU (sacrebleu)"
    return {"bleu": res.score, "label": label, "signature": str(metric.get_signature()), "n": len(hyps),
            "subword": subword, "detok": detok, "str": str(res), "sacrebleu_version": sacrebleu.__version__,
            **({"moses_lang": lang} if detok == "moses" else {})}  # sacrebleu's signature does not say it


# a language pair as our MT preps name their folders (OUT/de-en, OUT/en-fr, OUT/en-ne: source-target)
_PAIR = re.compile(r"^([a-z]{2,3})-([a-z]{2,3})$")


def target_language(data: Path) -> Optional[str]:
    """The target language of a prepared MT folder, for the Moses detokenizer: DATA's own name or its parent's
    when it is a source-target pair (`prep iwslt14` writes de-en/bin, `prep noun_adj` en-fr/bin), else None."""
    for folder in (Path(data), Path(data).parent):
        m = _PAIR.match(folder.resolve().name)
        if m:
            return m.group(2)
    return None


def eval_argv(generated: Path, data: Path, subset: str, n: int) -> List[str]:
    """`fairseq-compgen eval`'s call: the subset's size, and the target language where DATA's path names it (a
    French target detokenized as English keeps "l' an", which moves BLEU)."""
    lang = target_language(data)
    return [str(generated), "--expected-count", str(n), *(["--lang", lang] if lang else [])]


def main(argv: Optional[Sequence[str]] = None) -> dict:
    p = argparse.ArgumentParser(description="sacrebleu BLEU of fairseq-generate output (detokenized by default).")
    p.add_argument("generate_log", help="fairseq-generate output (or a run's eval/SUBSET.outputs.gz); '-' for stdin")
    p.add_argument("--remove-bpe", default="auto", choices=("auto", "none", "sentencepiece", "subword_nmt"))
    p.add_argument("--detok", default="auto", choices=("auto", "none", "moses"))
    p.add_argument("--lang", default="en", help="target language for the Moses detokenizer (default en; "
                   "`fairseq-compgen eval` passes the target of DATA's language pair, e.g. fr for en-fr/bin)")
    p.add_argument("--tokenized", action="store_true",
                   help="TOKENIZED BLEU (tokenize=none, no detokenization); FLoRes reports En->Ne/Si so after "
                        "the Indic NLP tokenizer, which is not applied here")
    p.add_argument("--json", dest="json_out", help="write the result as JSON here")
    p.add_argument("--expected-count", type=int, help="fail unless exactly this many sentences are scored")
    args = p.parse_args(argv)
    lines, source = read_generate_output(args.generate_log)
    ids, hyps, refs = read_pairs(lines, source)
    if args.expected_count is not None and len(ids) != args.expected_count:  # e.g. fairseq-generate skipped some
        raise ScoringError(f"{source}: {len(ids)} sentences scored, expected {args.expected_count}")
    result = score(hyps, refs, args.remove_bpe, args.detok, args.lang, args.tokenized)
    print(f"{result['label']}: {result['bleu']:.2f} on {result['n']} sentences"
          + (f" (Moses detokenizer: {args.lang})" if result["detok"] == "moses" else ""))
    print(f"signature: {result['signature']}")
    print(result["str"])
    if args.json_out:
        write_json(args.json_out, result)
    return result


register(Scorer(
    name="bleu", key="bleu", label="BLEU", paper='Post (2018), "A Call for Clarity in Reporting BLEU Scores"',
    help="sacrebleu BLEU, detokenized by default (--tokenized: tokenized BLEU)",
    main=main, eval_argv=eval_argv,
))

if __name__ == "__main__":
    run_cli(main)
