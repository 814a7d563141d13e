"""Prepare CFQ splits as fairseq text and binary data.

CFQ: Keysers et al. (2020), "Measuring Compositional Generalization: A
Comprehensive Method on Realistic Data", ICLR.  Splits MCD1/2/3 and the
output-length split (query_complexity), as in Csordás, Irie & Schmidhuber (2021).

    fairseq-compgen prep cfq --split mcd1 [--split mcd2 ...] --out data/cfq \
        [--cfq-tarball cfq1.1.tar.gz | --cfq-dir DIR | --preprocessed-dir DIR] \
        [--joined-dictionary] [--no-binarize] [--no-count-check] [--intermediate]

Source: ``cfq1.1.tar.gz`` (downloaded when no local source is given), read in
one streaming pass ('r|gz'; dataset.json parsed incrementally, progress on
stderr) with the google-research preprocessing (below);
or ``--cfq-dir``, the extracted ``cfq/`` folder; or ``--preprocessed-dir``, already
preprocessed ``{train,dev,test}.question.txt`` / ``.query.txt`` files of one split.
Writes ``OUT/<split>/{train,valid,test}.{src,tgt}`` (valid = CFQ's dev set, from
the generalization distribution) and binaries in ``OUT/<split>/bin/``.
Counts are checked against the published statistics (Csordás et al. 2021, Table 10).  ``--intermediate`` writes the
targets in the CFQ-im form of Ontañón et al. (2022) (fairseq_compgen/data/cfq_im.py) and declares in
``bin/dataset.json`` that `fairseq-compgen eval` scores them on the SPARQL they stand for (``--metric cfq_sparql``,
scoring/cfq_sparql.py); the in-loop ``accuracy`` compares the CFQ-im strings themselves (stricter: the order of
a group's members counts).

Streaming the official release, the standard preprocessing, and the splits:

    Daniel Keysers et al. 2020. "Measuring Compositional Generalization: A
    Comprehensive Method on Realistic Data". ICLR 2020.
    https://github.com/google-research/google-research/tree/master/cfq

The release ``cfq1.1.tar.gz`` holds ``cfq/dataset.json`` (a JSON list of about
240k records, about 2 GB) and ``cfq/splits/<split>.json`` (``{"trainIdxs": [...],
"devIdxs": [...], "testIdxs": [...]}``, indices into the list).  Source =
``questionPatternModEntities``, target = ``sparqlPatternModEntities``, with the
preprocessing of google-research ``cfq/preprocess.py`` (reimplemented exactly,
see :func:`tokenize_punctuation` and :func:`preprocess_sparql`):

* question: every ``string.punctuation`` character becomes a separate token
  (surrounded by spaces), then whitespace is collapsed;
* query: ``count(*)`` -> ``count ( * )``; then for every whitespace-separated
  token, a leading ``ns:`` is dropped and a leading ``m.`` becomes ``m_``
  (only at the start of a token: ``a/ns:b`` keeps its inner ``ns:``); tokens
  joined by single spaces, and a literal backslash-n replaced by a space.

Subsets: ``train`` (trainIdxs), ``valid`` (devIdxs: the dev set drawn from the
generalization distribution) and ``test`` (testIdxs).
"""

from __future__ import annotations

import codecs
import json
import string
import sys
import tarfile
import time
from pathlib import Path
from typing import BinaryIO, Dict, Iterator, List, Optional, Sequence, Tuple

from fairseq_compgen.data import download
from fairseq_compgen.data.dataset import Dataset, Split
from fairseq_compgen.data.io import DataError, decode_utf8, read_data_lines, reading_archive
from fairseq_compgen.errors import MissingFileError, UsageError

CFQ_URL = "https://storage.googleapis.com/cfq_dataset/cfq1.1.tar.gz"
HINT = (
    "if there is no network, pass --cfq-tarball (a local cfq1.1.tar.gz), --cfq-dir (its extracted cfq/ folder) "
    "or --preprocessed-dir"
)
# our split name -> file stem in splits/
SPLIT_FILES = {
    "mcd1": "mcd1",
    "mcd2": "mcd2",
    "mcd3": "mcd3",
    "query_complexity": "query_complexity_split",
}
SPLIT_KEYS = {"train": "trainIdxs", "valid": "devIdxs", "test": "testIdxs"}
PREPROCESSED_FILES = {"train": "train", "valid": "dev", "test": "test"}  # <stem>.question.txt / .query.txt
QUESTION_FIELD = "questionPatternModEntities"
QUERY_FIELD = "sparqlPatternModEntities"

