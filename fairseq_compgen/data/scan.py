"""Prepare SCAN splits as fairseq text and binary data.

    fairseq-compgen prep scan --split length_cutoff_26 --out data/scan \
        [--scan-dir DIR] [--joined-dictionary] [--no-binarize] [--no-count-check]

Writes ``OUT/<split>/<subset>.src`` and ``.tgt`` (one example per line,
space-separated tokens), then binarizes them with fairseq-preprocess (``--padding-factor 1``: no filler
words in the dictionaries) into
``OUT/<split>/bin/`` (dictionaries built from ``train`` only), naming the
binary subsets like the text ones (train, valid, test, gen).  The binary
folder is built in a temporary folder and renamed into place at the end.
``--split all-generated`` prepares every rule-based split (no download).

SCAN (generation, interpretation, reading and splits) is the command -> action-sequence benchmark of

    Brenden M. Lake and Marco Baroni. 2018. "Generalization without
    systematicity: On the compositional skills of sequence-to-sequence
    recurrent networks". ICML 2018.  https://github.com/brendenlake/SCAN

The full data set (20,910 commands) is generated here from the phrase-structure
grammar and its interpretation functions (Lake & Baroni 2018, Fig. 6 and 7):

    C -> S and S | S after S | S
    S -> V twice | V thrice | V
    V -> D[1] opposite D[2] | D[1] around D[2] | D | U
    D -> U left | U right | turn left | turn right
    U -> walk | look | run | jump

(``D[1]``/``D[2]`` are the first/second word of a D, so ``walk left`` gives
``walk opposite left`` and ``turn left`` gives ``turn opposite left``.)

Splits defined by a rule are computed from the generated set:

* ``length``: train = outputs of at most 22 actions, test = the rest
  (Lake & Baroni 2018, experiment 2).
* ``addprim_jump`` / ``addprim_turn_left``: train = every command that does
  not use the primitive, plus the bare primitive command repeated so that it
  makes up 10% of the training lines (``round(n_without / 9)`` copies);
  test = every other command that uses the primitive (experiment 3).
* ``length_cutoff_<L>``: the length cutoff splits of

      Róbert Csordás, Kazuki Irie and Jürgen Schmidhuber. 2021. "The Devil is
      in the Detail: Simple Tricks Improve Systematic Generalization of
      Transformers". EMNLP 2021.

  all pairs with at most L output actions, shuffled with
  ``np.random.RandomState(1234).permutation`` and cut 90/10 into
  ``train``/``valid`` (``n_valid = int(0.1 * n)``), and ``gen`` = all pairs
  with more than L actions.

Splits drawn at random or by hand (simple, template splits) are read from the
official files, from a local copy (``scan_dir``, same layout as the
brendenlake/SCAN repository) or downloaded from GitHub.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from fairseq_compgen.data import download as _download
from fairseq_compgen.data.dataset import Dataset, Split
from fairseq_compgen.data.io import DataError, read_data_lines
from fairseq_compgen.errors import MissingFileError, UsageError

Pair = Tuple[str, str]

# ---------------------------------------------------------------------------
# Grammar and interpretation
# ---------------------------------------------------------------------------

PRIMITIVES = ("walk", "look", "run", "jump")  # U
DIRECTIONS = ("left", "right")
ACTION_OF = {"walk": "I_WALK", "look": "I_LOOK", "run": "I_RUN", "jump": "I_JUMP"}
TURN_OF = {"left": "I_TURN_LEFT", "right": "I_TURN_RIGHT"}
REPEATS = {"twice": 2, "thrice": 3}
CONJUNCTIONS = ("and", "after")

SOURCE_VOCAB = frozenset(
    PRIMITIVES + DIRECTIONS + ("turn", "opposite", "around") + tuple(REPEATS) + CONJUNCTIONS
)
TARGET_VOCAB = frozenset(ACTION_OF.values()) | frozenset(TURN_OF.values())


def _u_denotation(u: str) -> List[str]:
    return [ACTION_OF[u]]


def _d_phrases() -> List[Tuple[str, str]]:
    """All D as (first word, direction): ``U left``, ``U right``, ``turn left``, ``turn right``."""
    return [(u, d) for u in PRIMITIVES for d in DIRECTIONS] + [("turn", d) for d in DIRECTIONS]


def _d_denotation(first: str, direction: str) -> List[str]:
    # [U left] = I_TURN_LEFT [U];  [turn left] = I_TURN_LEFT
    acts = [TURN_OF[direction]]
    if first != "turn":
        acts += _u_denotation(first)
    return acts


def _v_denotation(words: Sequence[str]) -> List[str]:
    """Interpretation of a V phrase (list of words); KeyError/ValueError if not a V."""
    if len(words) == 1:  # V -> U
        if words[0] not in ACTION_OF:
            raise UsageError(f"{words[0]!r} is not a primitive (walk, look, run, jump)")
        return _u_denotation(words[0])
    if len(words) == 2:  # V -> D
        first, direction = words
        _check_d(first, direction)
        return _d_denotation(first, direction)
    if len(words) == 3:  # V -> D[1] opposite D[2] | D[1] around D[2]
        first, mod, direction = words
        _check_d(first, direction)
        if mod == "opposite":
            # [x opposite left] = [turn opposite left] [x] = I_TURN_LEFT I_TURN_LEFT [x]
            return [TURN_OF[direction]] + _d_denotation(first, direction)
        if mod == "around":
            # [x around left] = ([x left]) x 4
            return _d_denotation(first, direction) * 4
        raise UsageError(f"expected 'opposite' or 'around' as the 2nd word of {' '.join(words)!r}")
    raise UsageError(f"{' '.join(words)!r} is not a V phrase (1 to 3 words)")


def _check_d(first: str, direction: str) -> None:
    if first not in ACTION_OF and first != "turn":
        raise UsageError(f"expected a primitive or 'turn', got {first!r}")
    if direction not in TURN_OF:
        raise UsageError(f"expected 'left' or 'right', got {direction!r}")


def _v_phrases() -> List[Tuple[str, ...]]:
    """All V phrases in grammar order."""
    ds = _d_phrases()
    out: List[Tuple[str, ...]] = []
    out += [(first, "opposite", d) for first, d in ds]
    out += [(first, "around", d) for first, d in ds]
    out += [(first, d) for first, d in ds]
    out += [(u,) for u in PRIMITIVES]
    return out


def _s_phrases() -> List[Tuple[Tuple[str, ...], List[str]]]:
    """All S phrases (words, actions) in grammar order."""
    out = []
    for v in _v_phrases():
        acts = _v_denotation(v)
        out.append((v + ("twice",), acts * 2))
        out.append((v + ("thrice",), acts * 3))
        out.append((v, acts))
    return out


def generate_all() -> List[Pair]:
    """Every SCAN command with its action sequence, in a fixed (grammar) order.

    Returns 20,910 ``(command, actions)`` pairs of space-separated strings.
    """
    ss = [(" ".join(w), a) for w, a in _s_phrases()]
    pairs: List[Pair] = []
    for c1, a1 in ss:
        for c2, a2 in ss:
            pairs.append((f"{c1} and {c2}", " ".join(a1 + a2)))  # [x1 and x2] = [x1] [x2]
    for c1, a1 in ss:
        for c2, a2 in ss:
            pairs.append((f"{c1} after {c2}", " ".join(a2 + a1)))  # [x1 after x2] = [x2] [x1]
    for c, a in ss:
        pairs.append((c, " ".join(a)))
    return pairs


def _interpret_s(words: Sequence[str]) -> List[str]:
    if not words:
        raise UsageError("empty phrase")
    if words[-1] in REPEATS:
        return _v_denotation(words[:-1]) * REPEATS[words[-1]]
    return _v_denotation(words)


def interpret(command: str) -> str:
    """The action sequence (space-separated) of one SCAN command.

    Raises ValueError naming the command if it is not generated by the grammar.
    """
    words = command.split()
    try:
        conj = [i for i, w in enumerate(words) if w in CONJUNCTIONS]
        if len(conj) > 1:
            raise UsageError("more than one 'and'/'after'")
        if conj:
            i = conj[0]
            left, right = _interpret_s(words[:i]), _interpret_s(words[i + 1 :])
            acts = left + right if words[i] == "and" else right + left
        else:
            acts = _interpret_s(words)
    except (ValueError, KeyError) as e:
        raise UsageError(f"not a SCAN command: {command!r} ({e})") from None
    return " ".join(acts)


def output_length(actions: str) -> int:
    """Number of action tokens."""
    return len(actions.split())


# ---------------------------------------------------------------------------
# Reading the official files
# ---------------------------------------------------------------------------

_LINE_RE = re.compile(r"^IN:\s+(.*?)\s+OUT:\s+(.*?)\s*$")
_EXPECTED = "expected 'IN: <command> OUT: <actions>' with a non-empty command and output"


def read_scan_file(path, what: str = "SCAN data") -> List[Pair]:
    """Parse a SCAN file of ``IN: <command> OUT: <actions>`` lines.

    Empty lines at the end of the file are allowed; any other empty or
    malformed line raises :class:`DataError` naming the file and line.
    ``what`` says what the file was for, in the error for a missing file.
    """
    path = Path(path)
    lines = read_data_lines(path, what, complete=True)
    pairs: List[Pair] = []
    for lineno, line in enumerate(lines, start=1):
        m = _LINE_RE.match(line)
        if m is None:
            raise DataError(path, lineno, _EXPECTED, line)
        cmd, act = " ".join(m.group(1).split()), " ".join(m.group(2).split())
        if not cmd or not act or "OUT:" in cmd.split() or "IN:" in cmd.split():
            raise DataError(path, lineno, _EXPECTED, line)
        pairs.append((cmd, act))
    return pairs


def format_scan_line(pair: Pair) -> str:
    """The ``IN: ... OUT: ...`` line of a pair (the official file format)."""
    return f"IN: {pair[0]} OUT: {pair[1]}"


# Official files, relative to the root of https://github.com/brendenlake/SCAN
OFFICIAL_SPLITS: Dict[str, Dict[str, str]] = {
    "simple": {
        "train": "simple_split/tasks_train_simple.txt",
        "test": "simple_split/tasks_test_simple.txt",
    },
    "official_length": {
        "train": "length_split/tasks_train_length.txt",
        "test": "length_split/tasks_test_length.txt",
    },
    "official_addprim_jump": {
        "train": "add_prim_split/tasks_train_addprim_jump.txt",
        "test": "add_prim_split/tasks_test_addprim_jump.txt",
    },
    "official_addprim_turn_left": {
        "train": "add_prim_split/tasks_train_addprim_turn_left.txt",
        "test": "add_prim_split/tasks_test_addprim_turn_left.txt",
    },
    "around_right": {
        "train": "template_split/tasks_train_template_around_right.txt",
        "test": "template_split/tasks_test_template_around_right.txt",
    },
    "opposite_right": {
        "train": "template_split/tasks_train_template_opposite_right.txt",
        "test": "template_split/tasks_test_template_opposite_right.txt",
    },
    "jump_around_right": {
        "train": "template_split/tasks_train_template_jump_around_right.txt",
        "test": "template_split/tasks_test_template_jump_around_right.txt",
    },
    "right": {
        "train": "template_split/tasks_train_template_right.txt",
        "test": "template_split/tasks_test_template_right.txt",
    },
}

SCAN_RAW_URL = "https://raw.githubusercontent.com/brendenlake/SCAN/master/"

# Declared counts, subset -> examples: Lake & Baroni's release (the line counts of brendenlake/SCAN's split files,
# which the rule-based splits reproduce) and Csordás et al. (2021) Table 10 for the cutoff-26 split;
# tests/test_scan_data.py checks them against a local copy of the release and the generated splits. Splits not
# listed (the other template splits and cutoffs, without published counts) are printed, not checked.
DECLARED_COUNTS: Dict[str, Dict[str, int]] = {
    "simple": {"train": 16728, "test": 4182},
    "length": {"train": 16990, "test": 3920},
    "addprim_jump": {"train": 14670, "test": 7706},
    "addprim_turn_left": {"train": 21890, "test": 1208},
    "around_right": {"train": 15225, "test": 4476},
    "length_cutoff_26": {"train": 16458, "valid": 1828, "gen": 2624},
}


def declared_counts(split: str) -> Optional[Dict[str, int]]:
    """Subset -> declared examples of the split ``split`` (its ``official_`` copy included), or None."""
    counts = DECLARED_COUNTS.get(split[len("official_"):] if split.startswith("official_") else split)
    return None if counts is None else dict(counts)


def default_cache_dir() -> Path:
    """Where downloaded official files go: $FAIRSEQ_COMPGEN_CACHE/scan or ~/.cache/fairseq_compgen/scan."""
    return _download.default_cache_dir("scan")


def download_official_file(rel_path: str, cache_dir: Path, timeout: float = 60.0) -> Path:
    """Download ``SCAN_RAW_URL + rel_path`` into ``cache_dir/rel_path`` (temp name, then rename)."""
    return _download.download_url(
        SCAN_RAW_URL + rel_path,
        Path(cache_dir) / rel_path,
        hint="if there is no network, pass --scan-dir (scan_dir=...) pointing to a local copy of "
        "https://github.com/brendenlake/SCAN",
        timeout=timeout,
    )


def read_official_split(name: str, scan_dir=None, cache_dir=None) -> Dict[str, List[Pair]]:
    """Read an official split (train/test) from ``scan_dir`` or download it; every line is checked by the
    interpreter (:func:`check_by_interpreter`)."""
    if name not in OFFICIAL_SPLITS:
        raise UsageError(f"unknown official SCAN split {name!r}; known: {sorted(OFFICIAL_SPLITS)}")
    out = {}
    for subset, rel in OFFICIAL_SPLITS[name].items():
        what = f"SCAN official split {name!r} ({subset} set)"
        if scan_dir is not None:
            path = Path(scan_dir) / rel
            if not path.is_file():
                raise MissingFileError(
                    f"{what}: file not found: {path} (--scan-dir must have the layout of "
                    f"https://github.com/brendenlake/SCAN, i.e. contain {rel})"
                )
        else:
            path = download_official_file(rel, Path(cache_dir) if cache_dir else default_cache_dir())
        out[subset] = check_by_interpreter(path, read_scan_file(path, what=what))
    return out


def check_by_interpreter(path, pairs: List[Pair]) -> List[Pair]:
    """``pairs`` (read from ``path`` by :func:`read_scan_file`, line i+1 = pair i) if every command is one of the
    grammar and its actions are what :func:`interpret` gives; else DataError naming the file and line (a file
    cut mid-word, a token outside the grammar, a wrong action)."""
    for lineno, (cmd, act) in enumerate(pairs, start=1):
        try:
            ok = interpret(cmd) == act
            why = "actions that the SCAN grammar gives the command"
        except ValueError as e:
            ok, why = False, f"a command of the SCAN grammar ({e})"
        if not ok:
            raise DataError(path, lineno, why, format_scan_line((cmd, act)))
    return pairs


# ---------------------------------------------------------------------------
# Rule-based splits
# ---------------------------------------------------------------------------

LENGTH_SPLIT_MAX_TRAIN = 22
CUTOFF_LENGTHS = (22, 24, 25, 26, 27, 28, 30, 32, 33, 36, 40)
CUTOFF_SEED = 1234
ADDPRIM = {"jump": "jump", "turn_left": "turn left"}


def _uses(command: str, phrase: str) -> bool:
    """Whether ``phrase`` occurs as a contiguous run of whole words in ``command``."""
    return f" {phrase} " in f" {command} "


def length_split(pairs: Optional[List[Pair]] = None, max_train: int = LENGTH_SPLIT_MAX_TRAIN):
    pairs = generate_all() if pairs is None else pairs
    return {
        "train": [p for p in pairs if output_length(p[1]) <= max_train],
        "test": [p for p in pairs if output_length(p[1]) > max_train],
    }


def addprim_split(primitive: str, pairs: Optional[List[Pair]] = None):
    """Add-primitive split (Lake & Baroni 2018, experiment 3).

    train = commands not using ``primitive`` + the bare primitive command
    repeated ``round(n_without / 9)`` times, so that it is 10% of the training
    lines (for jump: 13,203 + 1,467 = 14,670, as in the official file);
    test = the other commands using the primitive.
    """
    phrase = ADDPRIM.get(primitive, primitive)
    pairs = generate_all() if pairs is None else pairs
    without = [p for p in pairs if not _uses(p[0], phrase)]
    bare = [p for p in pairs if p[0] == phrase]
    if len(bare) != 1:
        raise UsageError(f"{phrase!r} is not a bare SCAN command")
    test = [p for p in pairs if _uses(p[0], phrase) and p[0] != phrase]
    n_copies = int(round(len(without) / 9))
    return {"train": without + bare * n_copies, "test": test}


def length_cutoff_split(cutoff: int, pairs: Optional[List[Pair]] = None, seed: int = CUTOFF_SEED):
    """Length cutoff split of Csordás et al. (2021): train/valid (IID 90/10) and gen (> cutoff)."""
    pairs = generate_all() if pairs is None else pairs
    short = [p for p in pairs if output_length(p[1]) <= cutoff]
    long_ = [p for p in pairs if output_length(p[1]) > cutoff]
    order = np.random.RandomState(seed).permutation(len(short))
    n_valid = int(0.1 * len(short))
    n_train = len(short) - n_valid
    return {
        "train": [short[i] for i in order[:n_train]],
        "valid": [short[i] for i in order[n_train:]],
        "gen": long_,
    }


GENERATED_SPLITS = ("length", "addprim_jump", "addprim_turn_left") + tuple(
    f"length_cutoff_{L}" for L in CUTOFF_LENGTHS
)


def split_names() -> List[str]:
    """Every name ``build_split`` accepts."""
    return list(GENERATED_SPLITS) + list(OFFICIAL_SPLITS)


def build_split(name: str, scan_dir=None, cache_dir=None) -> Dict[str, List[Pair]]:
    """Subset name -> list of (command, actions) for the split ``name``.

    Rule-based splits (``length``, ``addprim_jump``, ``addprim_turn_left``,
    ``length_cutoff_<L>``) are generated; the others (``simple``,
    ``around_right``, ``opposite_right``, ``jump_around_right``, ``right``,
    and ``official_<x>`` copies of the rule-based ones) are read from
    ``scan_dir`` or downloaded.  Official and rule splits have subsets
    ``train``/``test``; cutoff splits have ``train``/``valid``/``gen``.
    """
    if name == "length":
        return length_split()
    if name in ("addprim_jump", "addprim_turn_left"):
        return addprim_split(name[len("addprim_") :])
    m = re.fullmatch(r"length_cutoff_(\d+)", name)
    if m:
        cutoff = int(m.group(1))
        if cutoff not in CUTOFF_LENGTHS:
            raise UsageError(f"unknown cutoff {cutoff} in {name!r}; Csordás et al. (2021) use {CUTOFF_LENGTHS}")
        return length_cutoff_split(cutoff)
    if name in OFFICIAL_SPLITS:
        return read_official_split(name, scan_dir=scan_dir, cache_dir=cache_dir)
    raise UsageError(f"unknown SCAN split {name!r}; known: {', '.join(split_names())}")


# ---------------------------------------------------------------------------
# fairseq-compgen prep scan
# ---------------------------------------------------------------------------


def add_arguments(p) -> None:
    p.add_argument("--split", required=True, help="SCAN split: all-generated, " + ", ".join(split_names()))
    p.add_argument(
        "--scan-dir", type=Path, default=None,
        help="local copy of https://github.com/brendenlake/SCAN (for the official splits); "
        "default: download the needed files",
    )


def check_split(p, args) -> None:
    if args.split != "all-generated" and args.split not in split_names():
        p.error(f"unknown split {args.split!r}; choose from all-generated, {', '.join(split_names())}")


def read(args):
    """One :class:`Split` per SCAN split of ``--split`` (every rule-based one for ``all-generated``)."""
    for split in list(GENERATED_SPLITS) if args.split == "all-generated" else [args.split]:
        yield Split(build_split(split, scan_dir=args.scan_dir), folder=split, title=f"SCAN split {split}",
                    expected=declared_counts(split))


DATASET = Dataset(
    read=read,
    add_arguments=add_arguments,
    parsed=check_split,
    urls=[SCAN_RAW_URL + "<file> (the files of OFFICIAL_SPLITS: simple_split/, length_split/, add_prim_split/, "
          "template_split/)"],
    dict_from="train",
    dataset_json=False,
)
