"""Plain-text splits -> fairseq binaries, shared by every `fairseq-compgen prep` dataset.

Layout (the same for SCAN, COGS, CFQ, PCFG SET and Mathematics)::

    OUT/<split>/<subset>.src, <subset>.tgt      one example per line, space-separated tokens
    OUT/<split>/<extra files>                   e.g. gen.cat (COGS categories, one per gen line)
    OUT/<split>/bin/                            fairseq-preprocess output:
        dict.src.txt, dict.tgt.txt              built from ``train`` only (--padding-factor 1)
        <subset>.src-tgt.{src,tgt}.{bin,idx}    binary subsets named like the text ones
        <extra files>                           copied from the text folder
        preprocess.log

Writing is staged: the whole split folder (text, ``bin/``, tokenizer models) is
built in a staging folder beside it, the counts are checked (no empty subset,
the papers' statistics), the binaries are built and checked against the text,
and only then are the staged files renamed into the split folder, each replacing the file of the same name
(:func:`~fairseq_compgen.data.io.staged_files`): what else the folder holds (``russin/`` of
``fairseq-compgen prep russin``, another prep's outputs, a file of the user) stays; of the same prep's
earlier outputs only those this run no longer writes go (listed in ``.prep-files.json``).  A plain file at the
split path is refused.
A failure or an interrupt at any point leaves the previous outputs untouched
and no temporary files behind.  Rerunning with the same inputs rewrites identical files
(``preprocess.log`` aside).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from fairseq_compgen.data.io import staged_files
from fairseq_compgen.errors import UsageError

SRC, TGT = "src", "tgt"
# Order in which subsets are listed (train first; fairseq builds dictionaries from it).
SUBSET_ORDER = ("train", "valid", "test", "gen")

Pair = Tuple[str, str]


class CountMismatch(UsageError):
    """The number of examples differs from the published statistics."""


class EmptySubset(UsageError):
    """A subset has no examples (fairseq can neither binarize nor train on it)."""


def ordered_subsets(subsets: Iterable[str]) -> List[str]:
    subsets = list(subsets)
    known = [s for s in SUBSET_ORDER if s in subsets]
    return known + sorted(s for s in subsets if s not in SUBSET_ORDER)


# ---------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------


def _clean(text: str, where: str) -> str:
    if "\n" in text or "\r" in text:
        raise UsageError(f"{where}: contains a newline: {text[:80]!r}")
    out = " ".join(text.split())
    if not out:
        raise UsageError(f"{where}: empty after tokenization")
    return out


def write_text(
    split_dir: Path,
    data: Mapping[str, Iterable[Pair]],
    extra_files: Optional[Mapping[str, Iterable[str]]] = None,
    output: Optional[Path] = None,
    sources: Optional[Mapping[str, str]] = None,
) -> Dict[str, int]:
    """Write ``<subset>.src/.tgt`` (and ``extra_files``: name -> lines) into ``split_dir``; returns the counts.
    An error names the example by ``sources`` (subset -> the input file it was read from) where given, else by
    ``output`` (the folder the staging folder ``split_dir`` becomes; default ``split_dir``) and its subset.

    ``data`` maps a subset to an iterable of (source, target) strings of
    space-separated tokens (it is consumed once, so generators stream).
    Whitespace is normalized to single spaces; an empty side or a newline is
    an error.  Files are written in place: :func:`prepare_split` calls this on
    a staging folder.
    """
    split_dir = Path(split_dir)
    split_dir.mkdir(parents=True, exist_ok=True)
    output = Path(output or split_dir)
    counts: Dict[str, int] = {}
    for subset in ordered_subsets(data):
        with open(split_dir / f"{subset}.{SRC}", "w", encoding="utf-8", newline="\n") as fs, \
                open(split_dir / f"{subset}.{TGT}", "w", encoding="utf-8", newline="\n") as ft:
            n = 0
            for n, (src, tgt) in enumerate(data[subset], start=1):
                where = f"{(sources or {}).get(subset) or output / subset}: example {n} of {subset}"
                fs.write(_clean(src, where + " (source)") + "\n")
                ft.write(_clean(tgt, where + " (target)") + "\n")
        counts[subset] = n
    for name, lines in (extra_files or {}).items():
        with open(split_dir / name, "w", encoding="utf-8", newline="\n") as f:
            for i, line in enumerate(lines, start=1):
                if "\n" in line or "\r" in line:
                    raise UsageError(f"{output / name}: line {i} contains a newline: {line[:80]!r}")
                f.write(line + "\n")
    return counts


def nonempty_checker(what: str) -> Callable[[Dict[str, int]], None]:
    """A count check: every subset has at least one example (else :class:`EmptySubset`, even with
    --no-count-check: fairseq cannot binarize an empty subset and training on one fails later)."""

    def check(counts: Dict[str, int]) -> None:
        empty = [s for s in ordered_subsets(counts) if counts[s] == 0]
        if empty:
            raise EmptySubset(f"{what}: {', '.join(empty)} ha{'ve' if len(empty) > 1 else 's'} 0 examples "
                              "(an empty input file, or a sample too small?); nothing was written")

    return check


def count_checker(expected: Mapping[str, int], what: str, strict: bool = True,
                  sources: Optional[Mapping[str, str]] = None) -> Callable[[Dict[str, int]], None]:
    """A count check for :func:`prepare_split`: subsets in ``expected`` must have exactly that many examples.

    With ``strict=False`` a mismatch is printed as a warning instead of raising :class:`CountMismatch`.
    ``sources`` (subset -> the file it was read from) names the file beside a subset whose count differs.
    """
    sources = sources or {}

    def check(counts: Dict[str, int]) -> None:
        bad = [f"{s}{f' ({sources[s]})' if s in sources else ''}: {counts.get(s, 0)} examples, expected {n}"
               for s, n in expected.items() if counts.get(s, 0) != n]
        if bad:
            msg = f"{what}: counts differ from the published statistics: " + "; ".join(bad)
            if strict:
                raise CountMismatch(msg + " (not the official release? --no-count-check accepts it)")
            print(f"warning: {msg}", file=sys.stderr)

    return check


# ---------------------------------------------------------------------------
# fairseq-preprocess
# ---------------------------------------------------------------------------


def build_dictionaries(split_dir: Path, subsets: Sequence[str], destdir: Path, joined: bool) -> Dict[str, Path]:
    """fairseq dictionaries counted over the text of ``subsets`` (not only train): lang -> dict file.

    For data sets whose published vocabulary covers every split (COGS: Table 10's
    871 words = the 831 of train + 40 variable indices seen only in gen), so
    that references are never ``<unk>``.
    """
    from collections import Counter

    from fairseq.data import Dictionary

    counters = {lang: Counter() for lang in (SRC, TGT)}
    for subset in ordered_subsets(subsets):
        for lang in (SRC, TGT):
            with open(split_dir / f"{subset}.{lang}", encoding="utf-8") as f:
                for line in f:
                    counters[lang].update(line.split())
    if joined:
        counters = {SRC: counters[SRC] + counters[TGT]}
    out = {}
    for lang, counter in counters.items():
        d = Dictionary()
        for word, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])):
            d.add_symbol(word, n)
        d.finalize(padding_factor=1)
        path = destdir / f"alldict.{lang}.txt"
        d.save(str(path))
        out[lang] = path
    return out


def _run_preprocess(
    split_dir: Path, subsets: List[str], destdir: Path, joined: bool, workers: int,
    dicts: Optional[Dict[str, Path]] = None,
) -> None:
    """Run fairseq-preprocess: train as trainpref, every other subset as one of the testprefs.

    fairseq names the test prefixes test, test1, test2, ...; the caller renames them.
    """
    if "train" not in subsets:
        raise ValueError(f"{split_dir}: no train subset to build the dictionaries from")
    others = [s for s in subsets if s != "train"]
    prefixes = [str(split_dir / s) for s in subsets]
    bad = [p for p in prefixes if "," in p]
    if bad:
        raise ValueError(f"fairseq-preprocess cannot take paths containing ',': {bad[0]}")
    cmd = [
        sys.executable, "-m", "fairseq_cli.preprocess",
        "--source-lang", SRC, "--target-lang", TGT,
        "--trainpref", str(split_dir / "train"),
        "--destdir", str(destdir),
        "--workers", str(workers),
        "--dataset-impl", "mmap",
        # no 'madeupword' filler entries: the dictionaries hold exactly the words seen in train
        "--padding-factor", "1",
    ]
    if others:
        cmd += ["--testpref", ",".join(str(split_dir / s) for s in others)]
    if joined:
        cmd.append("--joined-dictionary")
    if dicts:
        cmd += ["--srcdict", str(dicts[SRC])]
        if not joined:
            cmd += ["--tgtdict", str(dicts[TGT])]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-30:])
        raise RuntimeError(f"fairseq-preprocess failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")


def _fairseq_name(index: int) -> str:
    """fairseq's name for the index-th test prefix."""
    return "test" if index == 0 else f"test{index}"


