#!/usr/bin/env python
"""Prepare SCAN splits as fairseq text and binary data.

SCAN: Lake & Baroni (2018), "Generalization without systematicity: On the
compositional skills of sequence-to-sequence recurrent networks", ICML.
Length cutoff splits: Csordás, Irie & Schmidhuber (2021), "The Devil is in the
Detail: Simple Tricks Improve Systematic Generalization of Transformers", EMNLP.

    python data-prep/scan.py --split length_cutoff_26 --out data/scan \
        [--scan-dir DIR] [--joined-dictionary] [--no-binarize]

Writes ``OUT/<split>/<subset>.src`` and ``.tgt`` (one example per line,
space-separated tokens), then binarizes them with fairseq-preprocess (``--padding-factor 1``: no filler
words in the dictionaries) into
``OUT/<split>/bin/`` (dictionaries built from ``train`` only), naming the
binary subsets like the text ones (train, valid, test, gen).  The binary
folder is built in a temporary folder and renamed into place at the end.
``--split all-generated`` prepares every rule-based split (no download).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

if importlib.util.find_spec("fairseq_compgen") is None:  # run from a checkout without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fairseq_compgen.data.io import atomic_write_lines
from fairseq_compgen.data.scan import GENERATED_SPLITS, build_split, split_names

SRC, TGT = "src", "tgt"
# Order in which subsets are listed (train first; fairseq builds dictionaries from it).
SUBSET_ORDER = ("train", "valid", "test", "gen")


def _ordered_subsets(subsets: Sequence[str]) -> List[str]:
    known = [s for s in SUBSET_ORDER if s in subsets]
    return known + sorted(s for s in subsets if s not in SUBSET_ORDER)


def write_text(split_dir: Path, data: Dict[str, List[Tuple[str, str]]]) -> Dict[str, int]:
    """Write ``<subset>.src/.tgt`` atomically; returns subset -> number of examples."""
    counts = {}
    for subset in _ordered_subsets(list(data)):
        pairs = data[subset]
        for i, (cmd, act) in enumerate(pairs):
            if not cmd.strip() or not act.strip():
                raise ValueError(f"{split_dir.name}/{subset}: example {i} has an empty side: {(cmd, act)!r}")
        atomic_write_lines(split_dir / f"{subset}.{SRC}", [" ".join(c.split()) for c, _ in pairs])
        atomic_write_lines(split_dir / f"{subset}.{TGT}", [" ".join(a.split()) for _, a in pairs])
        counts[subset] = len(pairs)
    return counts


def _run_preprocess(split_dir: Path, subsets: List[str], destdir: Path, joined: bool) -> None:
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
        "--workers", "1",
        "--dataset-impl", "mmap",
        # no 'madeupword' filler entries: the dictionaries hold exactly the words seen in train
        "--padding-factor", "1",
    ]
    if others:
        cmd += ["--testpref", ",".join(str(split_dir / s) for s in others)]
    if joined:
        cmd.append("--joined-dictionary")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-30:])
        raise RuntimeError(f"fairseq-preprocess failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")


def _fairseq_name(index: int) -> str:
    """fairseq's name for the index-th test prefix."""
    return "test" if index == 0 else f"test{index}"


def binarize(split_dir: Path, subsets: List[str], joined: bool) -> Path:
    """Binarize the text subsets of ``split_dir`` into ``split_dir/bin`` (renamed into place)."""
    final = split_dir / "bin"
    tmp = split_dir / f".bin.tmp-{os.getpid()}"
    raw = tmp / "fairseq-out"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        raw.mkdir(parents=True)
        _run_preprocess(split_dir, subsets, raw, joined)
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


def _read_tokens(path: Path) -> List[List[str]]:
    with open(path, encoding="utf-8") as f:
        return [line.split() for line in f.read().split("\n")[:-1]]


