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
``--references FILE`` (``fairseq-compgen eval`` passes the subset's prepared ``DATA/../SUBSET.tgt`` where it exists):
the references are that text, not the T- lines, where fairseq-generate writes a word outside the target dictionary
as ``<<unk>>``; each line is checked against its T- line.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

from fairseq_compgen.data.io import read_data_lines
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


def read_pairs(lines: Iterable[str], source: str = "<generate output>", references: Optional[Path] = None):
    """(ids, hyps, refs) as strings of tokens, every id with both a T- and an H- line. The references are the T-
    lines, or with `references` that file's lines (one per example, in the subset's order: fairseq-generate's ids),
    each checked against its T- line (read_references)."""
    refs, hyps = parse_generate_output(lines, source=source)
    missing = sorted(set(refs) ^ set(hyps))
    if missing:
        raise ScoringError(f"{source}: id(s) without both a T- and an H- line: {_ids(missing)}")
    if not refs:
        raise ScoringError(f"{source}: no T-/H- lines found (was fairseq-generate run with --quiet?)")
    ids = sorted(refs)
    t_lines = [" ".join(refs[i]) for i in ids]
    if references is not None:
        t_lines = read_references(references, dict(zip(ids, t_lines)), source)
    return ids, [" ".join(hyps[i]) for i in ids], t_lines


UNK = "<<unk>>"  # how fairseq-generate writes a target word its dictionary does not hold (escape_unk)


def read_references(path: Path, t_lines: Dict[int, str], source: str) -> List[str]:
    """The references of the ids of `t_lines` from the subset's target text `path` (line id + 1), in id order.

    Why: fairseq-generate writes each T- line from the binarized target, so a word outside the target dictionary
    reads <<unk>> there and BLEU would be taken against a reference that is not the data's. Each line must be its
    T- line but for those words (compared as written, or with the text's subword marks removed when
    fairseq-generate removed them: --post-process); another file (a stale prep, another subset) is a ScoringError
    naming the line."""
    text = read_data_lines(path, "the subset's target text (references)")
    out = []
    for i, t_line in sorted(t_lines.items()):
        if i >= len(text):
            raise ScoringError(f"{path}: {len(text)} lines, but {source} has id {i}: expected one reference per "
                               f"example of the subset, in its order")
        line = text[i].strip()
        if not (_same_reference(t_line, line) or _same_reference(t_line, remove_bpe(line, "auto"))):
            raise ScoringError(f"{path}:{i + 1}: {line!r} is not the target of id {i} in {source} ({t_line!r}): "
                               f"expected the subset's target text as prepared with DATA (a stale file, or another "
                               f"subset's?)")
        out.append(line)
    return out


def _same_reference(t_line: str, line: str) -> bool:
    """Whether `line` is the T- line `t_line`, where each <<unk>> of a T- token stands for any characters."""
    t_tokens, tokens = t_line.split(), line.split()
    if len(t_tokens) != len(tokens):
        return False
    return all(t == w or (UNK in t and re.fullmatch(".+".join(map(re.escape, t.split(UNK))), w))
               for t, w in zip(t_tokens, tokens))


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
    """`fairseq-compgen eval`'s call: the subset's size; the target language where DATA's path names it (a
    French target detokenized as English keeps "l' an", which moves BLEU); the subset's target text as references
    where the prep left it beside DATA (OUT/<pair>/<subset>.tgt beside OUT/<pair>/bin: every MT prep here)."""
    lang = target_language(data)
    text = Path(data).parent / f"{subset}.tgt"
    return [str(generated), "--expected-count", str(n), *(["--lang", lang] if lang else []),
            *(["--references", str(text)] if text.is_file() else [])]


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
    p.add_argument("--references", type=Path,
                   help="the subset's target text, one reference per example in its order (as prepared: DATA/../"
                        "SUBSET.tgt, which `fairseq-compgen eval` passes where it exists); default: the T- lines, "
                        "where a word outside the target dictionary reads <<unk>>")
    args = p.parse_args(argv)
    lines, source = read_generate_output(args.generate_log)
    ids, hyps, refs = read_pairs(lines, source, args.references)
    if args.expected_count is not None and len(ids) != args.expected_count:  # e.g. fairseq-generate skipped some
        raise ScoringError(f"{source}: {len(ids)} sentences scored, expected {args.expected_count}")
    result = score(hyps, refs, args.remove_bpe, args.detok, args.lang, args.tokenized)
    result["references"] = str(args.references) if args.references else "T- lines"
    if not args.references:
        result["references_with_unk"] = sum(UNK in r for r in refs)
    print(f"{result['label']}: {result['bleu']:.2f} on {result['n']} sentences"
          + (f" (Moses detokenizer: {args.lang})" if result["detok"] == "moses" else ""))
    print(f"signature: {result['signature']}; references: {result['references']}"
          + (f" ({result['references_with_unk']} with <<unk>>)" if result.get("references_with_unk") else ""))
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