def binarize(
    split_dir: Path,
    subsets: Sequence[str],
    joined: bool = False,
    extra_files: Sequence[str] = (),
    workers: int = 1,
    dict_from: str = "train",
) -> Path:
    """Binarize the text subsets of ``split_dir`` into ``split_dir/bin`` (built aside, renamed into place).

    ``extra_files`` (names of files in ``split_dir``, e.g. ``gen.cat``) are copied into ``bin/``.
    ``dict_from``: ``"train"`` (fairseq's default: dictionaries from train only) or ``"all"``
    (:func:`build_dictionaries` over every subset).
    """
    if dict_from not in ("train", "all"):
        raise ValueError(f"dict_from must be 'train' or 'all', got {dict_from!r}")
    split_dir = Path(split_dir)
    subsets = ordered_subsets(subsets)
    final = split_dir / "bin"
    tmp = split_dir / f".bin.tmp-{os.getpid()}"
    raw = tmp / "fairseq-out"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        raw.mkdir(parents=True)
        dicts = None
        if dict_from == "all":
            (tmp / "dicts").mkdir()
            dicts = build_dictionaries(split_dir, subsets, tmp / "dicts", joined)
        _run_preprocess(split_dir, subsets, raw, joined, workers, dicts)
        if dicts:
            shutil.rmtree(tmp / "dicts")
        # fairseq output name -> our subset name
        mapping = {"train": "train"}
        mapping.update({_fairseq_name(i): s for i, s in enumerate(s for s in subsets if s != "train")})
        for fs_name, subset in mapping.items():
            for lang in (SRC, TGT):
                for ext in ("bin", "idx"):
                    src = raw / f"{fs_name}.{SRC}-{TGT}.{lang}.{ext}"
                    if not src.is_file():
                        raise RuntimeError(f"fairseq-preprocess did not write {src}")
                    os.replace(src, tmp / f"{subset}.{SRC}-{TGT}.{lang}.{ext}")
        for name in (f"dict.{SRC}.txt", f"dict.{TGT}.txt", "preprocess.log"):
            if (raw / name).is_file():
                os.replace(raw / name, tmp / name)
        leftover = sorted(p.name for p in raw.iterdir())
        if leftover:
            raise RuntimeError(f"unexpected fairseq-preprocess outputs in {raw}: {leftover}")
        raw.rmdir()
        for name in extra_files:
            shutil.copyfile(split_dir / name, tmp / name)
        old = None
        if final.exists():
            old = split_dir / f".bin.old-{os.getpid()}"
            os.replace(final, old)
        os.replace(tmp, final)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