def summarize(split_dir: Path, subsets: List[str], binarized: bool) -> Dict[str, dict]:
    """Per-subset counts, checked against the binary data when ``binarized``.

    Raises RuntimeError if the binary data does not have exactly the examples
    of the text data (count or lengths).
    """
    summary: Dict[str, dict] = {}
    dicts = {}
    if binarized:
        from fairseq.data import Dictionary
        from fairseq.data.indexed_dataset import MMapIndexedDataset

        for lang in (SRC, TGT):
            dicts[lang] = Dictionary.load(str(split_dir / "bin" / f"dict.{lang}.txt"))
    for subset in subsets:
        info = {}
        for lang in (SRC, TGT):
            toks = _read_tokens(split_dir / f"{subset}.{lang}")
            info[f"n_in"] = len(toks)
            info[f"max_len_{lang}"] = max((len(t) for t in toks), default=0)
            if binarized:
                d = dicts[lang]
                ds = MMapIndexedDataset(str(split_dir / "bin" / f"{subset}.{SRC}-{TGT}.{lang}"))
                n_out = len(ds)
                if n_out != len(toks):
                    raise RuntimeError(
                        f"{split_dir}/bin/{subset}.{lang}: {n_out} binarized examples for {len(toks)} text lines"
                    )
                expected_sizes = [len(t) + 1 for t in toks]  # + </s>
                if list(int(x) for x in ds.sizes) != expected_sizes:
                    raise RuntimeError(f"{split_dir}/bin/{subset}.{lang}: binarized lengths differ from the text")
                unk = sum(int((ds[i] == d.unk()).sum()) for i in range(n_out))
                info["n_out"] = n_out
                info[f"unk_{lang}"] = unk
        summary[subset] = info
    if binarized:
        summary["_vocab"] = {
            lang: sum(1 for w in d.symbols[d.nspecial :] if not w.startswith("madeupword"))
            for lang, d in dicts.items()
        }
    return summary


def print_summary(split: str, split_dir: Path, summary: Dict[str, dict], binarized: bool) -> None:
    print(f"== SCAN split {split} -> {split_dir}")
    header = f"{'subset':<8} {'in':>7} {'out':>7} {'unk_src':>8} {'unk_tgt':>8} {'max_src':>8} {'max_tgt':>8}"
    print(header)
    for subset, info in summary.items():
        if subset.startswith("_"):
            continue
        out = info.get("n_out", "-")
        print(
            f"{subset:<8} {info['n_in']:>7} {out!s:>7} {info.get('unk_src', '-')!s:>8} "
            f"{info.get('unk_tgt', '-')!s:>8} {info['max_len_src']:>8} {info['max_len_tgt']:>8}"
        )
    if binarized:
        v = summary["_vocab"]
        print(f"vocab (words, without the 4 special symbols): src {v[SRC]}, tgt {v[TGT]}")
    else:
        print("(not binarized: --no-binarize)")


def prepare(split: str, out: Path, scan_dir: Optional[Path], joined: bool, binarize_data: bool) -> Dict[str, dict]:
    data = build_split(split, scan_dir=scan_dir)
    split_dir = out / split
    write_text(split_dir, data)
    subsets = _ordered_subsets(list(data))
    if binarize_data:
        binarize(split_dir, subsets, joined)
    summary = summarize(split_dir, subsets, binarize_data)
    print_summary(split, split_dir, summary, binarize_data)
    return summary


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--split", required=True,
        help="SCAN split: all-generated, " + ", ".join(split_names()),
    )
    p.add_argument("--out", required=True, type=Path, help="output folder (data/scan); the split goes to OUT/<split>/")
    p.add_argument(
        "--scan-dir", type=Path, default=None,
        help="local copy of https://github.com/brendenlake/SCAN (for the official splits); "
        "default: download the needed files",
    )
    p.add_argument("--joined-dictionary", action="store_true", help="one dictionary for source and target")
    p.add_argument("--no-binarize", action="store_true", help="write the text files only")
    args = p.parse_args(argv)
    if args.split != "all-generated" and args.split not in split_names():
        p.error(f"unknown split {args.split!r}; choose from all-generated, {', '.join(split_names())}")
    return args


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Dict[str, dict]]:
    args = parse_args(argv)
    splits = list(GENERATED_SPLITS) if args.split == "all-generated" else [args.split]
    results = {}
    for split in splits:
        results[split] = prepare(split, args.out, args.scan_dir, args.joined_dictionary, not args.no_binarize)
    return results


if __name__ == "__main__":
    main()
