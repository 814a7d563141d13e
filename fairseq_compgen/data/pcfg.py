"""Prepare PCFG SET splits as fairseq text and binary data.

PCFG SET: Hupkes, Dankers, Mul & Bruni (2020), "Compositionality Decomposed:
How do Neural Networks Generalise?", JAIR.  Productivity and systematicity
splits as in Csordás, Irie & Schmidhuber (2021) (add --joined-dictionary for
their shared vocabulary); ``pcfgset`` is the IID basis corpus.

    fairseq-compgen prep pcfg --split productivity --out data/pcfg [--pcfg-dir DIR] \
        [--joined-dictionary] [--no-binarize] [--no-count-check] [--no-validate]

Reads ``<split>/{train,test}.{src,tgt}`` (pcfgset: train/dev/test) from
``--pcfg-dir`` (layout of am-i-compositional's data/pcfgset/) or downloads
them; every target is checked against the PCFG SET interpreter
(below), a mismatch stops with file:line.  Writes
``OUT/<split>/{train,test}.{src,tgt}`` and binaries in ``OUT/<split>/bin/``.
Counts are checked against the published statistics (Csordás et al. 2021, Table 10: productivity 81,010 / 11,333;
systematicity 82,168 / 10,175).

An interpreter of its programs, reading and validating the official splits:

    Dieuwke Hupkes, Verna Dankers, Mathijs Mul and Elia Bruni. 2020.
    "Compositionality Decomposed: How do Neural Networks Generalise?". JAIR 67.
    https://github.com/i-machine-think/am-i-compositional (data/pcfgset)

A source line is a program in prefix notation over sequences of symbols
(tokens that are not function names, e.g. ``A1``, ``B12``).  Grammar::

    expr  -> UNARY expr | BINARY expr , expr | symbol+

parsed by recursive descent: a symbol sequence runs up to the next ``,`` or
the end, so the first argument of a binary function ends at the comma that
follows it (``append append A , B , C`` = append(append(A, B), C)).
Semantics (x, y: sequences; derived from the PCFG SET paper and checked on
every pair of the released dev and productivity test sets)::

    copy x            = x
    reverse x         = x reversed
    shift x           = x[1:] + x[:1]        (first symbol moved to the end)
    echo x            = x + x[-1:]           (last symbol repeated)
    swap_first_last x = x[-1:] + x[1:-1] + x[:1]  (x when len(x) == 1)
    repeat x          = x + x
    append x , y      = x + y
    prepend x , y     = y + x
    remove_first x , y  = y
    remove_second x , y = x

Splits: ``productivity`` and ``systematicity`` (train/test), and the IID basis
corpus ``pcfgset`` (train/dev/test; dev -> ``valid``).  There is no
generalization validation set.  Prepared data is validated:
every target must equal the interpreter's output (DataError naming file:line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from fairseq_compgen.data import download
from fairseq_compgen.data.dataset import Dataset, Examples, Split
from fairseq_compgen.data.io import DataError, read_data_lines
from fairseq_compgen.errors import MissingFileError, UsageError

UNARY = {
    "copy": lambda x: x,
    "reverse": lambda x: x[::-1],
    "shift": lambda x: x[1:] + x[:1],
    "echo": lambda x: x + x[-1:],
    "swap_first_last": lambda x: x[-1:] + x[1:-1] + x[:1] if len(x) > 1 else x,
    "repeat": lambda x: x + x,
}
BINARY = {
    "append": lambda x, y: x + y,
    "prepend": lambda x, y: y + x,
    "remove_first": lambda x, y: y,
    "remove_second": lambda x, y: x,
}
FUNCTIONS = frozenset(UNARY) | frozenset(BINARY)
SEPARATOR = ","

PCFG_RAW_URL = "https://raw.githubusercontent.com/i-machine-think/am-i-compositional/master/data/pcfgset/"
HINT = "if there is no network, pass --pcfg-dir pointing to a local copy of am-i-compositional's data/pcfgset/"
# split -> our subset -> official file stem, relative to data/pcfgset/
SPLITS: Dict[str, Dict[str, str]] = {
    "productivity": {"train": "productivity/train", "test": "productivity/test"},
    "systematicity": {"train": "systematicity/train", "test": "systematicity/test"},
    "pcfgset": {"train": "pcfgset/train", "valid": "pcfgset/dev", "test": "pcfgset/test"},
}
# Csordás, Irie & Schmidhuber (2021), Table 10
EXPECTED = {
    "productivity": {"train": 81010, "test": 11333},
    "systematicity": {"train": 82168, "test": 10175},
}

Pair = Tuple[str, str]


class ProgramError(ValueError):
    """A source line that is not a PCFG SET program."""


def _parse(tokens: Sequence[str], pos: int) -> Tuple[List[str], int]:
    """Evaluate the expression starting at ``pos``; returns (value, position after it)."""
    if pos >= len(tokens):
        raise ProgramError("unexpected end of program (missing argument)")
    tok = tokens[pos]
    if tok in UNARY:
        x, pos = _parse(tokens, pos + 1)
        return UNARY[tok](x), pos
    if tok in BINARY:
        x, pos = _parse(tokens, pos + 1)
        if pos >= len(tokens) or tokens[pos] != SEPARATOR:
            raise ProgramError(f"{tok!r} needs two arguments separated by ','")
        y, pos = _parse(tokens, pos + 1)
        return BINARY[tok](x, y), pos
    if tok == SEPARATOR:
        raise ProgramError("empty argument before ','")
    start = pos
    while pos < len(tokens) and tokens[pos] != SEPARATOR and tokens[pos] not in FUNCTIONS:
        pos += 1
    if pos < len(tokens) and tokens[pos] in FUNCTIONS:
        raise ProgramError(f"function {tokens[pos]!r} inside a symbol sequence")
    return list(tokens[start:pos]), pos


def interpret(program: str) -> str:
    """The target (space-separated symbols) of a PCFG SET source line; ProgramError if malformed."""
    tokens = program.split()
    try:
        value, pos = _parse(tokens, 0)
        if pos != len(tokens):
            raise ProgramError(f"unexpected {tokens[pos]!r} after a complete program")
    except ProgramError as e:
        raise ProgramError(f"not a PCFG SET program: {program[:200]!r} ({e})") from None
    return " ".join(value)



def read_pairs(src_path, tgt_path, validate: bool = True) -> List[Pair]:
    """Aligned lines of a ``.src``/``.tgt`` pair of files.

    With ``validate``, each target must be what :func:`interpret` computes from
    its source; otherwise DataError names the target file and line.
    """
    src_path, tgt_path = Path(src_path), Path(tgt_path)
    for p in (src_path, tgt_path):
        if not p.is_file():
            raise MissingFileError(f"PCFG SET file not found: {p}")
    srcs, tgts = read_data_lines(src_path, complete=True), read_data_lines(tgt_path, complete=True)
    if len(srcs) != len(tgts):
        raise DataError(
            src_path if len(srcs) < len(tgts) else tgt_path, min(len(srcs), len(tgts)) + 1,
            f"expected as many lines as its pair file ({len(srcs)} sources, {len(tgts)} targets)",
        )
    pairs = []
    for lineno, (s, t) in enumerate(zip(srcs, tgts), start=1):
        s, t = " ".join(s.split()), " ".join(t.split())
        if validate:
            try:
                want = interpret(s)
            except ProgramError as e:
                raise DataError(src_path, lineno, f"expected a PCFG SET program ({e})", s) from None
            if want != t:
                raise DataError(
                    tgt_path, lineno, f"target differs from the interpretation of the source ({want[:80]!r})", t
                )
        pairs.append((s, t))
    return pairs


def load(split: str, pcfg_dir: Optional[Path] = None, cache_dir: Optional[Path] = None,
         validate: bool = True) -> Dict[str, List[Pair]]:
    """Subset -> pairs of ``split``, from ``pcfg_dir`` (layout of data/pcfgset/) or downloaded."""
    if split not in SPLITS:
        raise UsageError(f"unknown PCFG SET split {split!r}; known: {sorted(SPLITS)}")
    out = {}
    for subset, stem in SPLITS[split].items():
        paths = []
        for ext in ("src", "tgt"):
            rel = f"{stem}.{ext}"
            if pcfg_dir is not None:
                p = Path(pcfg_dir) / rel
                if not p.is_file():
                    raise MissingFileError(
                        f"PCFG SET {split} {subset} file not found: {p} (--pcfg-dir must have the layout of "
                        "am-i-compositional's data/pcfgset/)"
                    )
            else:
                p = download.fetch(PCFG_RAW_URL + rel, "pcfg", rel, cache_dir=cache_dir, hint=HINT)
            paths.append(p)
        # an empty line is found when the text is written: named by these files, not by the output folder
        out[subset] = Examples(read_pairs(*paths, validate=validate), source=f"{paths[0]} / {paths[1].name}")
    return out


# ---------------------------------------------------------------------------
# fairseq-compgen prep pcfg
# ---------------------------------------------------------------------------


def add_arguments(p) -> None:
    p.add_argument("--split", action="append", required=True, choices=sorted(SPLITS), help="split (repeatable)")
    p.add_argument("--pcfg-dir", type=Path, default=None, help="local copy of data/pcfgset/; default: download")
    p.add_argument("--no-validate", action="store_true", help="do not check targets with the interpreter")


def read(args):
    """One :class:`Split` per PCFG SET split of ``--split``."""
    for split in dict.fromkeys(args.split):
        yield Split(load(split, pcfg_dir=args.pcfg_dir, validate=not args.no_validate), folder=split,
                    expected=EXPECTED.get(split),
                    title=f"PCFG SET split {split}" + ("" if args.no_validate else " (targets checked by the interpreter)"))


DATASET = Dataset(
    read=read,
    add_arguments=add_arguments,
    urls=[PCFG_RAW_URL + "{productivity,systematicity}/{train,test}.{src,tgt}", PCFG_RAW_URL + "{train,dev,test}.{src,tgt}"],
    dict_from="train",
    dataset_json=False,
)
