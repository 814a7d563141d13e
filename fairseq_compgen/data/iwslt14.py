"""Prepare IWSLT'14 De-En as fairseq's prepare-iwslt14.sh does (tokenize, lowercase, clean, BPE), binarized
with a joined dictionary (the paper's A.2 setup, Table 4).

    fairseq-compgen prep iwslt14 --out data/iwslt14 [--iwslt-dir DIR] [--bpe-tokens 10000] \
        [--separate-dictionaries] [--no-binarize] [--no-count-check]

``--iwslt-dir``: the extracted ``de-en/`` folder of de-en.tgz (train.tags.de-en.{de,en} and the
IWSLT14.TED*.xml files); default: download it.  Writes ``OUT/de-en/{train,valid,test}.{src,tgt}``,
``OUT/de-en/code`` (BPE codes) and ``OUT/de-en/bin/``.  Counts are checked against fairseq's
160,239 / 7,283 / 6,750.  BLEU: ``python -m fairseq_compgen.scoring.bleu gen.txt`` (detokenized;
``--tokenized`` for the tokenized number fairseq's example prints).

IWSLT'14 German-English as fairseq's ``examples/translation/prepare-iwslt14.sh`` prepares it:

    Cettolo et al. (2014), "Report on the 11th IWSLT evaluation campaign".  The recipe (fairseq):
    Moses tokenizer (escaping on, as tokenizer.perl), lowercasing, ``clean-corpus-n.perl -ratio 1.5 ... 1 175``
    on the training data, every 23rd training line is valid, test = TED.dev2010 + TEDX.dev2012 +
    TED.tst2010 + TED.tst2011 + TED.tst2012 (6,750 segments), BPE learned jointly on train.de + train.en
    with subword-nmt (10,000 merges), applied to every subset.  fairseq's counts: 160,239 / 7,283 / 6,750.

Python stand-ins for the Perl tools: sacremoses (tokenizer.perl, escaping on) and subword-nmt
(learn_bpe.py / apply_bpe.py), as the recipe's own scripts.  The Moses tokenizer of the recipe
runs with ``-threads 8`` but is otherwise the same.

The dev/test files are XML: the recipe keeps the lines holding ``<seg id``, strips the tags and
replaces ``’`` by ``'``; :func:`read_xml_segments` does the same, but a ``<seg`` line that is not
exactly ``<seg id="N"> text </seg>`` or has an empty text raises :class:`DataError` naming the file
and line, and the German and English files of a set must have the same number of segments.
"""

from __future__ import annotations

import re
import tarfile
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from fairseq_compgen.data import download
from fairseq_compgen.data.dataset import Dataset, Split
from fairseq_compgen.data.io import DataError, read_data_lines, reading_archive, staged_dir
from fairseq_compgen.errors import MissingFileError, UsageError

URL = "http://dl.fbaipublicfiles.com/fairseq/data/iwslt14/de-en.tgz"
SRC_LANG, TGT_LANG = "de", "en"
PAIR = "de-en"
# prepare-iwslt14.sh: cat of these, in this order, is the test set
TEST_SETS = ("TED.dev2010", "TEDX.dev2012", "TED.tst2010", "TED.tst2011", "TED.tst2012")
EXPECTED = {"train": 160239, "valid": 7283, "test": 6750}
EXPECTED_TEST_SEGMENTS = {"TED.dev2010": 887, "TEDX.dev2012": 1165, "TED.tst2010": 1565,
                          "TED.tst2011": 1433, "TED.tst2012": 1700}
VALID_EVERY = 23
CLEAN_RATIO, CLEAN_MIN, CLEAN_MAX = 1.5, 1, 175
BPE_TOKENS = 10000

HINT = "if there is no network, pass --iwslt-dir pointing to the extracted de-en/ folder of de-en.tgz"

_SEG_RE = re.compile(r'^\s*<seg id="(\d+)">(.*?)</seg>\s*$')


def read_xml_segments(path) -> List[str]:
    """The ``<seg>`` texts of an IWSLT XML file, in order (tags stripped, whitespace trimmed, ’ -> ')."""
    path = Path(path)
    out = []
    for lineno, line in enumerate(read_data_lines(path, "IWSLT'14 XML file"), start=1):
        if "<seg" not in line:
            continue
        m = _SEG_RE.match(line)
        if m is None:
            raise DataError(path, lineno, 'expected one segment per line: <seg id="N"> text </seg>', line)
        text = m.group(2).strip().replace("\u2019", "'")
        if not text:
            raise DataError(path, lineno, "empty <seg> text", line)
        out.append(text)
    if not out:
        raise DataError(path, 1, "no <seg id=...> line in the file")
    return out


