"""Prepare Mathematics dataset modules as fairseq text and binary data (character level).

Mathematics dataset: Saxton, Grefenstette, Hill & Kohli (2019), "Analysing
Mathematical Reasoning Abilities of Neural Models", ICLR.  Modules
arithmetic__add_or_sub and numbers__place_value as in Csordás, Irie &
Schmidhuber (2021).

    fairseq-compgen prep mathematics --module arithmetic__add_or_sub --out data/math \
        [--math-dir DIR | --math-tarball mathematics_dataset-v1.0.tar.gz] [--workers N] \
        [--joined-dictionary] [--no-binarize]

Without --math-dir, only the needed members are extracted from the 2.3 GB
release tarball (downloaded when --math-tarball is not given) in one streaming
pass, into ``$FAIRSEQ_COMPGEN_CACHE/math/mathematics_dataset-v1.0/`` (or
``--extract-dir``), with progress on stderr.  Writes
``OUT/<module>/{train,valid,gen}.{src,tgt}``: train = train-easy + train-medium
+ train-hard, valid = interpolate (IID), gen = extrapolate ``<module>_big``;
one token per character, a space written as ``_``.  Counts are printed (not
checked: Table 10's counts are those of the v1.0 release after the authors'
processing; a regenerated copy has different draws).

The two modules: reading, streaming extraction and character tokens.

    David Saxton, Edward Grefenstette, Felix Hill and Pushmeet Kohli. 2019.
    "Analysing Mathematical Reasoning Abilities of Neural Models". ICLR 2019.
    https://github.com/deepmind/mathematics_dataset

As in Csordás, Irie & Schmidhuber (2021): modules ``arithmetic__add_or_sub``
and ``numbers__place_value``; ``train`` = train-easy + train-medium +
train-hard (concatenated in that order, nothing removed), ``valid`` (IID) =
``interpolate/<module>.txt``, ``gen`` = ``extrapolate/<module>_big.txt``.
Files hold a question and its answer on alternating lines.

Tokens are characters: every character is one token and a space is written
as the visible token ``_`` (:data:`SPACE`); a text that already contains
``_`` is refused, so the mapping can be inverted (:func:`detokenize`).
"""

from __future__ import annotations

import sys
import tarfile
import time
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from fairseq_compgen.data import download
from fairseq_compgen.data.dataset import Dataset, Split
from fairseq_compgen.data.io import DataError, read_data_lines, reading_archive, staged_path
from fairseq_compgen.errors import MissingFileError, UsageError

MATH_URL = "https://storage.googleapis.com/mathematics-dataset/mathematics_dataset-v1.0.tar.gz"
TAR_ROOT = "mathematics_dataset-v1.0"
HINT = "if there is no network, pass --math-tarball (a local copy) or --math-dir (an extracted folder)"
MODULES = ("arithmetic__add_or_sub", "numbers__place_value")
TRAIN_LEVELS = ("train-easy", "train-medium", "train-hard")
SPACE = "_"

Pair = Tuple[str, str]


def files_of(module: str) -> Dict[str, List[str]]:
    """Subset -> files (relative to the release root) of ``module``."""
    if module not in MODULES:
        raise UsageError(f"unknown Mathematics module {module!r}; supported: {MODULES}")
    return {
        "train": [f"{level}/{module}.txt" for level in TRAIN_LEVELS],
        "valid": [f"interpolate/{module}.txt"],
        "gen": [f"extrapolate/{module}_big.txt"],
    }


def char_tokens(text: str, where: str = "text") -> str:
    """``"1 + 2"`` -> ``"1 _ + _ 2"``: one token per character, a space as ``_``."""
    if SPACE in text:
        raise UsageError(f"{where}: contains {SPACE!r}, the token that stands for a space: {text[:80]!r}")
    return " ".join(SPACE if c == " " else c for c in text)


def detokenize(tokens: str) -> str:
    return "".join(" " if t == SPACE else t for t in tokens.split())


def read_pairs(path: Path) -> Iterator[Pair]:
    """(question, answer) of a file of alternating lines.

    An odd number of lines (a question without its answer), an empty line, invalid UTF-8 or a last line
    without its newline (a file cut short) raises DataError naming the file and line.
    """
    path = Path(path)
    lines = read_data_lines(path, "Mathematics file", complete=True)
    question = None
    lineno = 0
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            raise DataError(path, lineno, "expected a non-empty question or answer line", line)
        if question is None:
            question = line
        else:
            yield question, line
            question = None
    if question is not None:
        raise DataError(
            path, lineno,
            f"expected an answer after the question (questions and answers alternate; the file has "
            f"an odd number of lines, {lineno})",
            question,
        )


def tokenized_pairs(paths: Iterable[Path]) -> Iterator[Pair]:
    """Character-tokenized pairs of several files, in order; errors name file:line."""
    for path in paths:
        for k, (q, a) in enumerate(read_pairs(path)):
            tokens = []
            for lineno, line in ((2 * k + 1, q), (2 * k + 2, a)):  # the question's line, then the answer's
                try:
                    tokens.append(char_tokens(line))
                except ValueError as e:
                    raise DataError(path, lineno, f"expected no {SPACE!r} in a question or answer ({e})",
                                    line) from None
            yield tokens[0], tokens[1]


