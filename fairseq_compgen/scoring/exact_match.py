"""Sequence-level exact-match accuracy of fairseq-generate output, overall and per category.

Exact match (the whole output sequence equals the reference) is the metric of
SCAN, Lake & Baroni (2018), "Generalization without systematicity: On the
compositional skills of sequence-to-sequence recurrent networks", ICML, and of
the length-cutoff experiments of Csordás, Irie & Schmidhuber (2021), "The Devil
is in the Detail: Simple Tricks Improve Systematic Generalization of
Transformers", EMNLP.

    python -m fairseq_compgen.scoring.exact_match GENERATE_LOG \
        [--categories FILE] [--json OUT.json] [--expected-count N]

GENERATE_LOG is what fairseq-generate prints (``-`` reads stdin; a gzip file, such as
the outputs a run keeps in eval/SUBSET.outputs.gz, is read decompressed): the
``T-<id>\\t<reference>`` and ``H-<id>\\t<score>\\t<hypothesis>`` lines are used
(the first H of an id when several beams were printed); other lines (S-, D-,
P-, A-, logging, the "Generate test with beam=..." footer) are ignored.
Every id with a reference must have a hypothesis and vice versa.  (fairseq
prints an unknown reference token as ``<<unk>>`` and an unknown hypothesis
token as ``<unk>``, so a reference with an unknown word never matches.)

The categories file has one category per line; line k (0-based) is the
category of example id k.

Every result also counts exact match per reference length in tokens
(``per_length``), the x axis of the length-generalization figures (e.g.
Csordás et al. 2021, SCAN length; Ruoss et al. 2023): ``fairseq-compgen
aggregate --by-length SUBSET`` tabulates and plots it over seeds.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Union

from fairseq_compgen.data.io import DataError, atomic_write_text, read_text_lines
from fairseq_compgen.errors import UsageError
from fairseq_compgen.scoring import Scorer, read_generate_output, register

Tokens = Union[str, Sequence[str]]

_LINE_RE = re.compile(r"^([A-Z])-(\d+)\t(.*)$")


class ScoringError(UsageError):
    """The generate output cannot be scored (missing hypothesis/reference, count mismatch...)."""


def _tokens(x: Tokens) -> List[str]:
    return x.split() if isinstance(x, str) else list(x)


def exact_match(hyp_tokens: Tokens, ref_tokens: Tokens) -> bool:
    """True iff the hypothesis has exactly the reference's tokens, in order (same length).

    Strings are split on whitespace; sequences are compared as they are.
    """
    return _tokens(hyp_tokens) == _tokens(ref_tokens)


def parse_generate_output(lines: Iterable[str], source: str = "<generate output>"):
    """Returns ``(refs, hyps)``: dicts id -> token list, from T- and (first) H- lines."""
    refs: Dict[int, List[str]] = {}
    hyps: Dict[int, List[str]] = {}
    ref_line: Dict[int, int] = {}
    for lineno, raw in enumerate(lines, start=1):
        line = raw.rstrip("\n").rstrip("\r")
        m = _LINE_RE.match(line)
        if m is None:
            continue
        kind, idx, rest = m.group(1), int(m.group(2)), m.group(3)
        if kind == "T":
            if idx in refs:
                raise DataError(
                    source, lineno,
                    f"one T- line per id, but id {idx} already had one at line {ref_line[idx]} "
                    "(several generate logs concatenated?)",
                    line,
                )
            refs[idx] = rest.split()
            ref_line[idx] = lineno
        elif kind == "H":
            score, sep, hyp = rest.partition("\t")
            try:
                float(score)
            except ValueError:
                raise DataError(source, lineno, "expected 'H-<id>\\t<score>\\t<hypothesis>'", line) from None
            if idx not in hyps:  # nbest > 1: the first one is the best
                hyps[idx] = hyp.split()
    return refs, hyps


def read_categories(path) -> List[str]:
    """One category per line (trailing empty lines allowed)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"categories file (one category per example id) not found: {path}")
    lines = "".join(read_text_lines(path, "one category per line")).split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    cats = []
    for lineno, line in enumerate(lines, start=1):
        cat = line.strip()
        if not cat:
            raise DataError(path, lineno, "expected a category name (one per line, aligned with example ids)", line)
        cats.append(cat)
    return cats


