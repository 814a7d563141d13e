"""`--beam-stop bound` (tasks/beam_stop.py): beam search that ends a sentence only when no live hypothesis can still
beat its best ended ones. Checked against a direct enumeration of every output a tiny model can give, and against
fairseq's SequenceGenerator on the same beams."""
import argparse
import itertools
import math

import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

from fairseq_compgen.errors import UsageError
from fairseq_compgen.tasks.beam_stop import BoundedBeamSearch
from model_helpers import build, compgen_archs, make_dictionary

TINY = dict(encoder_embed_dim=16, decoder_embed_dim=16, encoder_ffn_embed_dim=32, decoder_ffn_embed_dim=32,
            encoder_attention_heads=2, decoder_attention_heads=2)
MAX_LEN = 3  # outputs of at most 3 tokens, then EOS


def _model(arch, seed=2, **flags):
    torch.manual_seed(seed)
    model = build(arch, src_words=5, tgt_words=3, **TINY, **flags).eval()  # target: 4 specials + 3 words
    with torch.no_grad():  # sharper distributions than a fresh model's, so that outputs differ in length and tokens
        for p in model.decoder.parameters():
            p.mul_(2.0)
    return model


def _sample(model, seed=2):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 9, (4, 5), generator=g)  # [4 sentences, 5 tokens]
    src[:, -1] = model.encoder.dictionary.eos()
    return {"net_input": {"src_tokens": src, "src_lengths": torch.full((4,), 5)}, "id": torch.arange(4)}


def _every_output(model, sample, min_len, lenpen, normalize, n_best=1):
    """The direct definition: score every output of min_len..MAX_LEN tokens (any token but pad and EOS) plus EOS
    by one teacher-forced pass, sum of log-probs / length ** lenpen; per sentence the n_best best (tokens, score),
    best first (one pair where n_best is 1)."""
    d = model.decoder.dictionary
    eos, pad = d.eos(), d.pad()
    choices = [t for t in range(len(d)) if t not in (pad, eos)]
    outputs = [list(p) + [eos] for n in range(min_len, MAX_LEN + 1) for p in itertools.product(choices, repeat=n)]
    n, T = len(outputs), MAX_LEN + 1
    prev = torch.full((n, T), pad)  # [n, T]: EOS (the decoder's start), then the output shifted right
    target = torch.full((n, T), pad)  # [n, T]
    for i, out in enumerate(outputs):
        prev[i, :len(out)] = torch.tensor([eos] + out[:-1])
        target[i, :len(out)] = torch.tensor(out)
    best = []
    for b in range(sample["net_input"]["src_tokens"].size(0)):
        src = sample["net_input"]["src_tokens"][b:b + 1].expand(n, -1)
        with torch.no_grad():
            lprobs = model.get_normalized_probs(model(src, torch.full((n,), src.size(1)), prev), log_probs=True)
        summed = lprobs.gather(2, target[:, :, None])[:, :, 0].masked_fill(target.eq(pad), 0).sum(1)  # [n]
        lengths = target.ne(pad).sum(1).float()  # [n], EOS included
        score = summed / lengths ** lenpen if normalize else summed
        top = score.topk(n_best).indices.tolist()
        ranked = [(outputs[i], float(score[i])) for i in top]
        best.append(ranked[0] if n_best == 1 else ranked)
    return best


def _search(cls, model, beam, **options):
    return cls([model], model.decoder.dictionary, beam_size=beam, max_len_a=0, max_len_b=MAX_LEN, **options)


SETTINGS = [dict(min_len=0, len_penalty=1.0), dict(min_len=1, len_penalty=1.0), dict(min_len=0, len_penalty=0.0),
            dict(min_len=0, len_penalty=2.0), dict(min_len=1, len_penalty=-0.5),
            dict(min_len=0, len_penalty=1.0, normalize_scores=False)]


# one preset per decoding cache of its own (tests/test_models.py reorders the caches of every preset)
ARCHS = ["compgen_transformer_scan", "rel_uni_transformer_scan", "linear_l2_uni_transformer_scan",
         "sag_t5_transformer_scan", "sag_conv_transformer_scan", "sag_fixed_span_transformer_scan", "ontanon_rel2_eb_c",
         "syntactic_attention_scan", "cope_transformer_scan", "alibi_transformer_scan"]


def test_the_presets_cover_every_model_class():
    from fairseq.models import ARCH_MODEL_REGISTRY

    assert {ARCH_MODEL_REGISTRY[a] for a in ARCHS} == {ARCH_MODEL_REGISTRY[a] for a in compgen_archs()}


