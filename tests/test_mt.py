"""Machine-translation data and metrics: IWSLT'14 XML, FLoRes end to end with BLEU, the
noun-adjective En-Fr set from Europarl with its drop counts, COMP as a scorer and as a validation metric."""
import io
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from fairseq_compgen.data import flores, iwslt14, noun_adj
from fairseq_compgen.data.io import DataError
from fairseq_compgen.scoring.exact_match import ScoringError
from fairseq_compgen.scoring import bleu, comp

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
BIN = Path(sys.executable).parent
TINY = ("--arch compgen_transformer --encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 32 "
        "--decoder-embed-dim 32 --encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 "
        "--encoder-attention-heads 2 --decoder-attention-heads 2").split()
TRAIN = ("--cpu --optimizer adam --lr 1e-3 --criterion label_smoothed_cross_entropy --batch-size 64 "
         "--num-workers 0 --no-epoch-checkpoints --no-last-checkpoints --log-interval 1").split()


def need(path):
    if not Path(path).exists():
        pytest.skip(f"shared data not found: {path}")
    return Path(path)


def run(cmd):
    env = dict(os.environ, OMP_NUM_THREADS="1", PATH=f"{BIN}:{os.environ['PATH']}")
    p = subprocess.run([str(c) for c in cmd], cwd=REPO, env=env, capture_output=True, text=True)
    assert p.returncode == 0, f"{cmd[:3]} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p.stdout + p.stderr


# --------------------------------------------------------------------------- IWSLT'14 XML


def test_iwslt_xml_segment_counts():
    d = need(DATA / "iwslt14")
    counts = {name: len(iwslt14.read_xml_pair(d, name)) for name in iwslt14.TEST_SETS}
    assert counts == iwslt14.EXPECTED_TEST_SEGMENTS
    test = iwslt14.load_test(d)
    assert len(test) == iwslt14.EXPECTED["test"] == 6750
    assert all(s and t and "<seg" not in s and "</seg>" not in t for s, t in test)
    tok = iwslt14.moses_tokenize([test[0][1]], "en", lowercase=True)[0]
    assert tok == tok.lower() and tok.split()[-1] in {".", "?", "!", "&quot;", "&apos;"}


@pytest.mark.parametrize("bad, why", [('<seg id="3">no closing tag\n', "one segment per line"),
                                      ('<seg id="3">   </seg>\n', "empty <seg>")])
def test_iwslt_malformed_seg_names_file_and_line(tmp_path, bad, why):
    p = tmp_path / "x.xml"
    p.write_text('<doc>\n<seg id="1"> a </seg>\n<seg id="2"> b </seg>\n' + bad + "</doc>\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"x\.xml:4: .*{re.escape(why)}"):
        iwslt14.read_xml_segments(p)


def test_iwslt_training_files_of_different_lengths_name_the_shorter(tmp_path):
    """The check named the en file at line 1 whichever file had lost a line (helper audit, 2026-11-29)."""
    from fairseq_compgen.errors import UsageError

    for lang, lines in (("de", ["<url>x</url>", "ein Satz", "noch einer"]), ("en", ["<url>x</url>", "a sentence"])):
        (tmp_path / f"train.tags.de-en.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"train\.tags\.de-en\.en: 1 lines after removing tags, but "
                                         r"train\.tags\.de-en\.de has 2: expected as many"):
        iwslt14.prepare_text(tmp_path)


def test_iwslt_missing_segment_is_an_error(tmp_path):
    d = need(DATA / "iwslt14")
    for lang in ("de", "en"):
        text = (d / f"IWSLT14.TED.dev2010.de-en.{lang}.xml").read_text(encoding="utf-8")
        if lang == "en":
            text = text.replace('<seg id="5">', '<!-- removed -->', 1)
            text = "\n".join(l for l in text.split("\n") if "<!-- removed -->" not in l)
        (tmp_path / f"IWSLT14.TED.dev2010.de-en.{lang}.xml").write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=r"886 segments but IWSLT14.TED.dev2010.de-en.de.xml has 887"):
        iwslt14.read_xml_pair(tmp_path, "TED.dev2010")


