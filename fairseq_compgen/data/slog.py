"""Prepare SLOG (Li et al., EMNLP 2023), COGS's structural-generalization extension, as fairseq text and binary data.

    Bingzhi Li, Lucia Donatelli, Alexander Koller, Tal Linzen, Yuekun Yao and Najoung Kim. 2023. "SLOG: A
    Structural Generalization Benchmark for Semantic Parsing". EMNLP 2023. https://github.com/bingzhilee/SLOG

    fairseq-compgen prep slog --out data/slog [--slog-dir DIR] [--lf varfree|cogs] [--train-file TSV]
        [--gen-file TSV] [--joined-dictionary] [--no-binarize] [--no-count-check]

Writes ``OUT/<lf>_LF/{train,valid,test,gen}.{src,tgt}`` (valid = dev.tsv, test = test.tsv, gen = the
generalization set) and ``gen.cat`` (the generalization type of every gen line, one of 17), then fairseq
binaries in ``OUT/<lf>_LF/bin/`` with ``gen.cat`` beside them: `fairseq-compgen eval` reports exact match
overall and per type.  Each line of the authors' files is ``sentence<TAB>logical form<TAB>category``.
``--lf varfree`` (default): the variable-free logical forms; ``--lf cogs``: COGS-style logical forms, whose
training set is not in the authors' release copy we have (bingzhilee/SLOG @ 1c55df85 holds only
cogs_LF/dev.tsv and test.tsv): pass it with --train-file.  The generalization sets are read from the authors'
password-protected ``generalization_sets.zip`` (password ``SLOG``) with Python's zipfile, or from an
extracted copy with --gen-file.  Counts are checked against the release: train 32,755 (the same sentences in
both formats), dev 4,046, test 4,046, gen 17,000 in 17 types.  The dictionaries are counted over every subset
(--dict-from all, as for COGS), so that gen references are never ``<unk>``.  Without --slog-dir the files are
downloaded from the authors' repository.
"""
from __future__ import annotations

import argparse
import zipfile
import zlib
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from fairseq_compgen.data import download
from fairseq_compgen.data.dataset import Dataset, Examples
from fairseq_compgen.data.io import ArchiveError, DataError, decode_utf8, split_data_lines
from fairseq_compgen.errors import MissingFileError, UsageError

RAW_URL = "https://raw.githubusercontent.com/bingzhilee/SLOG/main/data/"
ZIP = "generalization_sets.zip"
PASSWORD = b"SLOG"  # the authors publish it in their README
LFS = ("varfree", "cogs")
SUBSET_FILES = {"train": "train.tsv", "valid": "dev.tsv", "test": "test.tsv"}  # our subset -> the authors' file
EXPECTED = {"train": 32755, "valid": 4046, "test": 4046, "gen": 17000}
N_GEN_TYPES = 17
HINT = "if there is no network, pass --slog-dir pointing to a local copy of SLOG's data/ folder"
NO_COGS_TRAIN = ("the COGS-LF train set is not in the authors' release copy we have (bingzhilee/SLOG @ 1c55df85 "
                 "holds cogs_LF/dev.tsv and test.tsv only)")

Example = Tuple[str, str, str]  # sentence, logical form, category


def parse_tsv(where: str, text: str) -> Examples:
    """(sentence, logical form, category) of every line of ``text`` (the content of ``where``); whitespace is
    normalized; a line without 3 non-empty tab-separated fields is a DataError naming ``where`` and the line."""
    out = Examples(source=where)
    for lineno, line in enumerate(split_data_lines(where, text, complete=True), start=1):
        fields = line.split("\t")
        if len(fields) != 3:
            raise DataError(where, lineno, f"expected 3 tab-separated fields (sentence, logical form, category), "
                                           f"got {len(fields)}", line)
        src, tgt, cat = (" ".join(x.split()) for x in fields)
        if not (src and tgt and cat):
            raise DataError(where, lineno, "expected non-empty sentence, logical form and category", line)
        out.append((src, tgt, cat))
    return out


def read_tsv(path: Path, what: str) -> Examples:
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"{what}: file not found: {path}")
    return parse_tsv(str(path), decode_utf8(path, path.read_bytes()))


