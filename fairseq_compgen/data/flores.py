"""Prepare FLoRes v1 Ne<->En / Si<->En as fairseq text and binary data (sentencepiece BPE, joined dictionary).

Guzmán et al. (2019); the paper's Tables 5 and 7.

    fairseq-compgen prep flores --out data/flores --direction ne-en [--flores-dir DIR] [--train-dir DIR] \
        [--vocab-size 5000] [--separate-dictionaries] [--no-binarize] [--no-count-check]

Writes ``OUT/<direction>/{train,valid,test[,dev]}.{src,tgt}`` (sentencepiece pieces), the model
``OUT/<direction>/sentencepiece.bpe.model`` and binaries in ``OUT/<direction>/bin/`` (joined
dictionary).  valid = devtest, test = test.  ``--train-dir`` holds ``train.<xx>`` / ``train.en`` (the
supervised data of floresv1's download-data.sh); without it dev is the training set.  Without
--flores-dir the test-set archive is downloaded.  Score with

    fairseq-generate OUT/ne-en/bin --user-dir fairseq_compgen --task compgen --gen-subset test \
        --path CKPT --beam 5 --lenpen 1.2 > gen.txt
    python -m fairseq_compgen.scoring.bleu gen.txt               # X->En: detokenized BLEU
    python -m fairseq_compgen.scoring.bleu gen.txt --tokenized   # En->X: tokenized BLEU (labelled)

FLoRes v1 Nepali-English and Sinhala-English as Guzmán et al. (2019) prepare them:

    Guzmán et al. (2019), "The FLoRes Evaluation Datasets for Low-Resource Machine Translation:
    Nepali-English and Sinhala-English", EMNLP.  https://github.com/facebookresearch/flores (floresv1)

``wikipedia_en_ne_si_test_sets.tgz`` holds ``wikipedia.{dev,devtest,test}.{ne-en,si-en}.{xx,en,doc_id}``.
As in floresv1's ``prepare-neen.sh`` / ``prepare-sien.sh``: one sentencepiece BPE model (vocabulary
5,000, character coverage 1.0) trained on the source and target training text together, every subset
encoded into pieces, binarized with a joined dictionary.

Training data: the official supervised data come from floresv1's ``download-data.sh`` (many sources;
not downloaded here): pass ``train_dir`` holding ``train.<xx>`` and ``train.en``.  Without it the
``dev`` set is the training set (the tiny end-to-end setting of the tests; Section 5 of the paper
speaks of "training on the dev data").  Subsets: ``train``; ``valid`` = devtest (model selection,
as the paper's Section 5); ``test`` = test; and ``dev`` when dev is not the training set.
"""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from fairseq_compgen.data import download
from fairseq_compgen.data.dataset import Dataset, Split
from fairseq_compgen.data.io import (DataError, count_mismatch, decode_utf8, read_data_lines, reading_archive,
                                     split_data_lines)
from fairseq_compgen.errors import MissingFileError, UsageError

URL = ("https://github.com/facebookresearch/flores/raw/main/previous_releases/floresv1/data/"
       "wikipedia_en_ne_si_test_sets.tgz")
ARCHIVE = "wikipedia_en_ne_si_test_sets.tgz"
PAIRS = ("ne-en", "si-en")
DIRECTIONS = ("ne-en", "en-ne", "si-en", "en-si")
SETS = ("dev", "devtest", "test")
EXPECTED = {
    "ne-en": {"dev": 2559, "devtest": 2835, "test": 2924},
    "si-en": {"dev": 2898, "devtest": 2766, "test": 2905},
}
VOCAB_SIZE = 5000
MODEL_FILE = "sentencepiece.bpe.model"  # written beside the text of a direction
HINT = f"if there is no network, pass --flores-dir pointing to a folder holding {ARCHIVE}"


def pair_of(direction: str) -> Tuple[str, str, str]:
    """``'en-ne'`` -> (pair 'ne-en', source 'en', target 'ne')."""
    if direction not in DIRECTIONS:
        raise UsageError(f"unknown FLoRes direction {direction!r}; known: {DIRECTIONS}")
    src, tgt = direction.split("-")
    xx = src if src != "en" else tgt
    return f"{xx}-en", src, tgt


def archive_path(flores_dir: Optional[Path] = None, cache_dir: Optional[Path] = None) -> Path:
    if flores_dir is not None:
        p = Path(flores_dir)
        p = p / ARCHIVE if p.is_dir() else p
        if not p.is_file():
            raise MissingFileError(f"FLoRes archive not found: {p}")
        return p
    return download.fetch(URL, "flores", ARCHIVE, cache_dir=cache_dir, hint=HINT)