def test_clean_corpus_counts():
    kept, dropped = iwslt14.clean_corpus([("a b", "c d"), ("a", "b c d"), ("a " * 176, "b " * 176), ("|", "b"), ("a|", "|b")])
    assert kept == [("a b", "c d"), ("a", "b")] and dropped == {"empty": 1, "too_long": 1, "length_ratio": 1}


# --------------------------------------------------------------------------- FLoRes end to end


def test_flores_archive_counts():
    arch = need(DATA / "flores" / flores.ARCHIVE)
    for pair, exp in flores.EXPECTED.items():
        sets = flores.read_sets(arch, pair)
        assert {s: len(v["en"]) for s, v in sets.items()} == exp


def _trimmed_archive(src, dest, n):
    """The real archive with the first n lines of every member (keeps the test fast)."""
    with tarfile.open(src) as tin, tarfile.open(dest, "w:gz") as tout:
        for m in tin.getmembers():
            if not m.isfile():
                continue
            data = "".join(tin.extractfile(m).read().decode("utf-8").splitlines(keepends=True)[:n]).encode("utf-8")
            info = tarfile.TarInfo(m.name)
            info.size = len(data)
            tout.addfile(info, io.BytesIO(data))


def test_flores_end_to_end_bleu(tmp_path):
    arch = need(DATA / "flores" / flores.ARCHIVE)
    _trimmed_archive(arch, tmp_path / flores.ARCHIVE, 300)
    out = tmp_path / "out"
    log = run([sys.executable, "-m", "fairseq_compgen.cli", "prep", "flores", "--out", out, "--direction", "ne-en",
               "--flores-dir", tmp_path, "--vocab-size", "400", "--no-count-check"])
    assert re.search(r"train\s+300\s+300", log), log
    data = out / "ne-en" / "bin"
    assert (out / "ne-en" / "sentencepiece.bpe.model").is_file()
    assert (data / "dict.src.txt").read_bytes() == (data / "dict.tgt.txt").read_bytes(), "joined dictionary"
    save = tmp_path / "ckpt"
    # docs/experiments.md's recipe shares all embeddings, which needs the joined dictionary
    run([BIN / "fairseq-train", data, "--user-dir", REPO / "fairseq_compgen", "--task", "compgen", *TINY, *TRAIN,
         "--max-update", "4", "--save-dir", save, "--valid-subset", "valid", "--max-source-positions", "256",
         "--max-target-positions", "256", "--share-all-embeddings", "1"])
    gen = run([BIN / "fairseq-generate", data, "--user-dir", REPO / "fairseq_compgen", "--task", "compgen",
               "--path", save / "checkpoint_best.pt", "--gen-subset", "test", "--beam", "1", "--max-len-b", "10",
               "--batch-size", "100", "--cpu"])
    (tmp_path / "gen.txt").write_text(gen, encoding="utf-8")
    for tokenized in (False, True):
        ids, hyps, refs = bleu.read_pairs(gen.splitlines(), "gen")
        assert len(ids) == 300
        res = bleu.score(hyps, refs, tokenized=tokenized)
        assert res["subword"] == "sentencepiece" and 0.0 <= res["bleu"] <= 100.0
        assert res["signature"].startswith("nrefs:1|") and ("tok:none" in res["signature"]) == tokenized
    res = bleu.main([str(tmp_path / "gen.txt")])
    assert "\u2581" not in "".join(bleu.remove_bpe(r, "sentencepiece") for r in refs)
    # the same BLEU computed independently: sentencepiece pieces joined back into words, sacrebleu's defaults
    import sacrebleu

    def decode(pieces):
        return "".join(pieces.split()).replace("\u2581", " ").strip()

    H = {int(m.group(1)): m.group(2) for m in re.finditer(r"^H-(\d+)\t\S+\t(.*)$", gen, flags=re.M)}
    T = {int(m.group(1)): m.group(2) for m in re.finditer(r"^T-(\d+)\t(.*)$", gen, flags=re.M)}
    order = sorted(T)
    expected = sacrebleu.corpus_bleu([decode(H[i]) for i in order], [[decode(T[i]) for i in order]]).score
    assert res["bleu"] == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("script, argv", [("iwslt14", []), ("flores", ["--direction", "ne-en"]), ("noun_adj", [])])