def score_generate_output(
    lines: Iterable[str],
    categories: Optional[Sequence[str]] = None,
    expected_count: Optional[int] = None,
    source: str = "<generate output>",
) -> dict:
    """Exact-match accuracy of fairseq-generate output.

    Returns ``{"n", "correct", "accuracy", "per_category": {cat: {"n", "correct", "accuracy"}},
    "per_length": {reference length: {"n", "correct", "accuracy"}}}`` (``per_category`` is empty without
    categories; ``per_length``'s keys are the reference's token counts as strings, as JSON needs: read them as
    numbers, since a JSON file written with sorted keys puts "10" before "9").  Raises ScoringError
    naming the ids when a reference has no hypothesis or the reverse, when the
    count differs from ``expected_count``, or when the categories do not line
    up with the ids.
    """
    refs, hyps = parse_generate_output(lines, source=source)
    no_hyp = sorted(set(refs) - set(hyps))
    no_ref = sorted(set(hyps) - set(refs))
    if no_hyp:
        raise ScoringError(f"{source}: {len(no_hyp)} id(s) with a reference (T-) but no hypothesis (H-): {_ids(no_hyp)}")
    if no_ref:
        raise ScoringError(f"{source}: {len(no_ref)} id(s) with a hypothesis (H-) but no reference (T-): {_ids(no_ref)}")
    n = len(refs)
    if n == 0:
        raise ScoringError(f"{source}: no T-/H- lines found (was fairseq-generate run with --quiet?)")
    if expected_count is not None and n != expected_count:
        raise ScoringError(f"{source}: {n} examples scored, expected {expected_count}")
    if categories is not None:
        if len(categories) != n:
            raise ScoringError(f"{source}: {n} examples scored but {len(categories)} categories given")
        outside = [i for i in refs if i >= len(categories)]
        if outside:
            raise ScoringError(f"{source}: id(s) without a category (ids must be 0..{len(categories) - 1}): {_ids(sorted(outside))}")

    correct = 0
    per_cat: Dict[str, Dict[str, int]] = {}
    per_len: Dict[int, Dict[str, int]] = {}
    for idx in sorted(refs):
        ok = exact_match(hyps[idx], refs[idx])
        correct += ok
        groups = [per_len.setdefault(len(refs[idx]), {"n": 0, "correct": 0})]
        if categories is not None:
            groups.append(per_cat.setdefault(categories[idx], {"n": 0, "correct": 0}))
        for c in groups:
            c["n"] += 1
            c["correct"] += ok
    return {
        "n": n,
        "correct": correct,
        "accuracy": correct / n,
        "per_category": _rates(sorted(per_cat.items())),
        "per_length": _rates((str(k), c) for k, c in sorted(per_len.items())),
    }


def rescore(lines: Iterable[str], result: dict, source: str, recorded_in: str) -> dict:
    """Exact match of the kept outputs `lines` counted again (score_generate_output); ScoringError unless it gives
    the n and correct that `result` (the file `recorded_in`) records: the outputs it was scored from."""
    counted = score_generate_output(lines, source=source)
    if (counted["n"], counted["correct"]) != (result.get("n"), result.get("correct")):
        raise ScoringError(f"{source}: {counted['correct']} of {counted['n']} exactly right, but {recorded_in} "
                           f"records {result.get('correct')} of {result.get('n')}: expected the outputs it was "
                           "scored from")
    return counted


def _rates(groups: Iterable) -> Dict[str, Dict[str, float]]:
    """(name, {"n", "correct"}) pairs -> {name: {"n", "correct", "accuracy"}}, in the order given."""
    return {name: {"n": c["n"], "correct": c["correct"], "accuracy": c["correct"] / c["n"]} for name, c in groups}


def _ids(ids: List[int], limit: int = 20) -> str:
    shown = ", ".join(str(i) for i in ids[:limit])
    return shown + (f", ... ({len(ids) - limit} more)" if len(ids) > limit else "")