# Csordás et al. (2021) Table 10 (gen. test and gen. valid. are equal for CFQ, so their order does not matter)
EXPECTED = {
    "mcd1": {"train": 95743, "valid": 11968, "test": 11968},
    "mcd2": {"train": 95743, "valid": 11968, "test": 11968},
    "mcd3": {"train": 95743, "valid": 11968, "test": 11968},
    "query_complexity": {"train": 100654, "valid": 9512, "test": 9512},
}

Pair = Tuple[str, str]


# ---------------------------------------------------------------------------
# Preprocessing (google-research cfq/preprocess.py)
# ---------------------------------------------------------------------------


def tokenize_punctuation(text: str) -> str:
    """``' '.join(''.join(' %s ' % c if c in string.punctuation else c for c in text).split())``."""
    return " ".join("".join(f" {c} " if c in string.punctuation else c for c in text).split())


def preprocess_sparql(query: str) -> str:
    """The SPARQL preprocessing of google-research cfq/preprocess.py (see the module docstring)."""
    query = query.replace("count(*)", "count ( * )")
    tokens = []
    for token in query.split():
        if token.startswith("ns:"):
            token = token[3:]
        if token.startswith("m."):
            token = "m_" + token[2:]
        tokens.append(token)
    return " ".join(tokens).replace("\\n", " ")


def preprocess_record(record: dict, where: str = "a CFQ record") -> Pair:
    """The (question, query) pair of one dataset.json element; ``where`` names it in the error for a record that
    lacks a field or holds no string there (a bare KeyError before)."""
    fields = [record.get(f) if isinstance(record, dict) else None for f in (QUESTION_FIELD, QUERY_FIELD)]
    for name, value in zip((QUESTION_FIELD, QUERY_FIELD), fields):
        if not isinstance(value, str):
            raise UsageError(f"{where}: expected an object with the string field {name!r} (CFQ 1.1's dataset.json), "
                             f"got {type(record).__name__ if not isinstance(record, dict) else 'no such string'}")
    return tokenize_punctuation(fields[0]), preprocess_sparql(fields[1])


def preprocess_records(stream: BinaryIO, name: str, progress_every: int = 0) -> List[Pair]:
    """Every element of dataset.json (streamed), preprocessed; an error names the element by its index, which the
    split files use."""
    return [preprocess_record(r, f"{name}: element {i}")
            for i, r in enumerate(iter_json_list(stream, name, progress_every=progress_every))]


# ---------------------------------------------------------------------------
# Streaming dataset.json
# ---------------------------------------------------------------------------