def read_xml_pair(folder, name: str) -> List[Tuple[str, str]]:
    """(German, English) segments of ``IWSLT14.<name>.de-en.{de,en}.xml``; the counts must agree."""
    folder = Path(folder)
    paths = [folder / f"IWSLT14.{name}.{PAIR}.{lang}.xml" for lang in (SRC_LANG, TGT_LANG)]
    src, tgt = (read_xml_segments(p) for p in paths)
    if len(src) != len(tgt):
        raise DataError(paths[1], 1, f"{len(tgt)} segments but {paths[0].name} has {len(src)}")
    return list(zip(src, tgt))


def read_train_tags(path) -> List[str]:
    """``train.tags.de-en.<lang>`` as the recipe reads it: drop <url>/<talkid>/<keywords> lines, strip
    <title>/<description> tags (their text stays a training line, as in fairseq's recipe)."""
    out = []
    for line in read_data_lines(path, f"IWSLT'14 training file ({HINT})"):
        if "<url>" in line or "<talkid>" in line or "<keywords>" in line:
            continue
        for tag in ("<title>", "</title>", "<description>", "</description>"):
            line = line.replace(tag, "")
        out.append(line)
    return out


# ---------------------------------------------------------------------------
# Moses-style steps (shared with the noun-adjective En-Fr data)
# ---------------------------------------------------------------------------


def moses_tokenize(lines: Iterable[str], lang: str, lowercase: bool = False) -> List[str]:
    """tokenizer.perl -l LANG (escaping on) through sacremoses, optionally lowercased (lowercase.perl)."""
    try:
        from sacremoses import MosesTokenizer
    except ImportError as e:  # pragma: no cover - setup.sh installs it
        raise ImportError("the IWSLT'14 / Europarl recipes need sacremoses (pip install sacremoses)") from e
    tok = MosesTokenizer(lang=lang)
    out = []
    for line in lines:
        t = tok.tokenize(line.strip(), return_str=True, escape=True)
        out.append(t.lower() if lowercase else t)
    return out


def clean_corpus(pairs: Sequence[Tuple[str, str]], ratio: float = CLEAN_RATIO, min_len: int = CLEAN_MIN,
                 max_len: int = CLEAN_MAX) -> Tuple[List[Tuple[str, str]], Dict[str, int]]:
    """clean-corpus-n.perl: drop pairs with a side shorter than min_len / longer than max_len tokens or a
    length ratio above ``ratio``; ``|`` removed and whitespace normalized.  Returns (kept, reason -> count)."""
    kept, dropped = [], {"empty": 0, "too_long": 0, "length_ratio": 0}
    for s, t in pairs:
        s, t = " ".join(s.replace("|", "").split()), " ".join(t.replace("|", "").split())
        ns, nt = len(s.split()), len(t.split())
        if ns < min_len or nt < min_len:
            dropped["empty"] += 1
        elif ns > max_len or nt > max_len:
            dropped["too_long"] += 1
        elif ns / nt > ratio or nt / ns > ratio:
            dropped["length_ratio"] += 1
        else:
            kept.append((s, t))
    return kept, dropped


def learn_apply_bpe(subsets: Dict[str, List[Tuple[str, str]]], num_symbols: int, learn_from: str = "train"
                    ) -> Tuple[Dict[str, List[Tuple[str, str]]], str]:
    """subword-nmt BPE learned on the source and target of ``learn_from`` together, applied everywhere.

    Returns (the segmented subsets, the BPE codes as text); the caller writes the codes with the data
    (``prepare_split(side_files={"code": codes})``), so they are replaced together with it.
    """
    import io

    try:
        from subword_nmt.apply_bpe import BPE
        from subword_nmt.learn_bpe import learn_bpe
    except ImportError as e:  # pragma: no cover - setup.sh installs it
        raise ImportError("BPE as in fairseq's recipes needs subword-nmt (pip install subword-nmt)") from e
    text = [s for s, _ in subsets[learn_from]] + [t for _, t in subsets[learn_from]]
    out = io.StringIO()
    learn_bpe(io.StringIO("\n".join(text) + "\n"), out, num_symbols)
    codes = out.getvalue()
    bpe = BPE(io.StringIO(codes))
    return {k: [(bpe.process_line(s), bpe.process_line(t)) for s, t in v] for k, v in subsets.items()}, codes