# ---------------------------------------------------------------------------
# Checks and summary
# ---------------------------------------------------------------------------


MMAP_MAGIC = b"MMIDIDX\x00\x00"  # fairseq's mmap index (data/indexed_dataset.py, MMapIndexedDataset.Index)
MMAP_DTYPE_SIZES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 8, 7: 8, 8: 2, 9: 4, 10: 8}  # its dtype codes: uint8 int8
# int16 int32 int64 float64 double uint16 uint32 uint64


def check_binarized(prefix) -> None:
    """UsageError naming the file unless PREFIX.idx and PREFIX.bin (fairseq's mmap format) are whole: the index is
    header (magic 9 bytes, version 8, dtype 1, count 8) + count int32 sizes + count int64 byte offsets, and the .bin
    ends where the last example does. A truncated pair would fail in numpy ("buffer is smaller than requested
    size") naming neither. Another index format (fairseq's legacy "TNTIDX") is left to fairseq."""
    import struct

    idx, binary = Path(f"{prefix}.idx"), Path(f"{prefix}.bin")
    redo = "rerun the data folder's `fairseq-compgen prep` command"
    with open(idx, "rb") as f:
        header = f.read(26)
        if header[:9] != MMAP_MAGIC:
            return
        if len(header) < 26 or header[17] not in MMAP_DTYPE_SIZES:
            raise UsageError(f"{idx}: a fairseq index cut short or damaged in its header: {redo}")
        (count,) = struct.unpack("<Q", header[18:26])
        size = idx.stat().st_size
        if size != 26 + 12 * count:
            raise UsageError(f"{idx}: {size} bytes where an index of {count} examples has {26 + 12 * count} (cut "
                             f"short or damaged?): {redo}")
        if count == 0:
            return
        f.seek(26 + 4 * (count - 1))
        (last_size,) = struct.unpack("<i", f.read(4))
        f.seek(26 + 4 * count + 8 * (count - 1))
        (last_offset,) = struct.unpack("<q", f.read(8))
    expected = last_offset + last_size * MMAP_DTYPE_SIZES[header[17]]
    have = binary.stat().st_size if binary.is_file() else None
    if have != expected:
        raise UsageError(f"{binary}: {'missing' if have is None else f'{have} bytes'} where its index "
                         f"({idx.name}) needs {expected} (cut short or damaged?): {redo}")