def iter_json_list(stream: BinaryIO, name: str = "dataset.json", chunk_chars: int = 1 << 20,
                   progress_every: int = 0) -> Iterator[dict]:
    """Yield the elements of a top-level JSON list, reading ``stream`` incrementally.

    Uses ``json.JSONDecoder.raw_decode`` on a growing text buffer: memory holds
    one chunk plus the element being decoded, never the whole file.
    ``progress_every`` > 0 prints a line to stderr every that many elements.
    Raises ValueError naming ``name`` and the element number on malformed JSON.
    """
    utf8 = codecs.getincrementaldecoder("utf-8")()
    decoder = json.JSONDecoder()
    buf = ""
    pos = 0
    eof = False
    n = 0
    n_bytes = 0
    t0 = time.monotonic()

    def fill() -> bool:
        nonlocal buf, pos, eof, n_bytes
        if eof:
            return False
        chunk = ""
        while not chunk:  # a chunk may end inside a multi-byte character and decode to nothing
            data = stream.read(chunk_chars)
            try:
                chunk = utf8.decode(data, final=not data)
            except UnicodeDecodeError as e:
                raise UsageError(f"{name}: not UTF-8 text (byte {n_bytes + e.start + 1} of the file, in JSON element "
                                 f"{n})") from None
            n_bytes += len(data)
            if not data:
                break
        if not chunk:
            eof = True
            return False
        buf = buf[pos:] + chunk
        pos = 0
        return True

    def skip_ws() -> None:
        nonlocal pos
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n":
                pos += 1
            if pos < len(buf) or not fill():
                return

    skip_ws()
    if pos >= len(buf) or buf[pos] != "[":
        raise UsageError(f"{name}: expected a JSON list ('[' at the start)")
    pos += 1
    skip_ws()
    if pos < len(buf) and buf[pos] == "]":
        return
    while True:
        skip_ws()
        while True:
            try:
                obj, end = decoder.raw_decode(buf, pos)
                # a number or literal cut at the chunk end would decode short: make sure a delimiter follows
                if end >= len(buf) and not eof:
                    raise json.JSONDecodeError("need more data", buf, end)
                break
            except json.JSONDecodeError as e:
                if not fill():
                    raise UsageError(f"{name}: malformed or truncated JSON in element {n} ({e.msg})") from None
        yield obj
        n += 1
        if progress_every and n % progress_every == 0:
            print(f"  {name}: {n} records read ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
        pos = end
        skip_ws()
        if pos >= len(buf):
            raise UsageError(f"{name}: truncated after element {n} (no closing ']')")
        if buf[pos] == ",":
            pos += 1
        elif buf[pos] == "]":
            return
        else:
            raise UsageError(f"{name}: expected ',' or ']' after element {n}, got {buf[pos]!r}")


def _read_split_file(data: bytes, name: str) -> Dict[str, List[int]]:
    try:
        obj = json.loads(decode_utf8(name, data))
    except json.JSONDecodeError as e:
        raise UsageError(f"{name}: not valid JSON ({e})") from None
    out = {}
    for subset, key in SPLIT_KEYS.items():
        if key not in obj:
            raise UsageError(f"{name}: no {key!r} list")
        idxs = obj[key]
        if not isinstance(idxs, list) or not all(isinstance(i, int) and i >= 0 for i in idxs):
            raise UsageError(f"{name}: {key!r} must be a list of non-negative integers")
        out[subset] = idxs
    return out


def _apply_split(records: List[Pair], idxs: Dict[str, List[int]], name: str) -> Dict[str, List[Pair]]:
    out = {}
    for subset, lst in idxs.items():
        for k, i in enumerate(lst):
            if i >= len(records):
                raise UsageError(
                    f"{name}: {SPLIT_KEYS[subset]}[{k}] = {i} points past the dataset "
                    f"(dataset.json has {len(records)} records): split file and dataset.json do not match"
                )
        out[subset] = [records[i] for i in lst]
    return out


def _members(names: Sequence[str]) -> Dict[str, str]:
    """Tar member suffix -> our key: 'dataset.json' and 'splits/<stem>.json'."""
    want = {"dataset.json": "dataset"}
    for split in names:
        want[f"splits/{SPLIT_FILES[split]}.json"] = split
    return want


def _member_key(member_name: str, want: Dict[str, str]) -> Optional[str]:
    parts = member_name.split("/")
    for k in (1, 2):  # 'cfq/dataset.json', 'cfq/splits/mcd1.json' (or without the top folder)
        if len(parts) >= k and "/".join(parts[-k:]) in want and len(parts) <= k + 1:
            return want["/".join(parts[-k:])]
    return None


def load_from_tarball(tarball: Path, splits: Sequence[str], progress_every: int = 20000) -> Dict[str, Dict[str, List[Pair]]]:
    """Read ``splits`` from ``cfq1.1.tar.gz`` in one streaming pass ('r|gz': nothing is unpacked to disk).

    Returns split -> subset -> preprocessed (question, query) pairs.
    """
    for s in splits:
        if s not in SPLIT_FILES:
            raise UsageError(f"unknown CFQ split {s!r}; known: {sorted(SPLIT_FILES)}")
    want = _members(splits)
    records: Optional[List[Pair]] = None
    split_idxs: Dict[str, Dict[str, List[int]]] = {}
    with reading_archive(tarball, download.redownload_hint(tarball)), tarfile.open(tarball, mode="r|gz") as tar:
        for member in tar:
            if not member.isfile():
                continue
            key = _member_key(member.name, want)
            if key is None:
                continue
            f = tar.extractfile(member)
            if key == "dataset":
                print(f"  reading {member.name} from {tarball} (streamed)", file=sys.stderr, flush=True)
                records = preprocess_records(f, f"{tarball}:{member.name}", progress_every)
            else:
                split_idxs[key] = _read_split_file(f.read(), f"{tarball}:{member.name}")
    if records is None:
        raise MissingFileError(f"{tarball}: no dataset.json member (is it cfq1.1.tar.gz?)")
    missing = [s for s in splits if s not in split_idxs]
    if missing:
        raise MissingFileError(
            f"{tarball}: no split file for {missing} (expected members "
            + ", ".join(f"cfq/splits/{SPLIT_FILES[s]}.json" for s in missing) + ")"
        )
    return {s: _apply_split(records, split_idxs[s], f"{tarball}:splits/{SPLIT_FILES[s]}.json") for s in splits}


def load_from_dir(cfq_dir: Path, splits: Sequence[str], progress_every: int = 20000) -> Dict[str, Dict[str, List[Pair]]]:
    """The same from an extracted release folder (``dataset.json`` and ``splits/``)."""
    cfq_dir = Path(cfq_dir)
    split_idxs = {}
    for s in splits:
        if s not in SPLIT_FILES:
            raise UsageError(f"unknown CFQ split {s!r}; known: {sorted(SPLIT_FILES)}")
        path = cfq_dir / "splits" / f"{SPLIT_FILES[s]}.json"
        if not path.is_file():
            raise MissingFileError(f"CFQ split file not found: {path}")
        split_idxs[s] = _read_split_file(path.read_bytes(), str(path))
    path = cfq_dir / "dataset.json"
    if not path.is_file():
        raise MissingFileError(f"CFQ dataset file not found: {path}")
    with open(path, "rb") as f:
        records = preprocess_records(f, str(path), progress_every)
    return {s: _apply_split(records, split_idxs[s], str(cfq_dir / "splits" / f"{SPLIT_FILES[s]}.json")) for s in splits}


def download_tarball(cache_dir: Optional[Path] = None) -> Path:
    return download.fetch(CFQ_URL, "cfq", "cfq1.1.tar.gz", cache_dir=cache_dir, hint=HINT, progress=True)


# ---------------------------------------------------------------------------
# Already-preprocessed pair files
# ---------------------------------------------------------------------------



def load_preprocessed(folder: Path) -> Dict[str, List[Pair]]:
    """``{train,dev,test}.question.txt`` / ``.query.txt`` (already preprocessed) -> subset -> pairs.

    The question and query files of a subset must have the same number of
    lines, and no line may be empty (DataError naming file:line).
    """
    folder = Path(folder)
    out = {}
    for subset, stem in PREPROCESSED_FILES.items():
        paths = [folder / f"{stem}.question.txt", folder / f"{stem}.query.txt"]
        for p in paths:
            if not p.is_file():
                raise MissingFileError(f"CFQ preprocessed {subset} file not found: {p}")
        qs, ys = read_data_lines(paths[0], complete=True), read_data_lines(paths[1], complete=True)
        if len(qs) != len(ys):
            shorter = paths[0] if len(qs) < len(ys) else paths[1]
            raise DataError(
                shorter, min(len(qs), len(ys)) + 1,
                f"expected as many lines as its pair file ({len(qs)} questions, {len(ys)} queries)",
            )
        for path, lines in zip(paths, (qs, ys)):
            for lineno, line in enumerate(lines, start=1):
                if not line.strip():
                    raise DataError(path, lineno, "expected a non-empty line", line)
        out[subset] = list(zip(qs, ys))
    return out


# ---------------------------------------------------------------------------
# fairseq-compgen prep cfq
# ---------------------------------------------------------------------------


def add_arguments(p) -> None:
    p.add_argument(
        "--split", action="append", required=True, choices=sorted(SPLIT_FILES) + ["all"],
        help="split to prepare (repeatable; 'all' = mcd1, mcd2, mcd3, query_complexity)",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--cfq-tarball", type=Path, help="local cfq1.1.tar.gz")
    src.add_argument("--cfq-dir", type=Path, help="extracted release folder (dataset.json, splits/)")
    src.add_argument(
        "--preprocessed-dir", type=Path,
        help="already preprocessed {train,dev,test}.question.txt/.query.txt of ONE split (given by --split)",
    )
    p.add_argument("--intermediate", action="store_true",
                   help="write targets as CFQ-im (Cartesian products compressed; fairseq_compgen/data/cfq_im.py); "
                        "eval scores them on the restored SPARQL (--metric cfq_sparql)")


def expand_splits(p, args) -> None:
    """--split all -> the four splits; --preprocessed-dir holds exactly one."""
    splits = []
    for s in args.split:
        for x in (sorted(SPLIT_FILES) if s == "all" else [s]):
            if x not in splits:
                splits.append(x)
    args.split = splits
    if args.preprocessed_dir is not None and len(splits) != 1:
        p.error("--preprocessed-dir holds one split: give exactly one --split")


def read(args):
    """One :class:`Split` per CFQ split of ``--split`` (the release is read once for all of them)."""
    from fairseq_compgen.data import cfq_im

    if args.preprocessed_dir is not None:
        data = {args.split[0]: load_preprocessed(args.preprocessed_dir)}
    elif args.cfq_dir is not None:
        data = load_from_dir(args.cfq_dir, args.split)
    else:
        tarball = args.cfq_tarball if args.cfq_tarball is not None else download_tarball()
        data = load_from_tarball(tarball, args.split)
    for split in args.split:
        pairs = data.pop(split)
        if args.intermediate:
            pairs = {sub: [(q, cfq_im.to_im(y)) for q, y in ps] for sub, ps in pairs.items()}
        yield Split(pairs, folder=split, expected=EXPECTED[split],
                    title=f"CFQ split {split}" + (" (CFQ-im targets)" if args.intermediate else ""),
                    metric="cfq_sparql" if args.intermediate else None)  # scored on the SPARQL restored


DATASET = Dataset(
    read=read,
    add_arguments=add_arguments,
    parsed=expand_splits,
    urls=[CFQ_URL],
    dict_from="train",
    dataset_json=False,
)