def load(module: str, math_dir: Path) -> Dict[str, Iterator[Pair]]:
    """Subset -> streamed character-tokenized pairs of ``module`` from an extracted release folder.

    Every needed file is checked to exist first (FileNotFoundError naming it).
    """
    math_dir = Path(math_dir)
    out = {}
    for subset, rels in files_of(module).items():
        paths = [math_dir / r for r in rels]
        for p in paths:
            if not p.is_file():
                raise MissingFileError(
                    f"Mathematics {module} {subset} file not found: {p} (--math-dir must have the layout of "
                    f"{TAR_ROOT}/: train-easy/, train-medium/, train-hard/, interpolate/, extrapolate/)"
                )
        out[subset] = tokenized_pairs(paths)
    return out


class _CountingReader:
    """A file wrapper counting the bytes read, for progress lines."""

    def __init__(self, f, total: int, label: str, every_s: float = 10.0):
        self.f, self.total, self.label, self.every_s = f, total, label, every_s
        self.n = 0
        self.t0 = self.last = time.monotonic()

    def read(self, size=-1):
        data = self.f.read(size)
        self.n += len(data)
        now = time.monotonic()
        if now - self.last > self.every_s:
            self.last = now
            pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
            print(f"  {self.label}: {self.n / 1e6:.0f} MB read{pct}, {now - self.t0:.0f} s", file=sys.stderr, flush=True)
        return data


def extract_members(tarball: Path, dest: Path, modules: Iterable[str] = MODULES) -> Path:
    """Extract only the files of ``modules`` from the release tarball into ``dest`` (one streaming pass).

    The tarball is read in 'r|gz' mode (no index, no full unpack); each
    member goes to a temporary name and is renamed into place.  Files already
    in ``dest`` are kept (rerun: nothing is read).  Returns ``dest``.
    """
    dest = Path(dest)
    wanted = {rel for m in modules for rels in files_of(m).values() for rel in rels}
    todo = {rel for rel in wanted if not (dest / rel).is_file()}
    if not todo:
        return dest
    tarball = Path(tarball)
    with open(tarball, "rb") as raw:
        reader = _CountingReader(raw, tarball.stat().st_size, f"scanning {tarball.name}")
        with reading_archive(tarball, download.redownload_hint(tarball)), \
                tarfile.open(fileobj=reader, mode="r|gz") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                parts = member.name.split("/")
                rel = "/".join(parts[1:]) if parts[0] == TAR_ROOT else member.name
                if rel not in todo:
                    continue
                with staged_path(dest / rel, hidden=True) as tmp:
                    src = tar.extractfile(member)
                    with open(tmp, "wb") as f:
                        while True:
                            chunk = src.read(1 << 20)
                            if not chunk:
                                break
                            f.write(chunk)
                todo.discard(rel)
                print(f"  extracted {member.name}", file=sys.stderr, flush=True)
                if not todo:
                    break
    if todo:
        raise MissingFileError(f"{tarball}: members not found: {sorted(f'{TAR_ROOT}/{r}' for r in todo)}")
    return dest


def download_tarball(cache_dir: Optional[Path] = None) -> Path:
    return download.fetch(MATH_URL, "math", f"{TAR_ROOT}.tar.gz", cache_dir=cache_dir, hint=HINT, progress=True)


# ---------------------------------------------------------------------------
# fairseq-compgen prep mathematics
# ---------------------------------------------------------------------------


def add_arguments(p) -> None:
    p.add_argument("--module", action="append", required=True, choices=list(MODULES) + ["all"],
                   help="module (repeatable; 'all' = both)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--math-dir", type=Path, help="extracted release folder (train-easy/, ..., extrapolate/)")
    src.add_argument("--math-tarball", type=Path, help="local mathematics_dataset-v1.0.tar.gz")
    p.add_argument("--extract-dir", type=Path, default=None,
                   help="where the needed tarball members go (default: the cache folder)")


def expand_modules(p, args) -> None:
    args.module = list(dict.fromkeys(m for x in args.module for m in (MODULES if x == "all" else [x])))


def read(args):
    """One :class:`Split` per module of ``--module``, streamed from the extracted files."""
    math_dir = args.math_dir
    if math_dir is None:
        tarball = args.math_tarball if args.math_tarball is not None else download_tarball()
        dest = args.extract_dir or download.default_cache_dir("math") / TAR_ROOT
        math_dir = extract_members(tarball, dest, args.module)
    for module in args.module:
        yield Split(load(module, math_dir), folder=module,
                    title=f"Mathematics {module} (character level, space = {SPACE!r})")


DATASET = Dataset(
    read=read,
    add_arguments=add_arguments,
    parsed=expand_modules,
    urls=[MATH_URL],
    dict_from="train",
    count_check=False,
    dataset_json=False,
)