def test_mt_preps_default_to_a_joined_dictionary(script, argv):
    """The MT recipes share embeddings: joined by default (it silently was separate), --separate-dictionaries."""
    from fairseq_compgen.data.binarize import common_options
    from fairseq_compgen.prep import module as prep_module

    prep = prep_module(script)
    assert common_options(prep.parse_args(["--out", "x", *argv]))["joined"] is True
    assert common_options(prep.parse_args(["--out", "x", *argv, "--separate-dictionaries"]))["joined"] is False
    with pytest.raises(SystemExit):
        prep.parse_args(["--out", "x", *argv, "--joined-dictionary"])


def test_flores_model_kept_when_the_prep_fails(tmp_path):
    """The sentencepiece model was overwritten before the count check; now it is replaced with the data only."""
    from fairseq_compgen.data.binarize import CountMismatch
    from fairseq_compgen.prep import module as prep_module

    arch = need(DATA / "flores" / flores.ARCHIVE)
    _trimmed_archive(arch, tmp_path / flores.ARCHIVE, 200)
    out = tmp_path / "out"
    prep = prep_module("flores")
    args = ["--out", str(out), "--direction", "si-en", "--flores-dir", str(tmp_path), "--vocab-size", "300"]
    prep.main(args + ["--no-count-check", "--no-binarize"])
    d = out / "si-en"
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    assert flores.MODEL_FILE in before
    with pytest.raises(CountMismatch, match="expected 2898"):
        prep.main(args[:-1] + ["250"])
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before
    assert sorted(p.name for p in out.iterdir()) == ["si-en"]


def test_bleu_signature_printed_and_labelled(tmp_path, capsys):
    log = tmp_path / "g.txt"
    log.write_text("T-0\tthe cat sat on the mat .\nH-0\t-0.1\tthe cat sat on the mat .\n"
                   "T-1\tit is a good@@ day\nH-1\t-0.2\tit is a good@@ day\n", encoding="utf-8")
    res = bleu.main([str(log)])
    out = capsys.readouterr().out
    assert "detokenized BLEU" in out and "signature: nrefs:1|case:mixed|eff:no|tok:13a" in out
    assert res["bleu"] == pytest.approx(100.0) and res["subword"] == "subword_nmt" and res["detok"] == "moses"
    bleu.main([str(log), "--tokenized"])
    assert "tokenized BLEU (tokenize=none" in capsys.readouterr().out


# --------------------------------------------------------------------------- noun-adjective En-Fr


@pytest.fixture(scope="module")
def europarl(tmp_path_factory):
    d = need(DATA / "europarl")
    out = tmp_path_factory.mktemp("na")
    log = run([sys.executable, "-m", "fairseq_compgen.cli", "prep", "noun_adj", "--out", out, "--europarl-dir", d,
               "--tagger", "pattern", "--bpe-tokens", "300"])
    return out / "en-fr", log


def test_europarl_counts_and_drop_reasons(europarl):
    split, log = europarl
    m = re.search(r"pairs read: (\d+) = kept (\d+) \(train (\d+), valid (\d+), test (\d+)\) \+ dropped (\d+)", log)
    assert m, log
    n_in, kept, tr, va, te, dropped = map(int, m.groups())
    assert n_in == 3000 and n_in == kept + dropped and kept == tr + va + te
    reasons = dict((k, int(v)) for k, v in re.findall(r"dropped \((\w+)\): (\d+)", log))
    assert sum(reasons.values()) == dropped and reasons["empty_fr"] == 6
    assert reasons["length_ratio"] > 0  # the alignment slips near line 550 are among these
    assert te == 2 and "new institution: 2" in log
    meta = comp.read_meta(split / "bin" / "test.comp")
    assert len(meta) == te and meta[0][:2] == ("new", "institution") and "nouvelle" in meta[0][2]
    assert len((split / "train.src").read_text(encoding="utf-8").splitlines()) == tr
    assert (split / "bin" / "dict.src.txt").read_bytes() == (split / "bin" / "dict.tgt.txt").read_bytes()
    assert (split / "code").is_file()