def format_table(result: dict) -> str:
    rows = [(cat, c["n"], c["correct"], c["accuracy"]) for cat, c in result["per_category"].items()]
    rows.append(("overall", result["n"], result["correct"], result["accuracy"]))
    width = max(len("category"), *(len(r[0]) for r in rows))
    out = [f"{'category':<{width}} | {'n':>7} | {'correct':>7} | {'accuracy':>8}"]
    out.append("-" * len(out[0]))
    for cat, n, c, acc in rows:
        out.append(f"{cat:<{width}} | {n:>7} | {c:>7} | {100 * acc:>7.2f}%")
    return "\n".join(out)


def main(argv: Optional[Sequence[str]] = None) -> dict:
    p = argparse.ArgumentParser(description="Exact-match accuracy of fairseq-generate output.")
    p.add_argument("generate_log", help="fairseq-generate output (e.g. generate-test.txt, or a run's eval/SUBSET.outputs.gz); '-' for stdin")
    p.add_argument("--categories", help="one category per line, line k = category of id k")
    p.add_argument("--json", dest="json_out", help="write the result as JSON here (atomically)")
    p.add_argument("--expected-count", type=int, help="fail unless exactly this many examples are scored")
    p.add_argument("--errors", type=int, default=0, metavar="N",
                   help="also print the first N wrong examples (by id): source, reference, hypothesis, category")
    args = p.parse_args(argv)
    if args.errors < 0:
        raise UsageError(f"--errors {args.errors}: expected a number of examples >= 0")

    categories = read_categories(args.categories) if args.categories else None
    lines, source = read_generate_output(args.generate_log)
    result = score_generate_output(lines, categories, args.expected_count, source=source)
    print(format_table(result))
    if args.errors:
        print(format_errors(lines, args.errors, categories, source))
    if args.json_out:
        write_json(args.json_out, result)
    return result


def format_errors(lines: Sequence[str], limit: int, categories: Optional[Sequence[str]] = None,
                  source: str = "<generate output>") -> str:
    """The first `limit` wrong examples (by id) of scored generate output `lines`, with their source (S- line),
    reference, hypothesis and category: what to read first when a model fails (e.g. from a run's kept
    eval/SUBSET.outputs.gz, without its checkpoint)."""
    refs, hyps = parse_generate_output(lines, source=source)
    sources = {}
    for line in lines:
        m = _LINE_RE.match(line.rstrip("\r\n"))
        if m and m.group(1) == "S":
            sources.setdefault(int(m.group(2)), m.group(3))
    wrong = [i for i in sorted(refs) if i in hyps and not exact_match(hyps[i], refs[i])]
    out = [f"wrong: {len(wrong)} of {len(refs)}; the first {min(limit, len(wrong))} by id"]
    for i in wrong[:limit]:
        cat = f" [{categories[i]}]" if categories is not None and i < len(categories) else ""
        out += [f"  id {i}{cat}", f"    source:     {sources.get(i, '(no S- line)')}",
                f"    reference:  {' '.join(refs[i])}", f"    hypothesis: {' '.join(hyps[i])}"]
    return "\n".join(out)


def write_json(path, result: dict) -> None:
    """The scorers' JSON output, written atomically."""
    atomic_write_text(path, json.dumps(result, indent=2, sort_keys=True) + "\n")


def run_cli(main) -> None:
    """Entry point shared by the scorers: a data or scoring error becomes one line on stderr and exit code 1."""
    try:
        main()
    except (ScoringError, DataError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


def eval_argv(generated: Path, data: Path, subset: str, n: int) -> List[str]:
    """Every example of the subset scored once, per category where DATA/SUBSET.cat exists."""
    cats = data / f"{subset}.cat"
    return [str(generated), "--expected-count", str(n), *(["--categories", str(cats)] if cats.is_file() else [])]


register(Scorer(
    name="exact_match", key="accuracy", label="exact-match accuracy",
    paper="Lake & Baroni (2018), ICML; Csordás, Irie & Schmidhuber (2021), EMNLP",
    help="sequence-level exact-match accuracy, overall and per category (--categories)",
    main=main, eval_argv=eval_argv,
    logged_as=("accuracy", "exact_match"),  # the cogs_tagging task's validations log it as `exact_match`
))

if __name__ == "__main__":
    run_cli(main)
