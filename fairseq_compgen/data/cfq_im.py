"""CFQ-im: the intermediate representation of CFQ SPARQL queries, and its exact inverse.

    Santiago Ontañón, Joshua Ainslie, Vaclav Cvicek, Zachary Fisher. 2022.
    "Making Transformers Solve Compositional Tasks". ACL 2022 (arXiv:2108.04378),
    Section 4.5.2 and Table 6.  The idea follows Herzig et al.
    (2021), "Unlocking compositional generalization in pre-trained models using
    intermediate representations": triples may have the form
    ``(entity list) - (relation list) - (entity list)``, so the model no longer
    has to spell out Cartesian products ("who directed and acted in M1 and M2"
    is one clause instead of four).

Input: a preprocessed CFQ query (``ns:`` dropped, ``m.`` -> ``m_``; see
fairseq_compgen/data/cfq.py), i.e. ``PREFIX { c1 . c2 . ... } `` where the
prefix ends with ``{`` and the clauses are separated by `` . ``::

    SELECT DISTINCT ?x0 WHERE { ?x0 a film.director . ?x0 film.actor.film M1 .
      ?x0 film.actor.film M2 . ?x0 film.director.film M1 . ?x0 film.director.film M2 }

:func:`to_im` (the paper's ``simplify_cfq_output``, reimplemented from the spec):

1. ``rewrite_cartesian``: scan the clauses left to right.  A clause ``s r o`` of
   exactly 3 tokens with ``r != "a"`` collects every later 3-token clause with
   the same relation ``r``: subjects L and objects R in first-seen order.  If
   every pair of L x R occurs, they all become one group ``(L, [r], R)`` at the
   position of the first one; otherwise the clause alone becomes ``([s], [r],
   [o])``.  Type clauses (``?x a T``) and clauses that are not 3 tokens
   (``FILTER ( ?x0 != M1 )``) pass through unchanged.  (One deliberate detail:
   an exact duplicate of an already grouped clause is not consumed but stays in
   the list, so duplicates survive the round trip; CFQ only duplicates FILTERs.)
2. ``merge_cartesians``: groups with identical L and identical R are merged
   into ``(L, [r1, r2, ...], R)`` at the position of the first.
3. A group is written ``( L... ) ( r... ) ( R... )``; clauses re-joined with `` . ``.

The example above becomes::

    SELECT DISTINCT ?x0 WHERE { ?x0 a film.director .
      ( ?x0 ) ( film.actor.film film.director.film ) ( M1 M2 ) }

:func:`from_im` expands every group into its Cartesian product
``s r o`` for s in L, r in rels, o in R, and sorts all clauses (CFQ writes the
clauses of a query in sorted order: checked on every MCD1 query), which
restores the query exactly: ``from_im(to_im(q)) == q`` on all 119,679 MCD1
queries (tests/test_intermediate.py).  Because of the sort, a hypothesis whose
expanded clauses are a permutation of the reference's restores to the
reference: scoring the restored SPARQL with exact match is order-insensitive
within the clause list (like the released code's ``cfq_equivalent_output``,
but keeping duplicates).

Command line::

    python -m fairseq_compgen.data.cfq_im restore GENERATE_LOG > restored.txt
    python -m fairseq_compgen.scoring.exact_match restored.txt
    python -m fairseq_compgen.data.cfq_im stats QUERY_FILE...   # round trip + lengths

``restore`` rewrites the T-, H- and D- lines of a fairseq-generate log from
CFQ-im to SPARQL and copies every other line; a hypothesis that is not
well-formed CFQ-im is kept as it is (it then cannot match) and counted on stderr.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, TextIO, Tuple, Union

from fairseq_compgen.data.io import DataError

SEP = " . "
Group = Tuple[List[str], List[str], List[str]]  # (subjects, relations, objects)
Item = Union[str, Group]  # a pass-through clause, or a group


class ImError(ValueError):
    """A string that is not a well-formed CFQ query or CFQ-im query."""


def _split(query: str) -> Tuple[str, List[str], str]:
    """``PREFIX { body } POSTFIX`` -> (prefix incl. '{', clauses, postfix from '}')."""
    toks = query.split()
    if "{" not in toks or "}" not in toks:
        raise ImError(f"expected 'PREFIX {{ clauses }}', got: {query[:80]!r}")
    i = toks.index("{")
    j = len(toks) - 1 - toks[::-1].index("}")
    if j < i:
        raise ImError(f"'}}' before '{{' in: {query[:80]!r}")
    prefix = " ".join(toks[: i + 1])
    postfix = " ".join(toks[j:])
    clauses: List[str] = []
    cur: List[str] = []
    for t in toks[i + 1 : j] + ["."]:
        if t != ".":
            cur.append(t)
        elif cur:
            clauses.append(" ".join(cur))
            cur = []
        elif j > i + 1:
            raise ImError(f"empty clause ('.' doubled or at an end) in: {query[:80]!r}")
    return prefix, clauses, postfix


def _join(prefix: str, clauses: Sequence[str], postfix: str) -> str:
    return " ".join([prefix] + ([SEP.join(clauses)] if clauses else []) + [postfix])


def _groupable(toks: List[str]) -> bool:
    return len(toks) == 3 and toks[1] != "a" and toks[0] != "("


def rewrite_cartesian(clauses: Sequence[str]) -> List[Item]:
    """Step 1: group clauses of one relation whose subjects x objects form a full Cartesian product."""
    rest = [c.split() for c in clauses]
    out: List[Item] = []
    while rest:
        toks = rest[0]
        if not _groupable(toks):
            out.append(" ".join(toks))
            rest = rest[1:]
            continue
        rel = toks[1]
        subj: List[str] = []
        obj: List[str] = []
        pairs = set()
        taken = []
        for k, t in enumerate(rest):
            if _groupable(t) and t[1] == rel and (t[0], t[2]) not in pairs:
                pairs.add((t[0], t[2]))
                taken.append(k)
                if t[0] not in subj:
                    subj.append(t[0])
                if t[2] not in obj:
                    obj.append(t[2])
        if len(pairs) == len(subj) * len(obj):
            out.append((subj, [rel], obj))
            drop = set(taken)
            rest = [t for k, t in enumerate(rest) if k not in drop]
        else:
            out.append(([toks[0]], [rel], [toks[2]]))
            rest = rest[1:]
    return out


def merge_cartesians(items: Sequence[Item]) -> List[Item]:
    """Step 2: merge groups with identical subject and object lists (relations in first-seen order)."""
    out: List[Item] = []
    where = {}
    for it in items:
        if isinstance(it, str):
            out.append(it)
            continue
        key = (tuple(it[0]), tuple(it[2]))
        if key in where:
            out[where[key]][1].extend(it[1])
        else:
            where[key] = len(out)
            out.append((list(it[0]), list(it[1]), list(it[2])))
    return out


def _render(it: Item) -> str:
    if isinstance(it, str):
        return it
    return " ".join(f"( {' '.join(part)} )" for part in it)


def to_im(query: str) -> str:
    """Full (preprocessed) CFQ SPARQL -> CFQ-im.  See the module docstring for the format."""
    prefix, clauses, postfix = _split(query)
    return _join(prefix, [_render(it) for it in merge_cartesians(rewrite_cartesian(clauses))], postfix)


_GROUP_RE = re.compile(r"^\( ([^()]+) \) \( ([^()]+) \) \( ([^()]+) \)$")


def expand(item: str) -> List[str]:
    """One CFQ-im clause -> its SPARQL clauses (a group -> its Cartesian product, anything else -> itself)."""
    if not item.startswith("("):
        return [item]
    m = _GROUP_RE.match(item)
    if m is None:
        raise ImError(f"expected a group '( S... ) ( R... ) ( O... )', got: {item[:80]!r}")
    subj, rels, obj = (g.split() for g in m.groups())
    return [f"{s} {r} {o}" for r in rels for s in subj for o in obj]


def from_im(im: str) -> str:
    """CFQ-im -> full SPARQL: expand the groups and sort the clauses (CFQ's canonical order)."""
    prefix, items, postfix = _split(im)
    clauses = [c for it in items for c in expand(" ".join(it.split()))]
    return _join(prefix, sorted(clauses), postfix)


# ----------------------------------------------------------------------------- command line

_LOG_RE = re.compile(r"^([THD])-(\d+)\t(.*)$")


def restore_log(lines: Iterable[str], out: TextIO, source: str = "<generate output>") -> Tuple[int, int]:
    """Rewrite T-/H-/D- lines of a fairseq-generate log from CFQ-im to SPARQL.

    Returns (lines restored, hypotheses left as they were because malformed).
    A malformed *reference* (T- line) is a DataError naming source:line.
    """
    restored = bad = 0
    for lineno, raw in enumerate(lines, start=1):
        line = raw.rstrip("\n").rstrip("\r")
        m = _LOG_RE.match(line)
        if m is None:
            out.write(line + "\n")
            continue
        kind, idx, rest = m.groups()
        head, text = ("", rest) if kind == "T" else (rest.partition("\t")[0] + "\t", rest.partition("\t")[2])
        try:
            text = from_im(text)
            restored += 1
        except ImError as e:
            if kind == "T":
                raise DataError(source, lineno, f"reference is not CFQ-im ({e})", line) from None
            bad += 1
        out.write(f"{kind}-{idx}\t{head}{text}\n")
    return restored, bad


def length_stats(queries: Iterable[str]) -> dict:
    """Round trip and lengths: counts, mean/max tokens and mean clauses of full and CFQ-im queries, 'reduction'.

    Note that the spec's format wraps every relation clause in parentheses
    (``( s ) ( r ) ( o )``, 6 extra tokens), so the number of *clauses* falls
    while the number of *tokens* can grow.
    """
    n = ok = tok_full = tok_im = groups = 0
    max_full = max_im = cl_full = cl_im = 0
    first_failure = None
    for q in queries:
        im = to_im(q)
        n += 1
        if from_im(im) == q:
            ok += 1
        elif first_failure is None:
            first_failure = n
        lf, li = len(q.split()), len(im.split())
        cl_full += len(_split(q)[1])
        cl_im += len(_split(im)[1])
        tok_full += lf
        tok_im += li
        max_full, max_im = max(max_full, lf), max(max_im, li)
        groups += int(lf != li)
    return {
        "n": n, "round_trip_ok": ok, "first_failure": first_failure,
        "mean_tokens_full": tok_full / max(n, 1), "mean_tokens_im": tok_im / max(n, 1),
        "max_tokens_full": max_full, "max_tokens_im": max_im,
        "reduction": 1 - tok_im / max(tok_full, 1), "changed": groups,
        "mean_clauses_full": cl_full / max(n, 1), "mean_clauses_im": cl_im / max(n, 1),
    }


def _read_queries(path: Path) -> List[str]:
    if not path.is_file():
        raise FileNotFoundError(f"query file not found: {path}")
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for lineno, line in enumerate(lines, start=1):
        try:
            _split(line)
        except ImError as e:
            raise DataError(path, lineno, str(e), line) from None
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description="CFQ-im (Ontañón et al. 2022, §4.5.2): restore generate logs, or stats.")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("restore", help="CFQ-im generate log -> SPARQL generate log on stdout")
    r.add_argument("generate_log", help="fairseq-generate output; '-' for stdin")
    s = sub.add_parser("stats", help="round trip and length reduction on query files (one query a line)")
    s.add_argument("query_files", nargs="+", type=Path)
    args = p.parse_args(argv)
    if args.cmd == "restore":
        if args.generate_log == "-":
            n, bad = restore_log(sys.stdin, sys.stdout, "<stdin>")
        else:
            path = Path(args.generate_log)
            if not path.is_file():
                raise FileNotFoundError(f"fairseq-generate output not found: {path}")
            with open(path, encoding="utf-8") as f:
                n, bad = restore_log(f, sys.stdout, str(path))
        print(f"cfq_im restore: {n} lines restored, {bad} malformed hypotheses kept as they were", file=sys.stderr)
        return 0
    failed = 0
    for path in args.query_files:
        st = length_stats(_read_queries(path))
        print(
            f"{path}: {st['round_trip_ok']}/{st['n']} round trip; mean tokens {st['mean_tokens_full']:.2f} -> "
            f"{st['mean_tokens_im']:.2f} ({-100 * st['reduction']:+.1f}%); max {st['max_tokens_full']} -> "
            f"{st['max_tokens_im']}; mean clauses {st['mean_clauses_full']:.2f} -> {st['mean_clauses_im']:.2f}; "
            f"{st['changed']} queries changed"
            + ("" if st["first_failure"] is None else f"; first failure at line {st['first_failure']}")
        )
        failed += st["n"] - st["round_trip_ok"]
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (DataError, FileNotFoundError, ImError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