def read_sets(archive, pair: str) -> Dict[str, Dict[str, List[str]]]:
    """set -> lang -> lines, read from the archive; the two sides of a set must have as many lines."""
    xx = pair.split("-")[0]
    out: Dict[str, Dict[str, List[str]]] = {}
    with reading_archive(archive, download.redownload_hint(archive)), tarfile.open(archive) as tf:
        names = {Path(m.name).name: m for m in tf.getmembers() if m.isfile()}
        for s in SETS:
            out[s] = {}
            for lang in (xx, "en"):
                name = f"wikipedia.{s}.{pair}.{lang}"
                if name not in names:
                    raise MissingFileError(f"{archive}: no member {name}")
                where = f"{archive}:{name}"
                lines = split_data_lines(where, decode_utf8(where, tf.extractfile(names[name]).read()), complete=True)
                for i, line in enumerate(lines, start=1):
                    if not line.strip():
                        raise DataError(f"{archive}:{name}", i, "empty line", line)
                out[s][lang] = lines
            if len(out[s][xx]) != len(out[s]["en"]):
                raise count_mismatch((f"{archive}:wikipedia.{s}.{pair}.{xx}", f"{archive}:wikipedia.{s}.{pair}.en"),
                                     (len(out[s][xx]), len(out[s]["en"])))
    return out


def read_train_dir(train_dir, src: str, tgt: str) -> List[Tuple[str, str]]:
    d = Path(train_dir)
    sides = []
    for lang in (src, tgt):
        sides.append(read_data_lines(d / f"train.{lang}", "FLoRes training file (floresv1 download-data.sh makes it)"))
    if len(sides[0]) != len(sides[1]):
        raise count_mismatch((d / f"train.{src}", d / f"train.{tgt}"), (len(sides[0]), len(sides[1])))
    pairs = list(zip(*sides))
    empty = [i for i, (s, t) in enumerate(pairs, start=1) if not (s.strip() and t.strip())]
    if empty:  # no example of ours can be empty (binarize refuses one): left out, and said so
        print(f"flores: left out {len(empty)} of {len(pairs)} training pairs of {d / f'train.{src}'} and "
              f"train.{tgt} with an empty side (line {', line '.join(map(str, empty[:3]))}"
              f"{', ...' if len(empty) > 3 else ''})", file=sys.stderr)
    return [pair for pair in pairs if pair[0].strip() and pair[1].strip()]


def train_sentencepiece(pairs: List[Tuple[str, str]], vocab_size: int = VOCAB_SIZE,
                        seed_sentencepiece_size: Optional[int] = None) -> bytes:
    """One BPE model on both sides (floresv1: --model_type=bpe --character_coverage=1.0), as the bytes of
    its ``.model`` file (the caller writes it with the data, so both are replaced together)."""
    import io

    import sentencepiece as spm

    text = [s for s, _ in pairs] + [t for _, t in pairs]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(text), model_writer=model, vocab_size=vocab_size, model_type="bpe",
        character_coverage=1.0, input_sentence_size=len(text), num_threads=1, minloglevel=2,
        **({"seed_sentencepiece_size": seed_sentencepiece_size} if seed_sentencepiece_size else {}),
    )
    return model.getvalue()


def encode(model: bytes, pairs: List[Tuple[str, str]]) -> List[Tuple[str, str]]:
    """Both sides of ``pairs`` as space-separated pieces of the sentencepiece ``model`` (its bytes)."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_proto=model)
    return [(" ".join(sp.encode(s, out_type=str)), " ".join(sp.encode(t, out_type=str))) for s, t in pairs]


def load(direction: str, flores_dir: Optional[Path] = None, train_dir: Optional[Path] = None,
         cache_dir: Optional[Path] = None) -> Dict[str, List[Tuple[str, str]]]:
    """Raw (untokenized) subsets: train, valid (devtest), test, and dev unless dev is the training set."""
    pair, src, tgt = pair_of(direction)
    sets = read_sets(archive_path(flores_dir, cache_dir), pair)
    raw = {s: list(zip(sets[s][src], sets[s][tgt])) for s in SETS}
    data = {"valid": raw["devtest"], "test": raw["test"]}
    if train_dir is not None:
        data["train"] = read_train_dir(train_dir, src, tgt)
        data["dev"] = raw["dev"]
    else:
        data["train"] = raw["dev"]
    return data


def expected_counts(direction: str, train_on_dev: bool) -> Dict[str, int]:
    exp = EXPECTED[pair_of(direction)[0]]
    out = {"valid": exp["devtest"], "test": exp["test"]}
    out["train" if train_on_dev else "dev"] = exp["dev"]
    return out


# ---------------------------------------------------------------------------
# fairseq-compgen prep flores
# ---------------------------------------------------------------------------


def add_arguments(p) -> None:
    p.add_argument("--direction", required=True, choices=DIRECTIONS)
    p.add_argument("--flores-dir", type=Path, help=f"folder holding {ARCHIVE} (default: download)")
    p.add_argument("--train-dir", type=Path, help="folder with train.<xx>/train.en (default: train on dev)")
    p.add_argument("--vocab-size", type=int, default=VOCAB_SIZE, help="sentencepiece vocabulary (5000)")


def read(args) -> Split:
    raw = load(args.direction, flores_dir=args.flores_dir, train_dir=args.train_dir)
    model = train_sentencepiece(raw["train"], vocab_size=args.vocab_size)
    return Split({k: encode(model, v) for k, v in raw.items()}, folder=args.direction,
                 title=f"FLoRes v1 {args.direction}", side_files={MODEL_FILE: model},
                 expected=expected_counts(args.direction, train_on_dev=args.train_dir is None))


DATASET = Dataset(read=read, add_arguments=add_arguments, metric="bleu", urls=[URL], dict_from="train",
                  joined=True, dataset_json=False)
