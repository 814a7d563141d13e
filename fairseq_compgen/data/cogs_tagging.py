"""Prepare COGS as sequence tagging (Ontañón et al. 2022, "Making Transformers
Solve Compositional Tasks", ACL, Section 4.5.1).

COGS: Kim & Linzen (2020), EMNLP.  Every sentence token gets 5 tags
(below), written as aligned text files:

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

COGS as sequence tagging: logical form -> 5 tags per input token, and back.

    Santiago Ontañón, Joshua Ainslie, Vaclav Cvicek, Zachary Fisher. 2022.
    "Making Transformers Solve Compositional Tasks". ACL 2022 (arXiv:2108.04378),
    Section 4.5.1, Figure 3 and Table 5.  COGS: Kim & Linzen
    (2020), "COGS: A Compositional Generalization Challenge Based on Semantic
    Interpretation", EMNLP.

Every whitespace token of the sentence (including the final ".") gets 5 tags
(:class:`Tags`, one list per tag, aligned with the tokens):

* ``parent``: index of the parent token, -1 for none;
* ``role``: relation to the parent (a COGS role such as ``agent``, ``theme``,
  ``recipient``, ``xcomp``, ``ccomp``, or ``PP_NOUN`` / ``PREP``), "" for none;
* ``category``: ``CNOUN``, ``PNOUN``, ``VERB`` or "";
* ``noun_type``: ``DEF`` (``*``-prefixed clause) or ``INDEF`` for common nouns;
* ``verb_name``: the predicate lemma of a verb (``help`` for "helped").

Example (Fig. 1): "A rose was helped by a dog ." -> rose(1): parent 3, theme,
CNOUN, INDEF; helped(3): parent -1, VERB, verb_name help; dog(6): parent 3,
agent, CNOUN, INDEF; every other tag empty.  :func:`from_tags` rebuilds
``rose ( x _ 1 ) AND help . theme ( x _ 3 , x _ 1 ) AND help . agent ( x _ 3 , x _ 6 ) AND dog ( x _ 6 )``.

Rules (written from the paper's description, not from the released code):
definite noun clauses first, ``* n ( x _ i )`` joined by `` ; ``; then every
other clause joined by `` AND ``, sorted by (first argument index, second
argument index or -1): indefinite nouns, ``n . nmod . p ( x _ a , x _ b )``
(b has role PP_NOUN with parent = the preposition token, the preposition has
role PREP with parent = a), verb roles ``v . r ( x _ v , ARG )`` (proper nouns
printed by name, indexed by their token position), and for each ``xcomp`` the
removed ``inf . agent ( x _ k , AGENT-of-matrix-verb )``.

Primitive examples (one word): the paper's tags carry only the category (and
verb name), which cannot rebuild a verb's ``LAMBDA`` frame.  Deviation, so
that every example round-trips: a primitive verb's ``role`` tag holds its
frame, e.g. ``agent:b+theme:a`` for
``LAMBDA a . LAMBDA b . LAMBDA e . touch . agent ( e , b ) AND touch . theme ( e , a )``.

    python -m fairseq_compgen.data.cogs_tagging check FILE.tsv...   # round trip counts
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from fairseq_compgen.data import cogs
from fairseq_compgen.data.dataset import Dataset

FIELDS = ("parent", "role", "category", "noun_type", "verb_name")
NOT_PNOUN = {"A", "An", "The", "TV"}


class TaggingError(ValueError):
    """A logical form that the tagging formulation cannot represent (or malformed tags)."""


@dataclass
class Tags:
    parent: List[int]
    role: List[str]
    category: List[str]
    noun_type: List[str]
    verb_name: List[str]

    @classmethod
    def empty(cls, n: int) -> "Tags":
        return cls([-1] * n, [""] * n, [""] * n, [""] * n, [""] * n)

    def __len__(self) -> int:
        return len(self.parent)

    def rows(self) -> List[Tuple[int, str, str, str, str]]:
        return list(zip(self.parent, self.role, self.category, self.noun_type, self.verb_name))


def _set(tags: Tags, name: str, i: int, value, where: str) -> None:
    cur = getattr(tags, name)[i]
    empty = -1 if name == "parent" else ""
    if cur != empty and cur != value:
        raise TaggingError(f"{where}: token {i} gets two {name} tags ({cur!r} and {value!r})")
    getattr(tags, name)[i] = value


def _parse_args(toks: List[str], where: str) -> List[str]:
    """``( x _ 1 , Emma )`` tokens -> ['x_1', 'Emma'] (x-variables kept as 'x_<i>')."""
    if len(toks) < 3 or toks[0] != "(" or toks[-1] != ")":
        raise TaggingError(f"{where}: expected '( args )', got {' '.join(toks)!r}")
    return ["".join(a.split()) for a in " ".join(toks[1:-1]).split(",")]


def _index(arg: str, sentence: List[str], used: Dict[str, int], where: str) -> int:
    if arg.startswith("x_"):
        return int(arg[2:])
    pos = [i for i, t in enumerate(sentence) if t == arg]
    if not pos:
        raise TaggingError(f"{where}: proper noun {arg!r} is not in the sentence")
    return pos[0] if len(pos) == 1 else pos[min(used.get(arg, 0), len(pos) - 1)]


def _noun(w: str) -> str:
    """The noun predicate of a token: COGS writes "TV" as ``tv``."""
    return "tv" if w == "TV" else w


def _arg(i: int, sentence: List[str], tags: Tags) -> str:
    return sentence[i] if tags.category[i] == "PNOUN" else f"x _ {i}"


def _primitive_tags(word: str, lf: str) -> Tags:
    tags = Tags.empty(1)
    n_lambda = lf.split().count("LAMBDA")
    if n_lambda == 0:
        tags.category[0] = "PNOUN"
    elif n_lambda == 1:
        tags.category[0] = "CNOUN"
    else:
        tags.category[0] = "VERB"
        body = lf.split(" . ", n_lambda)[-1]  # after the LAMBDA prefixes
        frame = []
        for clause in body.split(" AND "):
            t = clause.split()
            # verb . role ( e , v )
            tags.verb_name[0] = t[0]
            frame.append(f"{t[2]}:{t[6]}")
        tags.role[0] = "+".join(frame)
    return tags


def _primitive_lf(word: str, tags: Tags) -> str:
    cat = tags.category[0]
    if cat == "PNOUN":
        return word
    if cat == "CNOUN":
        return f"LAMBDA a . {word} ( a )"
    if cat == "VERB":
        frame = [x.split(":") for x in tags.role[0].split("+") if x]
        variables = sorted({v for _, v in frame})
        verb = tags.verb_name[0]
        prefix = " ".join(f"LAMBDA {v} ." for v in variables + ["e"])
        return prefix + " " + " AND ".join(f"{verb} . {r} ( e , {v} )" for r, v in frame)
    raise TaggingError(f"primitive {word!r}: no category")


def to_tags(sentence: str, lf: str, primitive: Optional[bool] = None, where: str = "<example>") -> Tags:
    """Logical form -> tags.  ``primitive`` defaults to 'the sentence is one word'."""
    words = sentence.split()
    if primitive is None:
        primitive = len(words) == 1
    if primitive:
        return _primitive_tags(words[0], lf)
    tags = Tags.empty(len(words))
    for i, w in enumerate(words):
        if w[:1].isupper() and w not in NOT_PNOUN:
            tags.category[i] = "PNOUN"
    lf = " ".join(lf.split())
    chunks = lf.split(" AND ")
    head = chunks[0].split(" ; ")
    clauses = [(c, True) for c in head[:-1]] + [(c, False) for c in [head[-1]] + chunks[1:]]
    role_clauses = []  # (verb index, verb lemma, role, arg)
    used: Dict[str, int] = {}
    for text, definite in clauses:
        t = text.split()
        if definite:
            if t[0] != "*":
                raise TaggingError(f"{where}: expected '* noun ( x _ i )' before ';', got {text!r}")
            t = t[1:]
        paren = t.index("(") if "(" in t else -1
        if paren < 0:
            raise TaggingError(f"{where}: clause without arguments: {text!r}")
        pred, args = t[:paren], _parse_args(t[paren:], where)
        if len(pred) == 1 and len(args) == 1:  # noun ( x _ i )
            i = _index(args[0], words, used, where)
            _set(tags, "category", i, "CNOUN", where)
            _set(tags, "noun_type", i, "DEF" if definite else "INDEF", where)
            if _noun(words[i]) != pred[0]:
                raise TaggingError(f"{where}: noun {pred[0]!r} is not the token {words[i]!r} at {i}")
        elif len(pred) == 5 and pred[1] == "." and pred[2] == "nmod" and pred[3] == "." and len(args) == 2:
            a, b = (_index(x, words, used, where) for x in args)
            preps = [k for k in range(a + 1, b) if words[k] == pred[4]]
            if not preps:
                raise TaggingError(f"{where}: preposition {pred[4]!r} not between tokens {a} and {b}")
            p = preps[0]
            _set(tags, "parent", b, p, where)
            _set(tags, "role", b, "PP_NOUN", where)
            _set(tags, "parent", p, a, where)
            _set(tags, "role", p, "PREP", where)
        elif len(pred) == 3 and pred[1] == "." and len(args) == 2:
            v = _index(args[0], words, used, where)
            role_clauses.append((v, pred[0], pred[2], args[1]))
        else:
            raise TaggingError(f"{where}: unknown clause {text!r}")
    # drop the redundant agent of each infinitive (xcomp): it equals the matrix verb's agent
    agents = {v: arg for v, _, r, arg in role_clauses if r == "agent"}
    redundant = set()
    for v, _, r, arg in role_clauses:
        if r == "xcomp":
            k = _index(arg, words, used, where)
            if k in agents and agents.get(v) == agents[k]:
                redundant.add((k, "agent"))
    for v, lemma, r, arg in role_clauses:
        _set(tags, "category", v, "VERB", where)
        _set(tags, "verb_name", v, lemma, where)
        if (v, r) in redundant:
            continue
        k = _index(arg, words, used, where)
        if not arg.startswith("x_"):
            used[arg] = used.get(arg, 0) + 1
        _set(tags, "parent", k, v, where)
        _set(tags, "role", k, r, where)
    return tags


def from_tags(sentence: str, tags: Tags) -> str:
    """Tags -> logical form (deterministic; raises TaggingError on tags that do not describe one)."""
    words = sentence.split()
    if len(words) != len(tags):
        raise TaggingError(f"{len(words)} tokens but {len(tags)} tags")
    outside = [i for i, p in enumerate(tags.parent) if not -1 <= p < len(words)]
    if outside:
        raise TaggingError(f"token {outside[0]}: parent {tags.parent[outside[0]]} names no token of the sentence")
    if len(words) == 1 and tags.parent[0] == -1 and tags.category[0] in ("PNOUN", "CNOUN", "VERB") and (
        tags.category[0] != "VERB" or ":" in tags.role[0] or tags.role[0] == ""
    ) and not tags.noun_type[0]:
        return _primitive_lf(words[0], tags)
    definite = []
    keyed: List[Tuple[int, int, str]] = []
    agent_of: Dict[int, int] = {}
    for i in range(len(words)):
        if tags.role[i] == "agent" and tags.parent[i] >= 0:
            agent_of[tags.parent[i]] = i
    for i, w in enumerate(words):
        if tags.category[i] == "CNOUN":
            if tags.noun_type[i] == "DEF":
                definite.append(f"* {_noun(w)} ( x _ {i} )")
            else:
                keyed.append((i, -1, f"{_noun(w)} ( x _ {i} )"))
        p, r = tags.parent[i], tags.role[i]
        if p < 0 or not r or r == "PREP":
            continue
        if r == "PP_NOUN":
            a = tags.parent[p]
            if tags.role[p] != "PREP" or a < 0:
                raise TaggingError(f"token {i}: PP_NOUN whose parent {p} is not a PREP with a parent")
            keyed.append((a, i, f"{_noun(words[a])} . nmod . {words[p]} ( x _ {a} , {_arg(i, words, tags)} )"))
            continue
        verb = tags.verb_name[p]
        if not verb:
            raise TaggingError(f"token {i}: role {r!r} but parent {p} has no verb name")
        keyed.append((p, i, f"{verb} . {r} ( x _ {p} , {_arg(i, words, tags)} )"))
        if r == "xcomp" and p in agent_of:
            if not tags.verb_name[i]:
                raise TaggingError(f"token {i}: xcomp without a verb name")
            ag = agent_of[p]
            keyed.append((i, ag, f"{tags.verb_name[i]} . agent ( x _ {i} , {_arg(ag, words, tags)} )"))
    body = " AND ".join(c for _, _, c in sorted(keyed, key=lambda x: (x[0], x[1])))
    out = " ; ".join(definite)
    if definite and body:
        return out + " ; " + body
    return out or body


# ----------------------------------------------------------------------------- text form of the tags

EMPTY = "_"


def tags_to_lines(tags: Tags) -> Dict[str, str]:
    """One space-separated line per field ('_' for an empty tag), aligned with the source tokens."""
    return {
        "parent": " ".join(str(p) for p in tags.parent),
        **{f: " ".join(x or EMPTY for x in getattr(tags, f)) for f in FIELDS[1:]},
    }


def tags_from_lines(lines: Dict[str, str]) -> Tags:
    cols = {f: lines[f].split() for f in FIELDS}
    n = {len(v) for v in cols.values()}
    if len(n) != 1:
        raise TaggingError(f"tag lines of different lengths: { {f: len(v) for f, v in cols.items()} }")
    try:
        parent = [int(x) for x in cols["parent"]]
    except ValueError:
        raise TaggingError(f"parent tags must be integers, got {lines['parent']!r}") from None
    return Tags(parent, *[[("" if x == EMPTY else x) for x in cols[f]] for f in FIELDS[1:]])


def round_trip_report(examples: Sequence[Tuple[str, str, str]], source: str = "<examples>") -> dict:
    """{'n', 'ok', 'failures': [(line, reason)]} for (sentence, lf, category) examples."""
    ok = 0
    failures = []
    for lineno, (src, lf, cat) in enumerate(examples, start=1):
        where = f"{source}:{lineno}"
        try:
            tags = to_tags(src, lf, primitive=(cat == "primitive"), where=where)
            back = from_tags(src, tags)
        except TaggingError as e:
            failures.append((lineno, str(e)))
            continue
        if back == " ".join(lf.split()):
            ok += 1
        else:
            failures.append((lineno, f"{where}: reconstructed {back!r}"))
    return {"n": len(examples), "ok": ok, "failures": failures}


def main(argv: Optional[Sequence[str]] = None) -> int:
    from fairseq_compgen.data.cogs import read_tsv

    p = argparse.ArgumentParser(description="COGS tagging (Ontañón et al. 2022, §4.5.1): round-trip check.")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="logical form -> tags -> logical form on COGS TSV files")
    c.add_argument("tsv", nargs="+", type=Path)
    args = p.parse_args(argv)
    bad = 0
    for path in args.tsv:
        rep = round_trip_report(read_tsv(path), str(path))
        print(f"{path}: {rep['ok']}/{rep['n']} round trip exactly")
        for _, reason in rep["failures"][:10]:
            print(f"  {reason}")
        bad += rep["n"] - rep["ok"]
    return 1 if bad else 0



# ---------------------------------------------------------------------------
# fairseq-compgen prep cogs_tagging
# ---------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument("--cogs-dir", type=Path, help="local copy of the COGS data/ folder (else downloaded)")
    p.add_argument("--train", default="train", choices=cogs.TRAIN_FILES)
    p.add_argument("--no-count-check", action="store_true",
                   help="only warn when the counts or gen categories differ from the published statistics")


def prepare_tags(args: argparse.Namespace) -> Dict[str, int]:
    """Write the tag files, gen.cat and the dictionaries of `fairseq-compgen prep cogs_tagging` (staged)."""
    from fairseq_compgen.data.binarize import count_checker, nonempty_checker
    from fairseq_compgen.data.io import DataError, staged_files

    data = cogs.load(args.train, args.cogs_dir)
    counts = {subset: len(examples) for subset, examples in data.items()}
    nonempty_checker("COGS tagging")(counts)
    count_checker(cogs.expected_counts(args.train), "COGS tagging", strict=not args.no_count_check)(counts)
    cogs.check_categories([c for _, _, c in data["gen"]], strict=not args.no_count_check)
    stems = {"train": args.train, **cogs.SUBSET_FILES}
    files: Dict[str, str] = {}
    for subset, examples in data.items():
        cols = {k: [] for k in ("src", "lf", *FIELDS)}
        source = str((args.cogs_dir or Path("<download>")) / f"{stems[subset]}.tsv")
        for lineno, (src, lf, cat) in enumerate(examples, start=1):
            try:
                tags = to_tags(src, lf, primitive=(cat == "primitive"), where=f"{source}:{lineno}")
                if from_tags(src, tags) != lf:
                    raise TaggingError("tags do not reconstruct the logical form")
            except TaggingError as e:
                raise DataError(source, lineno, f"a taggable COGS example ({e})", src) from None
            cols["src"].append(src)
            cols["lf"].append(lf)
            for k, v in tags_to_lines(tags).items():
                cols[k].append(v)
        for k, lines in cols.items():
            files[f"{subset}.{k}"] = "\n".join(lines) + "\n"
        if subset == "gen":
            files["gen.cat"] = "\n".join(c for _, _, c in examples) + "\n"
    files.update(dictionaries(files, list(data)))
    with staged_files(args.out, "prep cogs_tagging") as stage:  # every file replaced together, or none
        for name, text in files.items():
            (stage / name).write_text(text, encoding="utf-8")
    print(f"COGS tagging: wrote {args.out} ({', '.join(f'{k} {v}' for k, v in counts.items())})")
    return counts


def dictionaries(files: Dict[str, str], subsets) -> Dict[str, str]:
    """``dict.src.txt`` and ``dict.<tag>.txt`` (fairseq's "symbol count" format) over the given subsets."""
    import io

    from fairseq.data import Dictionary

    out = {}
    for name in ("src", *FIELDS[1:]):  # parent is a position, not a symbol
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


DATASET = Dataset(run=prepare_tags, add_arguments=add_arguments, shared_options=False, dataset_json=False,
                  urls=[cogs.COGS_RAW_URL + "{train,train_100,dev,test,gen}.tsv"])


if __name__ == "__main__":
    sys.exit(main())