def _line_lengths(path: Path) -> np.ndarray:
    """Number of space-separated tokens of every line (streamed; files are written normalized)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            out.append(line.count(" ") + 1)
    return np.asarray(out, dtype=np.int64)


def _all_tokens(ds) -> np.ndarray:
    try:  # whole data buffer at once (fast); the examples of an mmap dataset are contiguous
        return np.frombuffer(ds._bin_buffer, dtype=ds._index.dtype)
    except AttributeError:  # pragma: no cover - other fairseq versions
        return np.concatenate([np.asarray(ds[i]) for i in range(len(ds))]) if len(ds) else np.zeros(0, np.int64)


def summarize(split_dir: Path, subsets: Sequence[str], binarized: bool) -> Dict[str, dict]:
    """Per-subset counts and maximum lengths, checked against the binary data when ``binarized``.

    Raises RuntimeError if the binary data does not have exactly the examples
    of the text data (count or lengths).  ``summary["_vocab"]`` has the
    dictionary sizes (words, without the 4 special symbols), ``summary["_vocab_union"]``
    the size of their union (Table 10's "Voc. size").
    """
    split_dir = Path(split_dir)
    summary: Dict[str, dict] = {}
    dicts = {}
    if binarized:
        from fairseq.data import Dictionary
        from fairseq.data.indexed_dataset import MMapIndexedDataset

        for lang in (SRC, TGT):
            dicts[lang] = Dictionary.load(str(split_dir / "bin" / f"dict.{lang}.txt"))
    for subset in ordered_subsets(subsets):
        info: dict = {}
        for lang in (SRC, TGT):
            lengths = _line_lengths(split_dir / f"{subset}.{lang}")
            info["n_in"] = len(lengths)
            info[f"max_len_{lang}"] = int(lengths.max()) if len(lengths) else 0
            if binarized:
                d = dicts[lang]
                ds = MMapIndexedDataset(str(split_dir / "bin" / f"{subset}.{SRC}-{TGT}.{lang}"))
                n_out = len(ds)
                if n_out != len(lengths):
                    raise RuntimeError(
                        f"{split_dir}/bin/{subset}.{lang}: {n_out} binarized examples for {len(lengths)} text lines"
                    )
                if not np.array_equal(np.asarray(ds.sizes, dtype=np.int64), lengths + 1):  # + </s>
                    raise RuntimeError(f"{split_dir}/bin/{subset}.{lang}: binarized lengths differ from the text")
                info["n_out"] = n_out
                info[f"unk_{lang}"] = int((_all_tokens(ds) == d.unk()).sum())
                del ds
        summary[subset] = info
    if binarized:
        words = {lang: set(d.symbols[d.nspecial :]) for lang, d in dicts.items()}
        summary["_vocab"] = {lang: len(w) for lang, w in words.items()}
        summary["_vocab_union"] = len(words[SRC] | words[TGT])
    return summary


def print_summary(
    title: str,
    split_dir: Path,
    summary: Dict[str, dict],
    binarized: bool,
    expected: Optional[Mapping[str, int]] = None,
) -> None:
    """The table printed by every `fairseq-compgen prep` dataset (``expected``: published counts, shown beside ours)."""
    expected = expected or {}
    print(f"== {title} -> {split_dir}")
    print(
        f"{'subset':<8} {'in':>8} {'out':>8} {'expected':>9} {'unk_src':>8} {'unk_tgt':>8} "
        f"{'max_src':>8} {'max_tgt':>8}"
    )
    for subset, info in summary.items():
        if subset.startswith("_"):
            continue
        exp = expected.get(subset)
        exp_s = "-" if exp is None else (f"{exp}" + ("" if exp == info["n_in"] else "!"))
        print(
            f"{subset:<8} {info['n_in']:>8} {info.get('n_out', '-')!s:>8} {exp_s:>9} "
            f"{info.get('unk_src', '-')!s:>8} {info.get('unk_tgt', '-')!s:>8} "
            f"{info['max_len_src']:>8} {info['max_len_tgt']:>8}"
        )
    if binarized:
        v = summary["_vocab"]
        print(
            f"vocab (words, without the 4 special symbols): src {v[SRC]}, tgt {v[TGT]}, "
            f"union {summary['_vocab_union']}"
        )
    else:
        print("(not binarized: --no-binarize)")


def prepare_split(
    title: str,
    split_dir: Path,
    data: Mapping[str, Iterable[Pair]],
    joined: bool = False,
    binarize_data: bool = True,
    expected: Optional[Mapping[str, int]] = None,
    strict_counts: bool = True,
    extra_files: Optional[Mapping[str, Iterable[str]]] = None,
    extra_check: Optional[Callable[[Dict[str, int]], None]] = None,
    workers: int = 1,
    dict_from: str = "train",
    side_files: Optional[Mapping[str, Union[str, bytes]]] = None,
    sources: Optional[Mapping[str, str]] = None,
    writer: str = "prepare_split",
) -> Dict[str, dict]:
    """Write text, check counts, binarize, verify and print: the whole pipeline for one split.

    Everything is built in a staging folder beside ``split_dir`` (:func:`~fairseq_compgen.data.io.staged_files`)
    whose files replace those of ``split_dir`` by renames only after every check passed (other files of
    ``split_dir`` stay): text, binaries and ``side_files``
    (name -> text or bytes written into the split folder: BPE codes, a sentencepiece model) are replaced
    together, and any error or interrupt leaves the previous outputs as they were.

    Checked, in this order, before fairseq-preprocess runs: no subset is empty (:class:`EmptySubset`);
    ``expected`` (subset -> published count; ``strict_counts=False`` only warns); ``extra_check(counts)``
    (e.g. that gen.cat has one line per gen example); ``sources`` (subset -> file) names the file of a subset
    whose count differs.  After binarizing, :func:`summarize` checks that the
    binaries hold exactly the examples of the text.  ``extra_files`` (name -> lines) are written beside the
    text and copied into ``bin/``.  ``writer`` names the command in ``split_dir``'s manifest (``"prep scan"``):
    another command's files there are not replaced.  Returns the summary of :func:`summarize`.
    """
    split_dir = Path(split_dir)
    checks = [nonempty_checker(title)]
    if expected:
        checks.append(count_checker(expected, title, strict=strict_counts, sources=sources))
    if extra_check is not None:
        checks.append(extra_check)
    with staged_files(split_dir, writer) as stage:
        counts = write_text(stage, data, extra_files=extra_files, output=split_dir, sources=sources)
        for check in checks:
            check(counts)
        for name, content in (side_files or {}).items():
            if isinstance(content, str):
                (stage / name).write_text(content, encoding="utf-8")
            else:
                (stage / name).write_bytes(content)
        subsets = ordered_subsets(counts)
        if binarize_data:
            binarize(stage, subsets, joined, extra_files=list(extra_files or {}), workers=workers,
                     dict_from=dict_from)
        summary = summarize(stage, subsets, binarize_data)
    print_summary(title, split_dir, summary, binarize_data, expected)
    return summary


def add_common_args(p, count_check: bool = True, dict_from: str = "train", joined: bool = False) -> None:
    """The options every `fairseq-compgen prep` dataset shares (``dict_from``: the default of --dict-from).

    ``joined``: the default dictionary layout; ``False`` gives ``--joined-dictionary`` (separate by default),
    ``True`` (the MT recipes) ``--separate-dictionaries``.  Both set ``args.joined_dictionary``.
    """
    if joined:
        p.add_argument("--separate-dictionaries", dest="joined_dictionary", action="store_false",
                       help="one dictionary per language (default: joined, as the recipe shares embeddings)")
    else:
        p.add_argument("--joined-dictionary", action="store_true", help="one dictionary for source and target")
    p.add_argument(
        "--dict-from", choices=("train", "all"), default=dict_from,
        help=f"build the dictionaries from train only or from every subset (default {dict_from})",
    )
    p.add_argument("--no-binarize", action="store_true", help="write the text files only")
    add_workers_argument(p)
    if count_check:
        p.add_argument(
            "--no-count-check", action="store_true",
            help="only warn when the counts differ from the published statistics (for non-official copies)",
        )


def workers_value(text: str) -> int:
    """The argparse type of --workers: a whole number of at least 1 (fairseq-preprocess took 0 or less as 1)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of fairseq-preprocess workers, at least 1, not {text!r}")
    return value


def add_workers_argument(p) -> None:
    """--workers N, the fairseq-preprocess processes of a prep (every dataset that binarizes has it)."""
    p.add_argument("--workers", type=workers_value, default=1, help="fairseq-preprocess workers (default 1)")


def common_options(args) -> dict:
    """The keyword arguments of :func:`prepare_split` that the options of :func:`add_common_args` set."""
    return dict(joined=args.joined_dictionary, binarize_data=not args.no_binarize,
                strict_counts=not getattr(args, "no_count_check", False), workers=args.workers,
                dict_from=args.dict_from)