def test_noun_adj_sample_without_test_pairs_is_refused(tmp_path):
    """A sample with no swapped pair crashed in fairseq-preprocess after the old outputs were replaced."""
    from fairseq_compgen.data.binarize import EmptySubset
    from fairseq_compgen.prep import module as prep_module

    d = need(DATA / "europarl")
    for lang in ("en", "fr"):
        lines = (d / f"europarl-v7.fr-en.{lang}").read_text(encoding="utf-8").split("\n")[:150]
        (tmp_path / f"europarl-v7.fr-en.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(EmptySubset, match="test has 0 examples"):
        prep_module("noun_adj").main(["--out", str(tmp_path / "out"), "--europarl-dir", str(tmp_path),
                                      "--tagger", "pattern", "--bpe-tokens", "50"])
    assert not (tmp_path / "out" / "en-fr").exists()


def test_alignment_slip_and_empty_lines_dropped(tmp_path):
    (tmp_path / "a.en").write_text("A new institution is needed .\nHello there my friend .\n"
                                   "We need a specific response now .\nThis is a long English sentence that slipped "
                                   "out of alignment with its French side .\n", encoding="utf-8")
    (tmp_path / "a.fr").write_text("Une nouvelle institution est nécessaire .\n\n"
                                   "Il faut une réponse spécifique maintenant .\nBonjour .\n", encoding="utf-8")
    data, meta, rep = noun_adj.build(tmp_path / "a.en", tmp_path / "a.fr", tagger="pattern")
    assert rep["dropped"]["empty_fr"] == 1 and rep["dropped"]["length_ratio"] == 1
    assert rep["kept"] == {"train": 1, "valid": 0, "test": 1} and rep["n_in"] == 4
    assert meta[0].startswith("new\tinstitution\t")


def test_pattern_tagger_rules():
    assert noun_adj.pattern_pairs("a good decision and effective organisations".split()) == [
        ("good", "decision"), ("effective", "organisation")]
    assert noun_adj.is_test_pair("new", "response") and noun_adj.is_test_pair("specific", "source")
    assert not noun_adj.is_test_pair("particular", "response")  # same column: neither train nor test
    with pytest.raises(ValueError):
        noun_adj.choose_tagger("corenlp")


def test_spacy_tagger_missing_is_explained():
    try:
        import spacy  # noqa: F401
        spacy.load("en_core_web_sm")
        have_spacy = True
    except (ImportError, OSError):
        have_spacy = False
    if have_spacy:  # then the tagger is there and `auto` picks it
        assert noun_adj.choose_tagger("spacy") and noun_adj.choose_tagger("auto")[0].startswith("spacy")
        return
    with pytest.raises((ImportError, OSError), match="python -m spacy download en_core_web_sm"):
        noun_adj.choose_tagger("spacy")
    assert noun_adj.choose_tagger("auto")[0].startswith("pattern")


# --------------------------------------------------------------------------- COMP


def test_comp_on_hand_built_generate_log(tmp_path):
    meta = tmp_path / "test.comp"
    meta.write_text("new\tresponse\tnouveau,nouvel,nouvelle,nouveaux,nouvelles\tréponse,réponses\n"
                    "specific\tsource\tspécifique,spécifiques\tsource,sources\n"
                    "good\tinstitution\tbon,bonne,bons,bonnes\tinstitution,institutions\n"
                    "first\torganisation\tpremier,première,premiers,premières\torganisation,organisations\n",
                    encoding="utf-8")
    log = ("S-0\tx\nH-0\t-0.5\tune nouvelle ré@@ ponse .\n"          # inflection + BPE: hit
           "H-1\t-0.5\tdes sources spécifiques\n"                      # plural, noun before adjective: hit
           "H-2\t-0.5\tune institution adéquate\n"                     # adjective missing (synonym): miss
           "H-3\t-0.5\tla Première organisation\n")                    # case-insensitive: hit
    res = comp.score_generate_output(log.splitlines(), comp.read_meta(meta))
    assert res == {"n": 4, "hits": 3, "comp": 0.75}
    assert comp.comp_hit("l&apos; organisation efficace", {"efficace"}, {"organisation"})
    assert not comp.comp_hit("une nouvelle solution", {"nouvelle"}, {"réponse"})
    from fairseq_compgen.scoring.exact_match import ScoringError
    with pytest.raises(ScoringError, match="without a hypothesis"):
        comp.score_generate_output(log.splitlines()[:2], comp.read_meta(meta))
    (tmp_path / "bad.comp").write_text("new\tresponse\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.comp:1: expected 4 tab-separated"):
        comp.read_meta(tmp_path / "bad.comp")


def test_validation_comp_counts_hits_of_the_greedy_hypotheses(tmp_path, monkeypatch):
    """The in-loop COMP of --eval-comp (tasks/compgen.py valid_step and reduce_metrics), on hand-built greedy
    hypotheses (greedy decoding replaced) of two validation batches with ids out of order: a hit needs a form of
    the adjective and of the noun of the example's own metadata line, subwords joined, before the first EOS.
    3 hits of 5: comp 0.6."""
    import torch
    from fairseq import metrics
    from fairseq.criterions.cross_entropy import CrossEntropyCriterion
    from fairseq.data import Dictionary

    from fairseq_compgen.tasks import greedy
    from fairseq_compgen.tasks.compgen import CompgenConfig, CompgenTask
    from model_helpers import build

    meta = tmp_path / "test.comp"
    meta.write_text("new\tresponse\tnouveau,nouvel,nouvelle,nouveaux,nouvelles\tréponse,réponses\n"
                    "specific\tsource\tspécifique,spécifiques\tsource,sources\n"
                    "good\tinstitution\tbon,bonne,bons,bonnes\tinstitution,institutions\n"
                    "first\torganisation\tpremier,première,premiers,premières\torganisation,organisations\n"
                    "new\tinstitution\tnouveau,nouvel,nouvelle,nouveaux,nouvelles\tinstitution,institutions\n",
                    encoding="utf-8")
    hyps = {0: "une nouvelle ré@@ ponse .",        # inflection + BPE: hit
            1: "des sources spécifiques",           # plural, noun first: hit
            2: "une institution </s> bonne",        # the adjective only after EOS: miss
            3: "la première organisation",          # hit
            4: "une bonne institution"}             # another example's adjective: miss
    d = Dictionary()
    for word in " ".join(hyps.values()).split():
        if word != "</s>":
            d.add_symbol(word)
    task = CompgenTask(CompgenConfig(no_eval_accuracy=True, no_eval_tf_accuracy=True), d, d)
    task._comp_meta = comp.read_meta(meta)
    torch.manual_seed(0)
    model = build("compgen_transformer", src_words=len(d) - d.nspecial, tgt_words=len(d) - d.nspecial,
                  encoder_layers=1, decoder_layers=1, encoder_embed_dim=16, decoder_embed_dim=16,
                  encoder_ffn_embed_dim=16, decoder_ffn_embed_dim=16, encoder_attention_heads=2,
                  decoder_attention_heads=2)
    criterion = CrossEntropyCriterion(task, sentence_avg=False)
    current = {}

    def decoded(model_, src_tokens, src_lengths, steps, eos, pad=None):  # the batch's hypotheses, EOS, junk after
        assert src_tokens is current["net_input"]["src_tokens"] and eos == d.eos() and pad == d.pad()
        # as long as eval's fairseq-generate lets a hypothesis run: --max-len-b 200, below the decoder's positions
        assert steps == min(200, model.max_decoder_positions() - 1) == 200
        rows = [[d.index(w) for w in hyps[i].split()] + [eos] + [d.index("bonne")] * 3 for i in current["id"].tolist()]
        width = max(map(len, rows))
        return torch.tensor([r + [d.pad()] * (width - len(r)) for r in rows])
    monkeypatch.setattr(greedy, "greedy_decode", decoded)

    logs = []
    for ids in ([3, 0, 2], [4, 1]):  # expected hits: 2, then 1
        B = len(ids)
        src = torch.randint(d.nspecial, len(d), (B, 5))
        target = torch.randint(d.nspecial, len(d), (B, 4))
        target[:, -1] = d.eos()
        prev = torch.cat([torch.full((B, 1), d.eos()), target[:, :-1]], 1)
        current.update(id=torch.tensor(ids), nsentences=B, ntokens=target.numel(), target=target,
                       net_input={"src_tokens": src, "src_lengths": torch.full((B,), 5), "prev_output_tokens": prev},
                       comp_subset="test")
        logs.append(task.valid_step(dict(current), model, criterion)[2])
    assert [(log["_comp_hits"], log["_comp_total"]) for log in logs] == [(2, 3), (1, 2)]
    with metrics.aggregate(new_root=True) as agg:
        task.reduce_metrics(logs, criterion)
        assert agg.get_smoothed_values()["comp"] == 0.6


def test_europarl_train_comp_validation_generate_comp_and_bleu(europarl, tmp_path):
    split, _ = europarl
    data = split / "bin"
    log = run([BIN / "fairseq-train", data, "--user-dir", REPO / "fairseq_compgen", "--task", "compgen", *TINY, *TRAIN,
               "--max-update", "2", "--save-dir", tmp_path, "--valid-subset", "valid,test",
               "--eval-comp", data / "test.comp"])
    m = re.search(r"valid on 'test' subset \|.*\| comp ([0-9.]+) \|", log)
    assert m, log[-3000:]
    assert 0.0 <= float(m.group(1)) <= 1.0
    assert not re.search(r"valid on 'valid' subset \|.*\| comp ", log)
    # ... and the same run through fairseq-generate, then the COMP and BLEU scorers over its output
    gen = run([BIN / "fairseq-generate", data, "--user-dir", REPO / "fairseq_compgen", "--task", "compgen",
               "--path", tmp_path / "checkpoint_best.pt", "--gen-subset", "test", "--beam", "1", "--min-len", "0",
               "--max-len-b", "20", "--cpu"])
    n_test = len(comp.read_meta(data / "test.comp"))
    assert len(re.findall(r"^H-\d+\t", gen, flags=re.M)) == n_test > 0
    (tmp_path / "gen.txt").write_text(gen, encoding="utf-8")
    res = comp.main([str(tmp_path / "gen.txt"), "--meta", str(data / "test.comp")])
    assert res["n"] == n_test and 0 <= res["hits"] <= n_test
    # COMP counted independently from the H- lines and the metadata: a hit is a hypothesis holding one of the
    # adjective's forms and one of the noun's forms as words (Chaabouni et al. §5)
    H = {int(m.group(1)): set(w for w in re.split(r"[\W_]+", m.group(2).replace("@@ ", "").lower()) if w)
         for m in re.finditer(r"^H-(\d+)\t\S+\t(.*)$", gen, flags=re.M)}  # BPE joined, lowercased, words
    meta = [line.split("\t") for line in (data / "test.comp").read_text(encoding="utf-8").splitlines()]
    hits = sum(bool(H[i] & set(m[2].lower().split(","))) and bool(H[i] & set(m[3].lower().split(",")))
               for i, m in enumerate(meta))
    assert res["hits"] == hits and res["comp"] == pytest.approx(hits / n_test)
    assert 0.0 <= bleu.main([str(tmp_path / "gen.txt")])["bleu"] <= 100.0


# ------------------------------------------------------------------------------------ damaged inputs named


def test_flores_truncated_archive_and_member_name_the_file(tmp_path):
    from fairseq_compgen.data.io import ArchiveError

    arch = need(DATA / "flores" / flores.ARCHIVE)
    cut = tmp_path / "cut.tgz"
    cut.write_bytes(arch.read_bytes()[: arch.stat().st_size // 2])
    with pytest.raises(ArchiveError, match=rf"{cut}: corrupt or truncated archive"):
        flores.read_sets(cut, "ne-en")
    # a member cut mid-line (both sides as long: only the missing newline shows it)
    src = tmp_path / "src.tgz"
    _trimmed_archive(arch, src, 20)
    with tarfile.open(src) as tin, tarfile.open(tmp_path / "m.tgz", "w:gz") as tout:
        for m in tin.getmembers():
            data = tin.extractfile(m).read()
            if m.name.endswith("wikipedia.test.ne-en.ne"):
                data = data[:-1]  # the last newline
            info = tarfile.TarInfo(m.name)
            info.size = len(data)
            tout.addfile(info, io.BytesIO(data))
    with pytest.raises(DataError, match=r"m\.tgz:wikipedia\.test\.ne-en\.ne:20: a last line ending with a newline"):
        flores.read_sets(tmp_path / "m.tgz", "ne-en")


def test_iwslt_and_europarl_invalid_utf8_name_file_and_line(tmp_path):
    p = tmp_path / "x.xml"
    p.write_bytes(b'<doc>\n<seg id="1"> a </seg>\n<seg id="2"> gr\xfc\xdfe </seg>\n</doc>\n')
    with pytest.raises(DataError, match=r"x\.xml:3: UTF-8 text"):
        iwslt14.read_xml_segments(p)
    (tmp_path / "a.en").write_text("Hello .\nA new institution .\n", encoding="utf-8")
    (tmp_path / "a.fr").write_bytes(b"Bonjour .\nUne nouvelle institution \xe9tait .\n")
    with pytest.raises(DataError, match=r"a\.fr:2: UTF-8 text"):
        noun_adj.read_europarl(tmp_path / "a.en", tmp_path / "a.fr")


def test_bleu_refuses_a_missing_sentence_and_labels_what_it_scored(tmp_path):
    """Sentences fairseq-generate skipped are never left out in silence (eval passes the subset's size), and text
    without subword marks (fairseq's --remove-bpe already applied: still Moses-tokenized) is not called detokenized."""
    out = tmp_path / "gen.txt"
    out.write_text("T-0\tthe cat\nH-0\t-0.1\tthe cat\nT-1\ta dog@@ s\nH-1\t-0.2\ta dog@@ s\n")
    assert bleu.main([str(out), "--expected-count", "2"])["label"] == "detokenized BLEU (sacrebleu)"
    with pytest.raises(ScoringError, match=r"gen.txt: 2 sentences scored, expected 3"):
        bleu.main([str(out), "--expected-count", "3"])
    from fairseq_compgen import scoring
    assert scoring.get("bleu").eval_argv(out, tmp_path, "gen", 3) == [str(out), "--expected-count", "3"]
    plain = bleu.score(["the cat sat ."], ["the cat sat ."])
    assert plain["subword"] == "none" and plain["label"].startswith("BLEU (sacrebleu, on the text as decoded")


def test_bleu_references_are_the_prepared_text_not_the_t_lines(tmp_path, capsys):
    """fairseq-generate writes a T- line from the binarized target: a word outside the target dictionary reads
    <<unk>>, and BLEU was taken against it (evaluation audit, 2026-11-29). `fairseq-compgen eval` now passes the
    subset's prepared text beside DATA, each line checked against its T- line."""
    from fairseq_compgen import scoring

    log = tmp_path / "g.txt"
    log.write_text("T-0\tthe <<unk>> sat on the mat\nH-0\t-0.1\tthe cat sat on the mat\n"
                   "T-1\ta dog@@ <<unk>> ran away\nH-1\t-0.2\ta dog@@ s ran away\n", encoding="utf-8")
    pair = tmp_path / "de-en"
    (pair / "bin").mkdir(parents=True)
    text = pair / "test.tgt"
    text.write_text("the cat sat on the mat\na dog@@ s ran away\n", encoding="utf-8")
    assert scoring.get("bleu").eval_argv(log, pair / "bin", "test", 2) == \
        [str(log), "--expected-count", "2", "--lang", "en", "--references", str(text)]
    t_lines = bleu.main([str(log), "--detok", "none"])
    assert t_lines["references"] == "T- lines" and t_lines["references_with_unk"] == 2 and t_lines["bleu"] < 100
    assert "references: T- lines (2 with <<unk>>)" in capsys.readouterr().out
    ours = bleu.main([str(log), "--detok", "none", "--references", str(text)])
    assert ours["bleu"] == pytest.approx(100.0) and ours["references"] == str(text)
    # T- lines whose subword marks fairseq-generate removed (--post-process) match the text with its marks
    removed = tmp_path / "removed.txt"
    removed.write_text("T-0\tthe <<unk>> sat on the mat\nH-0\t-0.1\tthe cat sat on the mat\n"
                       "T-1\ta dogs ran away\nH-1\t-0.2\ta dogs ran away\n", encoding="utf-8")
    assert bleu.main([str(removed), "--detok", "none", "--references", str(text)])["bleu"] == pytest.approx(100.0)
    # another file is named by its line; so is one with too few lines
    text.write_text("a cat sat on the mat\na dog@@ s ran away\n", encoding="utf-8")
    with pytest.raises(ScoringError, match=r"test\.tgt:1: 'a cat sat on the mat' is not the target of id 0 in "):
        bleu.main([str(log), "--references", str(text)])
    text.write_text("the cat sat on the mat\n", encoding="utf-8")
    with pytest.raises(ScoringError, match=r"test\.tgt: 1 lines, but .* has id 1: expected one reference per example"):
        bleu.main([str(log), "--references", str(text)])


def test_bleu_detokenizes_in_the_target_language_of_the_data(tmp_path, capsys):
    """`fairseq-compgen eval --metric bleu` passes the target of DATA's language pair to the Moses detokenizer (a
    French target detokenized as English keeps "l' an"; the audit of 2026-11-29 found every eval scored as English),
    and the result records it."""
    from fairseq_compgen import scoring
    for folder, lang in (("en-fr/bin", "fr"), ("de-en/bin", "en"), ("en-ne", "ne"), ("scan/bin", None)):
        (tmp_path / folder).mkdir(parents=True)
        assert bleu.target_language(tmp_path / folder) == lang
        assert scoring.get("bleu").eval_argv(Path("g.txt"), tmp_path / folder, "test", 2) == \
            ["g.txt", "--expected-count", "2", *(["--lang", lang] if lang else [])]
    log = tmp_path / "g.txt"
    log.write_text("T-0\tl' an 2000 , c' est la vie .\nH-0\t-0.1\tl' an 2000 , c' est une vie .\n"
                   "T-1\tla com@@ mission\nH-1\t-0.2\tla com@@ mission\n", encoding="utf-8")
    fr = bleu.main([str(log), "--lang", "fr"])
    assert "(Moses detokenizer: fr)" in capsys.readouterr().out and fr["moses_lang"] == "fr"
    en = bleu.main([str(log), "--lang", "en"])
    assert en["moses_lang"] == "en" and en["bleu"] != pytest.approx(fr["bleu"])
    from sacremoses import MosesDetokenizer
    assert MosesDetokenizer(lang="fr").detokenize("l' an".split()) == "l'an"
    assert "moses_lang" not in bleu.score(["a b"], ["a b"], detok="none")