def read_gen_zip(path: Path, lf: str) -> Examples:
    """The generalization set ``gen_<lf>LF.tsv`` of the authors' password-protected zip."""
    name = f"gen_{lf}LF.tsv"
    if not Path(path).is_file():
        raise MissingFileError(f"SLOG generalization sets: file not found: {path} (expected the authors' {ZIP})")
    try:
        with zipfile.ZipFile(path) as z:
            member = next((i for i in z.infolist() if Path(i.filename).name == name), None)
            if member is None:
                raise UsageError(f"{path}: no {name} in the archive (expected the authors' {ZIP}, which holds "
                                 f"gen_varfreeLF.tsv and gen_cogsLF.tsv)")
            data = z.read(member, pwd=PASSWORD)
    except NotImplementedError as e:
        raise UsageError(f"{path}: Python's zipfile cannot decrypt {name} ({e}); extract it with another tool "
                         f"(`unzip -P SLOG {path}` or `7z x -pSLOG {path}`) and pass --gen-file PATH/{name}") from None
    except RuntimeError as e:  # zipfile's "Bad password for file"
        raise UsageError(f"{path}: cannot read {name} with the password SLOG ({e}); expected the authors' {ZIP}, "
                         f"or pass an extracted copy with --gen-file") from None
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:
        hint = download.redownload_hint(Path(path))
        raise ArchiveError(f"{path}: corrupt or truncated archive ({type(e).__name__}: {e})"
                           + (f"; {hint}" if hint else "")) from None
    where = f"{path}:{member.filename}"
    return parse_tsv(where, decode_utf8(where, data))


def _file(rel: str, slog_dir: Optional[Path]) -> Path:
    """``rel`` (e.g. varfree_LF/train.tsv) of the local copy, or downloaded into the cache."""
    if slog_dir is not None:
        path = Path(slog_dir) / rel
        if not path.is_file():
            raise MissingFileError(f"SLOG file not found: {path} (--slog-dir must hold the files of SLOG's data/: "
                                   f"varfree_LF/, cogs_LF/, {ZIP})")
        return path
    return download.fetch(RAW_URL + rel, "slog", rel, hint=HINT)


def train_path(args: argparse.Namespace) -> Path:
    if args.train_file is not None:
        return args.train_file
    if args.lf == "cogs":
        local = args.slog_dir / "cogs_LF" / "train.tsv" if args.slog_dir is not None else None
        if local is None or not local.is_file():
            raise UsageError(f"SLOG --lf cogs: no training file: {NO_COGS_TRAIN}; pass --train-file PATH to a "
                             f"COGS-LF train.tsv (or use --lf varfree)")
        return local
    return _file("varfree_LF/train.tsv", args.slog_dir)


def read(args: argparse.Namespace) -> Dict[str, List[Example]]:
    """Subset (train, valid, test, gen) -> examples of the chosen logical form."""
    folder = f"{args.lf}_LF"
    data = {"train": read_tsv(train_path(args), f"SLOG {args.lf}-LF train")}
    for subset in ("valid", "test"):
        data[subset] = read_tsv(_file(f"{folder}/{SUBSET_FILES[subset]}", args.slog_dir),
                                f"SLOG {args.lf}-LF {subset} ({SUBSET_FILES[subset]})")
    if args.gen_file is not None:
        data["gen"] = read_tsv(args.gen_file, f"SLOG {args.lf}-LF generalization set")
    else:
        data["gen"] = read_gen_zip(_file(ZIP, args.slog_dir), args.lf)
    return data


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--slog-dir", type=Path, default=None,
                   help=f"local copy of SLOG's data/ (varfree_LF/, cogs_LF/, {ZIP}); default: download")
    p.add_argument("--lf", choices=LFS, default="varfree",
                   help="logical forms: varfree (default) or cogs (COGS-style; its train set is not in the release "
                        "copy we have: give it with --train-file)")
    p.add_argument("--train-file", type=Path, default=None,
                   help="the training TSV (sentence, logical form, category); needed for --lf cogs")
    p.add_argument("--gen-file", type=Path, default=None,
                   help=f"an extracted gen_<lf>LF.tsv instead of reading {ZIP}")


DATASET = Dataset(
    read=read,
    add_arguments=add_arguments,
    expected=EXPECTED,
    categories={"gen": N_GEN_TYPES},
    metric="exact_match",
    folder=lambda args: f"{args.lf}_LF",
    urls=[RAW_URL + rel for rel in ("varfree_LF/{train,dev,test}.tsv", "cogs_LF/{dev,test}.tsv", ZIP)],
    dict_from="all",
)