# ---------------------------------------------------------------------------
# The whole recipe
# ---------------------------------------------------------------------------


def locate(iwslt_dir: Optional[Path] = None, cache_dir: Optional[Path] = None) -> Path:
    """The folder holding the de-en files: ``iwslt_dir`` (or its ``de-en/``), else the downloaded archive."""
    if iwslt_dir is not None:
        d = Path(iwslt_dir)
        if (d / PAIR).is_dir():
            d = d / PAIR
        if not d.is_dir():
            raise MissingFileError(f"IWSLT'14 folder not found: {d}")
        return d
    tgz = download.fetch(URL, "iwslt14", "de-en.tgz", cache_dir=cache_dir, hint=HINT, progress=True)
    out = tgz.parent / "extracted"
    if not (out / PAIR).is_dir():
        extract_archive(tgz, out)
    return out / PAIR


def extract_archive(tgz: Path, out: Path) -> None:
    """Unpack the downloaded archive ``tgz`` into ``out`` (staged: an interrupted or failed extraction leaves no
    half-filled ``out``); a corrupt archive raises ArchiveError naming it and saying to delete it."""
    with staged_dir(out) as stage, reading_archive(tgz, download.redownload_hint(tgz)), tarfile.open(tgz) as tf:
        tf.extractall(stage, filter="data")


def load_test(folder) -> List[Tuple[str, str]]:
    """The raw test pairs: the 5 XML sets concatenated in the recipe's order."""
    out = []
    for name in TEST_SETS:
        out.extend(read_xml_pair(folder, name))
    return out


def prepare_text(folder, bpe_tokens: int = BPE_TOKENS):
    """train/valid/test (tokenized, lowercased, cleaned, BPE), the BPE codes (text) and the cleaning counts."""
    folder = Path(folder)
    src = read_train_tags(folder / f"train.tags.{PAIR}.{SRC_LANG}")
    tgt = read_train_tags(folder / f"train.tags.{PAIR}.{TGT_LANG}")
    if len(src) != len(tgt):  # the shorter file is named: the one that lost a line (or the other gained one)
        (short, n), (long, m) = sorted([(folder / f"train.tags.{PAIR}.{SRC_LANG}", len(src)),
                                        (folder / f"train.tags.{PAIR}.{TGT_LANG}", len(tgt))], key=lambda x: x[1])
        raise UsageError(f"{short}: {n} lines after removing tags, but {long.name} has {m}: expected as many (a "
                         f"line missing here, or one too many there?)")
    # the recipe tokenizes, cleans, then lowercases the training data; lowercasing does not change lengths
    train, dropped = clean_corpus(list(zip(moses_tokenize(src, SRC_LANG), moses_tokenize(tgt, TGT_LANG))))
    train = [(s.lower(), t.lower()) for s, t in train]
    valid = [p for i, p in enumerate(train, start=1) if i % VALID_EVERY == 0]
    train = [p for i, p in enumerate(train, start=1) if i % VALID_EVERY != 0]
    test_raw = load_test(folder)
    test = list(zip(moses_tokenize([s for s, _ in test_raw], SRC_LANG, lowercase=True),
                    moses_tokenize([t for _, t in test_raw], TGT_LANG, lowercase=True)))
    data, codes = learn_apply_bpe({"train": train, "valid": valid, "test": test}, bpe_tokens)
    return data, codes, dropped


# ---------------------------------------------------------------------------
# fairseq-compgen prep iwslt14
# ---------------------------------------------------------------------------


def add_arguments(p) -> None:
    p.add_argument("--iwslt-dir", type=Path, help="extracted de-en/ folder of de-en.tgz (default: download)")
    p.add_argument("--bpe-tokens", type=int, default=BPE_TOKENS, help="BPE merges (10000)")


def read(args) -> Split:
    data, codes, dropped = prepare_text(locate(args.iwslt_dir), args.bpe_tokens)
    print(f"IWSLT'14 training pairs dropped by clean-corpus (ratio 1.5, 1-175 tokens): {dropped}")
    return Split(data, folder=PAIR, title="IWSLT'14 De-En", side_files={"code": codes})


DATASET = Dataset(read=read, add_arguments=add_arguments, expected=EXPECTED, metric="bleu", urls=[URL],
                  dict_from="train", joined=True, dataset_json=False)