@pytest.mark.parametrize("arch, flags", [(a, {}) for a in ARCHS] + [
    ("rel_uni_transformer_scan", {"encoder_bos": True}),  # the encoder's start token (modules/encoder_bos.py),
    ("ontanon_rel2_eb_c", {"encoder_bos": True})])        # also where the copy decoder must not copy it
def test_a_beam_holding_every_prefix_finds_the_best_output(arch, flags):
    """With a beam as wide as the number of prefixes (5 ** 3), beam search is exhaustive: it must return the output
    the enumeration finds best, with its score, and positional scores that sum to it. This also checks that
    incremental decoding with beams reordered at every step equals the model's full forward pass."""
    model = _model(arch, **flags)
    sample = _sample(model)
    for options in (SETTINGS[0], SETTINGS[4]):
        hyps = _search(BoundedBeamSearch, model, 5 ** MAX_LEN, **options).generate([model], sample)
        expected = _every_output(model, sample, options["min_len"], options["len_penalty"], True)
        for b, (tokens, score) in enumerate(expected):
            best = hyps[b][0]
            assert best["tokens"].tolist() == tokens and float(best["score"]) == pytest.approx(score, rel=1e-4, abs=1e-4), (
                arch, options, b)
            assert float(best["positional_scores"].sum()) / len(tokens) ** options["len_penalty"] == \
                pytest.approx(score, rel=1e-4, abs=1e-4)
            assert [float(h["score"]) for h in hyps[b]] == sorted((float(h["score"]) for h in hyps[b]), reverse=True)


def test_a_padded_batch_decodes_each_sentence_as_alone():
    """Sources of different lengths, left-padded as fairseq batches them: each sentence's hypotheses are those it
    gets decoded alone."""
    from fairseq.data import data_utils

    for arch in ARCHS:
        model = _model(arch)
        d = model.encoder.dictionary
        g = torch.Generator().manual_seed(5)
        sources = [torch.cat([torch.randint(4, 9, (n - 1,), generator=g), torch.tensor([d.eos()])]) for n in (6, 3, 5, 2)]
        batch = {"net_input": {"src_tokens": data_utils.collate_tokens(sources, d.pad(), d.eos(), left_pad=True),
                               "src_lengths": torch.tensor([len(s) for s in sources])}}
        together = _search(BoundedBeamSearch, model, 3, min_len=0, nbest=2).generate([model], batch)
        for s, hyps in zip(sources, together):
            alone = {"net_input": {"src_tokens": s[None], "src_lengths": torch.tensor([len(s)])}}
            (expected,) = _search(BoundedBeamSearch, model, 3, min_len=0, nbest=2).generate([model], alone)
            assert [h["tokens"].tolist() for h in hyps] == [h["tokens"].tolist() for h in expected], arch
            assert [float(h["score"]) for h in hyps] == pytest.approx([float(h["score"]) for h in expected], abs=1e-3)


def test_attention_weights_come_as_fairseqs_do():
    """Our models return no attention weights (fairseq-generate's --print-alignment is refused for them); a model
    that does (fairseq's own transformer) gets each hypothesis's [src_len, len] weights, equal to those fairseq's
    search returns for the same hypothesis, each its own tensor (not a view of the search's buffer)."""
    torch.manual_seed(0)
    model = build("transformer", src_words=5, tgt_words=3, encoder_layers=1, decoder_layers=1, **TINY).eval()
    sample = _sample(model)
    ours = _search(BoundedBeamSearch, model, 4, min_len=2).generate([model], sample)
    theirs = _search(SequenceGenerator, model, 4, min_len=2).generate([model], sample)
    compared = 0
    for o, t in zip(ours, theirs):
        fairseq = {tuple(h["tokens"].tolist()): h for h in t}
        for h in o:
            assert h["attention"].shape == (sample["net_input"]["src_tokens"].size(1), len(h["tokens"]))
            assert h["attention"].untyped_storage().nbytes() == h["attention"].numel() * h["attention"].element_size()
            same = fairseq.get(tuple(h["tokens"].tolist()))
            if same is not None:
                assert torch.allclose(h["attention"], same["attention"], atol=1e-6)
                compared += 1
    assert compared >= 4


