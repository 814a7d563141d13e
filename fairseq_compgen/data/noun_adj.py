"""Prepare the noun-adjective ordering En->Fr data set (the paper's Section 4.2, Table 2) from Europarl v7.

    Philipp Koehn. 2005. "Europarl: A Parallel Corpus for Statistical Machine Translation". MT Summit X.

    fairseq-compgen prep noun_adj --out data/noun_adj [--europarl-dir DIR] [--tagger auto|spacy|pattern] \
        [--bpe-tokens 40000] [--separate-dictionaries] [--no-binarize]

``--europarl-dir`` holds ``europarl-v7.fr-en.{en,fr}``; default: download fr-en.tgz (194 MB).
Writes ``OUT/en-fr/{train,valid,test}.{src,tgt}``, ``test.comp`` (COMP metadata, also in ``bin/``),
``code`` (BPE) and ``bin/`` (joined dictionary, as the WMT'14 En-Fr recipe shares embeddings), and prints
how many pairs were read, kept per subset and dropped per reason.  The paper's test set has 659
sentences (full corpus, CoreNLP parser); a different count is only reported.  Scoring:

    python -m fairseq_compgen.scoring.comp gen.txt --meta OUT/en-fr/bin/test.comp
    python -m fairseq_compgen.scoring.bleu gen.txt --lang fr
    fairseq-train ... --task compgen --valid-subset valid,test --eval-comp OUT/en-fr/bin/test.comp

The noun-adjective ordering En->Fr data set of the paper's Section 4.2 (Table 2), from Europarl v7 fr-en:

8 nouns, each seen in training only with one adjective (Table 2): French puts the "backward" adjectives
after the noun and the "forward" ones before it.  Train/valid: every sentence pair whose English has no
noun of the list modified by an adjective other than its training adjective (sentences without the
nouns are kept).  Test: the sentences where the nouns of one column are modified only by adjectives of
the other column (the swapped pairs; 659 sentences in the paper, from the full corpus).

Finding adjective-noun pairs (the paper used the Stanford CoreNLP parser).  ``tagger``:

* ``"spacy"``: spaCy's dependency parse (``amod`` children of the noun, lemmatized), which also sees
  adjectives outside Table 2 (e.g. "rapid response" excludes a sentence from training).  Needs
  ``spacy`` and an English pipeline (``python -m spacy download en_core_web_sm``); neither is a
  dependency of this project because no maintained English model is shipped inside a PyPI package
  (spaCy downloads its models at run time) -- asking for it without them raises ImportError/OSError.
* ``"pattern"``: the adjective of Table 2 immediately before the noun (singular or plural) in the
  lowercased Moses tokens.  Deterministic, no model; adjectives outside Table 2 are not seen, so a
  sentence with "rapid response" stays in training.
* ``"auto"`` (default): spaCy if it and the model load, else the pattern (the choice is printed).

Europarl lines are read in pairs; dropped (and counted): an empty side, a pair ``clean-corpus-n.perl
-ratio 1.5 1 250`` (fairseq's WMT'14 En-Fr recipe) rejects -- this is what catches the alignment
slips -- and sentences a noun of the list with an adjective that fits neither train nor test.
Valid is every 10th kept training pair (the paper's 163,486 / 1,641,681).  Tokenization follows the
WMT'14 En-Fr recipe (Moses tokenizer, no lowercasing, joint subword-nmt BPE, 40,000 merges).

The test metadata ``test.comp`` (one line per test example, tab-separated: English adjective,
English noun, French adjective forms, French noun forms; forms comma-separated, every inflection)
is what :mod:`fairseq_compgen.scoring.comp` scores COMP with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from fairseq_compgen.data import download
from fairseq_compgen.data.dataset import Dataset, Split
from fairseq_compgen.data.io import count_mismatch, read_data_lines
from fairseq_compgen.data.iwslt14 import clean_corpus, extract_archive, learn_apply_bpe, moses_tokenize
from fairseq_compgen.errors import UsageError

# Table 2: noun -> its only training adjective
BACKWARD = {"response": "specific", "institution": "particular", "organisation": "effective", "solution": "permanent"}
FORWARD = {"source": "new", "decision": "good", "responsibility": "big", "population": "first"}
TRAIN_ADJ = {**BACKWARD, **FORWARD}
NOUNS = tuple(TRAIN_ADJ)
ADJECTIVES = tuple(TRAIN_ADJ.values())
PLURALS = {n: (n[:-1] + "ies" if n.endswith("y") else n + "s") for n in NOUNS}
NOUN_FORMS = {**{n: n for n in NOUNS}, **{p: n for n, p in PLURALS.items()}}

# French forms (every inflection) used by COMP
FR_NOUN = {
    "response": ["réponse", "réponses"], "institution": ["institution", "institutions"],
    "organisation": ["organisation", "organisations"], "solution": ["solution", "solutions"],
    "source": ["source", "sources"], "decision": ["décision", "décisions"],
    "responsibility": ["responsabilité", "responsabilités"], "population": ["population", "populations"],
}
FR_ADJ = {
    "specific": ["spécifique", "spécifiques"],
    "particular": ["particulier", "particulière", "particuliers", "particulières"],
    "effective": ["efficace", "efficaces"],
    "permanent": ["permanent", "permanente", "permanents", "permanentes"],
    "new": ["nouveau", "nouvel", "nouvelle", "nouveaux", "nouvelles"],
    "good": ["bon", "bonne", "bons", "bonnes"],
    "big": ["grand", "grande", "grands", "grandes"],
    "first": ["premier", "première", "premiers", "premières"],
}

CLEAN_RATIO, CLEAN_MAX = 1.5, 250
VALID_EVERY = 10
BPE_TOKENS = 40000
EXPECTED_TEST_PAPER = 659
TAGGERS = ("auto", "spacy", "pattern")

Pair = Tuple[str, str]


def is_test_pair(adj: str, noun: str) -> bool:
    """A swapped pair: a noun of one column of Table 2 with an adjective of the other column."""
    if noun in BACKWARD:
        return adj in FORWARD.values()
    return noun in FORWARD and adj in BACKWARD.values()


def pattern_pairs(tokens: Sequence[str]) -> List[Tuple[str, str]]:
    """(adjective, noun lemma) for every Table-2 adjective directly before a listed noun (lowercased tokens)."""
    out = []
    for i in range(1, len(tokens)):
        noun = NOUN_FORMS.get(tokens[i])
        if noun is not None and tokens[i - 1] in ADJECTIVES:
            out.append((tokens[i - 1], noun))
    return out


def spacy_pair_finder(model: str = "en_core_web_sm") -> Callable[[str], List[Tuple[str, str]]]:
    """(adjective lemma, noun lemma) of every ``amod`` on a listed noun, by spaCy (raises if not installed)."""
    import spacy

    nlp = spacy.load(model, disable=["ner"])

    def find(sentence: str) -> List[Tuple[str, str]]:
        doc = nlp(sentence)
        return [(c.lemma_.lower(), t.lemma_.lower()) for t in doc if t.lemma_.lower() in TRAIN_ADJ
                for c in t.children if c.dep_ == "amod"]

    return find


def choose_tagger(tagger: str = "auto", spacy_model: str = "en_core_web_sm"):
    """(name, finder) where finder(raw English, lowercased tokens) -> pairs."""
    if tagger not in TAGGERS:
        raise UsageError(f"unknown tagger {tagger!r}; known: {TAGGERS}")
    if tagger in ("auto", "spacy"):
        try:
            find = spacy_pair_finder(spacy_model)
            return f"spacy ({spacy_model})", lambda raw, toks: find(raw)
        except (ImportError, OSError) as e:
            if tagger == "spacy":
                raise type(e)(f"--tagger spacy needs spacy and the {spacy_model} pipeline "
                              f"(pip install spacy; python -m spacy download {spacy_model}): {e}") from e
    return "pattern (Table 2 adjective directly before the noun)", lambda raw, toks: pattern_pairs(toks)


def read_europarl(en_path, fr_path) -> Tuple[List[Tuple[int, str, str]], Dict[str, int]]:
    """(line number, English, French) of the non-empty pairs and the drop counts ('empty_en', 'empty_fr')."""
    sides = []
    for p in (en_path, fr_path):
        sides.append(read_data_lines(p, "Europarl"))
    if len(sides[0]) != len(sides[1]):
        raise count_mismatch((en_path, fr_path), (len(sides[0]), len(sides[1])))
    kept, dropped = [], {"empty_en": 0, "empty_fr": 0}
    for i, (en, fr) in enumerate(zip(*sides), start=1):
        if not en.strip():
            dropped["empty_en"] += 1
        elif not fr.strip():
            dropped["empty_fr"] += 1
        else:
            kept.append((i, en.strip(), fr.strip()))
    return kept, dropped


def build(en_path, fr_path, tagger: str = "auto", spacy_model: str = "en_core_web_sm"):
    """Tokenized subsets {train, valid, test}, the test metadata lines, and a report dict.

    report: ``n_in``, ``dropped`` (reason -> count), ``kept`` (subset -> count), ``tagger``,
    ``test_pairs`` ("adj noun" -> count); n_in == sum(kept) + sum(dropped).
    """
    rows, dropped = read_europarl(en_path, fr_path)
    n_in = len(rows) + sum(dropped.values())
    en_tok = moses_tokenize([en for _, en, _ in rows], "en")
    fr_tok = moses_tokenize([fr for _, _, fr in rows], "fr")
    name, find = choose_tagger(tagger, spacy_model)
    dropped.update({"length_ratio": 0, "too_long": 0, "other_adjective": 0, "mixed_train_test": 0})
    train_all: List[Pair] = []
    test: List[Pair] = []
    meta: List[str] = []
    test_pairs: Dict[str, int] = {}
    for (_, en_raw, _), en, fr in zip(rows, en_tok, fr_tok):
        ok, why = clean_corpus([(en, fr)], ratio=CLEAN_RATIO, min_len=1, max_len=CLEAN_MAX)
        if not ok:
            reason = next(k for k, v in why.items() if v)
            dropped[reason] = dropped.get(reason, 0) + 1
            continue
        pairs = [(a, n) for a, n in find(en_raw, en.lower().split()) if n in TRAIN_ADJ]
        swapped = [(a, n) for a, n in pairs if is_test_pair(a, n)]
        other = [(a, n) for a, n in pairs if a != TRAIN_ADJ[n] and not is_test_pair(a, n)]
        if other:
            dropped["other_adjective"] += 1
        elif swapped and len(swapped) != len(pairs):
            dropped["mixed_train_test"] += 1
        elif swapped:
            a, n = swapped[0]
            test.append(ok[0])
            meta.append("\t".join([a, n, ",".join(FR_ADJ[a]), ",".join(FR_NOUN[n])]))
            test_pairs[f"{a} {n}"] = test_pairs.get(f"{a} {n}", 0) + 1
        else:
            train_all.append(ok[0])
    valid = [p for i, p in enumerate(train_all, start=1) if i % VALID_EVERY == 0]
    train = [p for i, p in enumerate(train_all, start=1) if i % VALID_EVERY != 0]
    data = {"train": train, "valid": valid, "test": test}
    report = {"n_in": n_in, "dropped": dropped, "kept": {k: len(v) for k, v in data.items()},
              "tagger": name, "test_pairs": dict(sorted(test_pairs.items()))}
    assert n_in == sum(report["kept"].values()) + sum(dropped.values())
    return data, meta, report


def format_report(report: dict) -> str:
    kept, dropped = report["kept"], report["dropped"]
    lines = [f"noun-adjective En-Fr: tagger = {report['tagger']}",
             f"  pairs read: {report['n_in']} = kept {sum(kept.values())} "
             f"({', '.join(f'{k} {v}' for k, v in kept.items())}) + dropped {sum(dropped.values())}"]
    lines += [f"  dropped ({reason}): {n}" for reason, n in dropped.items()]
    lines.append("  test pairs: " + (", ".join(f"{k}: {v}" for k, v in report["test_pairs"].items()) or "none"))
    return "\n".join(lines)


def default_paths(europarl_dir: Optional[Path]) -> Tuple[Path, Path]:
    d = Path(europarl_dir)
    return d / "europarl-v7.fr-en.en", d / "europarl-v7.fr-en.fr"


# ---------------------------------------------------------------------------
# fairseq-compgen prep noun_adj
# ---------------------------------------------------------------------------

URL = "https://www.statmt.org/europarl/v7/fr-en.tgz"


def europarl_dir(arg: Optional[Path]) -> Path:
    if arg is not None:
        return arg
    tgz = download.fetch(URL, "europarl", "fr-en.tgz", progress=True,
                         hint="if there is no network, pass --europarl-dir holding europarl-v7.fr-en.{en,fr}")
    out = tgz.parent / "extracted"
    if not (out / "europarl-v7.fr-en.en").is_file():
        extract_archive(tgz, out)
    return out


def add_arguments(p) -> None:
    p.add_argument("--europarl-dir", type=Path, help="folder with europarl-v7.fr-en.{en,fr} (default: download)")
    p.add_argument("--tagger", choices=TAGGERS, default="auto",
                   help="adjective-noun finder: spaCy parse if installed (auto), or the Table-2 pattern")
    p.add_argument("--spacy-model", default="en_core_web_sm")
    p.add_argument("--bpe-tokens", type=int, default=BPE_TOKENS, help="BPE merges (40000)")


def read(args) -> Split:
    en, fr = default_paths(europarl_dir(args.europarl_dir))
    data, meta, report = build(en, fr, tagger=args.tagger, spacy_model=args.spacy_model)
    print(format_report(report))
    if report["kept"]["test"] != EXPECTED_TEST_PAPER:
        print(f"note: {report['kept']['test']} test sentences; the paper has {EXPECTED_TEST_PAPER} "
              "(full corpus, CoreNLP parser)")
    data, codes = learn_apply_bpe(data, args.bpe_tokens)

    def check_meta(counts):
        if counts.get("test", 0) != len(meta):
            raise RuntimeError(f"test.comp has {len(meta)} lines for {counts.get('test', 0)} test examples")

    return Split(data, folder="en-fr", title="noun-adjective En-Fr (Europarl v7)", files={"test.comp": meta},
                 side_files={"code": codes}, check=check_meta)


DATASET = Dataset(read=read, add_arguments=add_arguments, metric="comp", urls=[URL], dict_from="train",
                  count_check=False, joined=True, dataset_json=False)
