"""Hold out Russin et al.'s (2019) validation set from a SCAN split and binarize it (Syntactic Attention).

    Jake Russin, Jason Jo, Randall C. O'Reilly and Yoshua Bengio. 2019. "Compositional generalization in a deep
    seq2seq model by separating syntax and semantics". arXiv:1904.09708.

    fairseq-compgen prep russin SPLIT_DIR [--workers N]      e.g. fairseq-compgen prep russin data/scan/addprim_jump

SPLIT_DIR is a split made by ``fairseq-compgen prep scan`` (``--split addprim_jump --out data/scan`` gives
data/scan/addprim_jump). The paper holds out 20% of the training file (Bastings et al.) for early stopping. The
authors cut the last 20% in file order; our generated train file is in grammar order (all 'jump' copies at its
end), so the lines of SPLIT_DIR/train are shuffled once with a fixed seed (``random.Random(0)``) and the last
20% (from ``int(0.8 * n)``, the authors' split_id) held out: SPLIT_DIR/russin/{train,valid,test}.{src,tgt} (test
copied unchanged), binarized with the split's dictionaries (SPLIT_DIR/bin/dict.{src,tgt}.txt) into
SPLIT_DIR/russin/bin, the folder fairseq-train reads. The files are built beside SPLIT_DIR/russin and renamed
into place when complete (other files there stay); when SPLIT_DIR/russin/bin already holds the binarized valid subset, nothing is done.
Delete SPLIT_DIR/russin to rebuild it.
"""
from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Union

from fairseq_compgen.data.binarize import add_workers_argument
from fairseq_compgen.data.dataset import Dataset
from fairseq_compgen.data.io import atomic_write_lines, count_mismatch, read_data_lines, staged_files
from fairseq_compgen.errors import MissingFileError

SEED = 0
TRAIN_SHARE = 0.8
# what the split must hold (SPLIT_DIR-relative), and the file whose presence means the folder is complete
NEEDED = ("train.src", "train.tgt", "test.src", "test.tgt", "bin/dict.src.txt", "bin/dict.tgt.txt")
DONE = "bin/valid.src-tgt.src.idx"


def held_out(n: int, seed: int = SEED) -> tuple:
    """(train, valid) line indices: a seeded shuffle of range(n), the first int(0.8 n) for train."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    cut = int(TRAIN_SHARE * n)
    return order[:cut], order[cut:]


def _preprocess(text_dir: Path, split_dir: Path, workers: int) -> None:
    """fairseq-preprocess of text_dir/{train,valid,test} into text_dir/bin with the split's dictionaries; its
    output goes to text_dir/preprocess.log."""
    cmd = [sys.executable, "-m", "fairseq_cli.preprocess", "--source-lang", "src", "--target-lang", "tgt",
           "--trainpref", str(text_dir / "train"), "--validpref", str(text_dir / "valid"),
           "--testpref", str(text_dir / "test"), "--srcdict", str(split_dir / "bin" / "dict.src.txt"),
           "--tgtdict", str(split_dir / "bin" / "dict.tgt.txt"), "--destdir", str(text_dir / "bin"),
           "--workers", str(workers)]
    with open(text_dir / "preprocess.log", "w", encoding="utf-8") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        tail = "\n".join((text_dir / "preprocess.log").read_text(encoding="utf-8").splitlines()[-30:])
        raise RuntimeError(f"fairseq-preprocess failed (exit {rc}): {' '.join(cmd)}\n{tail}")


def ensure(split_dir: Union[str, Path], workers: int = 1) -> Path:
    """SPLIT_DIR/russin/bin (the data folder for fairseq-train), built first when it is not there yet.

    A split lacking one of NEEDED raises MissingFileError (one line naming the file and the command that makes
    it); train.src and train.tgt of different lengths raise DataError.
    """
    split_dir = Path(split_dir)
    russin = split_dir / "russin"
    if (russin / DONE).is_file():
        print(f"russin: {russin} already exists (delete it to rebuild)")
        return russin / "bin"
    for name in NEEDED:
        if not (split_dir / name).is_file():
            have = sorted(f.stem for f in split_dir.glob("*.src"))
            if "train" in have and name.startswith("test."):  # a split of other subsets, e.g. length_cutoff_26's
                raise MissingFileError(f"{split_dir} lacks {name}: prep russin holds out a validation set from a SCAN "
                                       f"split of train and test (e.g. fairseq-compgen prep scan --split addprim_jump "
                                       f"--out {split_dir.parent}); this split's subsets are {', '.join(have)}")
            raise MissingFileError(f"{split_dir} lacks {name}: not a SCAN split folder made by fairseq-compgen prep scan "
                                   f"(e.g. fairseq-compgen prep scan --split {split_dir.name} --out {split_dir.parent})")
    src = read_data_lines(split_dir / "train.src", "SCAN train sources")
    tgt = read_data_lines(split_dir / "train.tgt", "SCAN train targets")
    if len(src) != len(tgt):
        raise count_mismatch((split_dir / "train.src", split_dir / "train.tgt"), (len(src), len(tgt)))
    train, valid = held_out(len(src))
    with staged_files(russin, "prep russin") as stage:
        for subset, idx in (("train", train), ("valid", valid)):
            for side, lines in (("src", src), ("tgt", tgt)):
                atomic_write_lines(stage / f"{subset}.{side}", (lines[i] for i in idx))
        for side in ("src", "tgt"):
            shutil.copyfile(split_dir / f"test.{side}", stage / f"test.{side}")
        _preprocess(stage, split_dir, workers)
    print(f"russin: {len(train)} train / {len(valid)} valid lines (seed-{SEED} shuffle of {split_dir}/train), "
          f"test copied; binarized into {russin / 'bin'}")
    return russin / "bin"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("split_dir", type=Path, help="a SCAN split folder made by fairseq-compgen prep scan")
    add_workers_argument(p)


DATASET = Dataset(run=lambda args: ensure(args.split_dir, args.workers), add_arguments=add_arguments,
                  shared_options=False, dataset_json=False)