@pytest.mark.parametrize("options", SETTINGS)
def test_every_setting_finds_the_best_output_and_never_scores_below_fairseq(options):
    """Each length setting against the enumeration (exhaustive beam), and narrow beams against fairseq's
    SequenceGenerator: its sentences end earlier on the same beams, so ours scores at least as high on every
    sentence; over these settings fairseq's early end loses the best output somewhere."""
    model = _model("rel_uni_transformer_scan")
    sample = _sample(model)
    normalize = options.get("normalize_scores", True)
    expected = _every_output(model, sample, options["min_len"], options["len_penalty"], normalize)
    hyps = _search(BoundedBeamSearch, model, 5 ** MAX_LEN, **options).generate([model], sample)
    assert [(h[0]["tokens"].tolist(), pytest.approx(float(h[0]["score"]), rel=1e-4, abs=1e-4)) for h in hyps] == expected
    for beam in (1, 2, 4):
        ours = _search(BoundedBeamSearch, model, beam, **options).generate([model], sample)
        theirs = _search(SequenceGenerator, model, beam, **options).generate([model], sample)
        for b in range(len(ours)):
            assert float(ours[b][0]["score"]) >= float(theirs[b][0]["score"]) - 1e-5, (beam, b)


def test_fairseq_ends_too_early_where_we_do_not():
    """Settings where fairseq's rule returns a worse output than the beam holds (beam 1: fairseq ends a sentence with
    the first hypothesis that ends; beam 2: once two have)."""
    model = _model("rel_uni_transformer_scan")
    sample = _sample(model)
    better = 0
    for beam, options in itertools.product((1, 2), (dict(normalize_scores=False), dict(len_penalty=1.0))):
        ours = _search(BoundedBeamSearch, model, beam, min_len=0, **options).generate([model], sample)
        theirs = _search(SequenceGenerator, model, beam, min_len=0, **options).generate([model], sample)
        better += sum(float(o[0]["score"]) > float(t[0]["score"]) + 1e-3 for o, t in zip(ours, theirs))
    assert better >= 4


def test_nbest_hypotheses_are_final():
    """With --nbest n a sentence ends only when its n best ended hypotheses are decided: those of the enumeration."""
    model = _model("compgen_transformer_scan")
    sample = _sample(model)
    expected = _every_output(model, sample, 0, 1.0, True, n_best=3)
    hyps = _search(BoundedBeamSearch, model, 5 ** MAX_LEN, min_len=0, nbest=3).generate([model], sample)
    for h, e in zip(hyps, expected):
        assert [x["tokens"].tolist() for x in h[:3]] == [tokens for tokens, _ in e]


def _task(beam_stop="bound"):
    from fairseq_compgen.tasks.compgen import CompgenConfig, CompgenTask

    d = make_dictionary(3)
    return CompgenTask(CompgenConfig(beam_stop=beam_stop), d, d)


def _generation(**kw):
    args = dict(beam=2, max_len_a=0, max_len_b=5, min_len=1, nbest=1, sampling=False, diverse_beam_groups=-1,
                diversity_rate=-1.0, match_source_len=False, constraints=None, prefix_size=0, lm_path=None,
                no_repeat_ngram_size=0, print_alignment=None)
    return argparse.Namespace(**{**args, **kw})


def test_the_task_builds_our_search_and_refuses_what_it_does_not_implement():
    model = _model("compgen_transformer_scan")
    assert type(_task().build_generator([model], _generation())) is BoundedBeamSearch
    assert type(_task("fairseq").build_generator([model], _generation())) is SequenceGenerator
    for flag, value in [("sampling", True), ("diverse_beam_groups", 2), ("match_source_len", True),
                        ("prefix_size", 1), ("no_repeat_ngram_size", 2), ("constraints", "ordered"),
                        ("diversity_rate", 0.5)]:
        with pytest.raises(UsageError, match=f"--{flag.replace('_', '-')} .*--beam-stop bound is plain beam search"):
            _task().build_generator([model], _generation(**{flag: value}))
    assert type(_task().build_generator([model], _generation(diverse_beam_groups=0))) is BoundedBeamSearch  # off
    for flag, value, expected in [("beam", 0, r"--beam 0: expected a positive width with --beam-stop bound \(1: greedy\)"),
                                  ("beam", -2, r"--beam -2: expected a positive width"),
                                  ("lenpen", math.nan, "--lenpen nan: expected a finite number with --beam-stop bound"),
                                  ("unkpen", -math.inf, "--unkpen -inf: expected a finite number")]:
        with pytest.raises(UsageError, match=f"^{expected}"):  # tracebacks or empty outputs
            _task().build_generator([model], _generation(**{flag: value}))
