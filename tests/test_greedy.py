"""Exact match as Csordás et al. (2021, App. A and their code) define it, against a direct per-row implementation."""
import random

import pytest
import torch

from fairseq_compgen.tasks.greedy import batch_exact_match, exact_match_rows, greedy_decode, greedy_match_teacher_forced
from model_helpers import build, compgen_archs, make_dictionary

PAD, EOS = 1, 2


def slow(pred, target, oracle):
    out = []
    for b in range(pred.size(0)):
        ref = [t for t in target[b].tolist() if t not in (PAD, EOS)]
        row = pred[b].tolist()
        hyp = row[: len(ref)] if oracle else (row[: row.index(EOS)] if EOS in row else row)
        out.append(hyp == ref)
    return torch.tensor(out)


def test_exact_match_rows_equals_direct_definition():
    random.seed(0)
    torch.manual_seed(0)
    correct = 0
    for _ in range(2000):
        B, T1, T2 = 4, random.randint(1, 7), random.randint(1, 7)
        target = torch.full((B, T2), PAD)
        for b in range(B):  # fairseq targets: tokens, EOS, then pads
            n = random.randint(0, T2 - 1)
            target[b, :n] = torch.randint(4, 7, (n,))
            target[b, n] = EOS
        pred = torch.randint(2, 7, (B, T1))
        for b in range(B):  # half the rows start as copies of the reference (+EOS), so matches occur
            if random.random() < 0.5:
                ref = [t for t in target[b].tolist() if t not in (PAD, EOS)] + [EOS]
                pred[b, : min(T1, len(ref))] = torch.tensor(ref[:T1])
        for oracle in (False, True):
            expected = slow(pred, target, oracle)
            assert torch.equal(exact_match_rows(pred, target, PAD, EOS, oracle), expected)
            correct += int(expected.sum())
    assert correct > 1000  # both verdicts are exercised


# ---- greedy verdict from one teacher-forced pass ------------------------------------------------------------

def _output_bias(model):
    """The decoder's output bias [V] (compgen_transformer: output_bias; syntactic attention: out.bias)."""
    d = model.decoder
    return d.output_bias if hasattr(d, "output_bias") else d.out.bias


def _greedy_targets(model, src, lengths, steps, g):
    """Targets on which a model's greedy verdicts are mixed: its own greedy output where it stops (correct), cut
    short without EOS (wrong: the model would go on), or with one token changed (wrong)."""
    pred = greedy_decode(model, src, lengths, steps, EOS)  # [B, steps]
    rows, stopped = [], 0
    for row in pred.tolist():
        hyp = row[: row.index(EOS)] if EOS in row else row
        hyp = hyp[: hyp.index(PAD)] if PAD in hyp else hyp  # a reference never holds PAD (wrong on both paths)
        kind = stopped % 3 if EOS in row else 0  # rows that stop: correct, too short, one wrong token in turn
        stopped += EOS in row
        if kind and not hyp:  # the model stops at once: any token is wrong
            hyp = [4]
        elif kind == 1:  # too short: greedy would not emit EOS there
            hyp = hyp[: int(torch.randint(0, len(hyp), (1,), generator=g))]
        elif kind == 2:  # one wrong token
            i = int(torch.randint(0, len(hyp), (1,), generator=g))
            hyp[i] = 4 + (hyp[i] - 4 + 1) % (len(model.decoder.dictionary) - 4)
        rows.append(hyp + [EOS])
    T = max(map(len, rows))
    target = torch.tensor([r + [PAD] * (T - len(r)) for r in rows])  # [B, T] tokens, EOS, pads
    prev = torch.cat([torch.full((len(rows), 1), EOS), target[:, :-1]], 1).masked_fill(target.eq(PAD), PAD)
    return target, prev


# Every mechanism, at its base size: the dataset-sized presets only change sizes, and every arch's step-by-step
# decoding is checked against its full forward pass in test_models.py, which is what the equivalence rests on.
SIZED = ("_cfq", "_cogs", "_math", "_pcfg", "_flores", "_iwslt_de_en", "_noun_adj")


@pytest.mark.parametrize("arch", [a for a in compgen_archs() if not a.endswith(SIZED)])
def test_teacher_forced_verdict_equals_greedy_decoding(arch):
    """`accuracy` (one teacher-forced pass) gives exactly the step-by-step greedy decoder's verdict, row by row."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = build(arch, src_words=5, tgt_words=2).eval()
    B, S = 48, 6
    src = torch.randint(4, len(model.encoder.dictionary), (B, S), generator=g)
    src[::4, :2] = PAD  # left padding, as fairseq batches sources
    lengths = src.ne(PAD).sum(1)
    with torch.no_grad():  # raise EOS until a quarter of the rows stop within 12 steps (a random model rarely stops)
        for _ in range(40):
            pred = greedy_decode(model, src, lengths, 12, EOS)
            if int(pred.eq(EOS).any(1).sum()) >= B // 4:
                break
            _output_bias(model)[EOS] += 0.25
            if getattr(model.decoder, "copy", None) is not None:  # EOS can only come from the vocabulary side:
                model.decoder.copy.gate.bias -= 0.25  # lower the copy gate too (the Keras-initialised large models)
    target, prev = _greedy_targets(model, src, lengths, 12, g)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths, "prev_output_tokens": prev}, "target": target}
    greedy = batch_exact_match(model, sample, PAD, EOS)
    teacher_forced = greedy_match_teacher_forced(model, sample, PAD)
    assert teacher_forced.tolist() == greedy.tolist()
    assert 0 < int(greedy.sum()) < B, f"{arch}: verdicts not mixed ({int(greedy.sum())}/{B} correct)"


def test_generate_caps_each_batch_at_its_longest_reference():
    """--max-len-from-target: fairseq's generator gets max_len = longest reference (tokens + EOS) of the batch for
    that batch only, and its own limits back afterwards."""
    from fairseq_compgen.tasks.compgen import CompgenConfig, CompgenTask

    class Generator:  # records the limits SequenceGenerator would use
        max_len_a, max_len_b = 1.5, 200

        def generate(self, models, sample, **kw):
            self.seen = (self.max_len_a, self.max_len_b)
            return []

    d = make_dictionary(3)
    target = torch.tensor([[5, 6, EOS, PAD], [5, 6, 4, EOS], [EOS, PAD, PAD, PAD]])
    gen = Generator()
    CompgenTask(CompgenConfig(max_len_from_target=True), d, d).inference_step(gen, [], {"target": target})
    assert gen.seen == (0, 4) and (gen.max_len_a, gen.max_len_b) == (1.5, 200)
    CompgenTask(CompgenConfig(), d, d).inference_step(gen, [], {"target": target})
    assert gen.seen == (1.5, 200)  # off by default: plain fairseq-generate behaviour


# ---- oracle length (--eval-oracle-length): EOS forbidden, exactly the reference length decoded and compared ------

class _Scripted:
    """A stand-in model: at decoding step t (the t-th token after the leading EOS) row b's scores are
    `scores[b, t]`, whatever was fed; counts the decoder calls."""

    def __init__(self, scores):
        self.scores, self.calls = scores, 0

    def encoder(self, src_tokens, src_lengths=None):
        return {}

    def decoder(self, tokens, encoder_out=None, incremental_state=None):
        self.calls += 1
        t = tokens.size(1) - 1
        return self.scores[:, t: t + 1], None

    def get_normalized_probs(self, net_output, log_probs):
        return torch.log_softmax(net_output[0], -1)


# row: (reference tokens, the scripted model's preferred tokens step by step: (first,) or (first, second choice);
# 4 comes second where none is given, and after a script EOS comes first, 4 second).
# Plain = greedy to the first EOS; oracle = EOS forbidden, ref_len steps, the first ref_len tokens compared.
_ROWS = [
    ([5, 6], [(5,), (6,), (EOS,)]),  # right tokens, stops right: correct either way
    ([5, 6, 7], [(5,), (6,), (EOS, 7)]),  # stops one short; with EOS forbidden the 2nd choice 7 completes it
    ([5], [(5,), (6,), (EOS,)]),  # goes on past the reference: only the oracle's cut-off at ref_len saves it
    ([4, 4], [(4,), (5,), (EOS,)]),  # a wrong token: wrong either way
    ([6], [(EOS, 4)]),  # stops at once; its 2nd choice 4 is wrong too
    ([7, 4], [(7,), (EOS, 5)]),  # stops early, and its 2nd choice is wrong
    ([4, 5], [(4,), (5,), (7,), (EOS,)]),  # right tokens, but no EOS after them
]
_PLAIN = [True, False, False, False, False, False, False]
_ORACLE = [True, True, True, False, False, False, True]


def _scripted_batch(V=8, T=6):
    B = len(_ROWS)
    scores = torch.zeros(B, T, V)
    scores[:, :, EOS], scores[:, :, 4] = 3.0, 1.0
    for b, (_, script) in enumerate(_ROWS):
        for t, choice in enumerate(script):
            scores[b, t] = 0.0
            scores[b, t, 4] = 1.0
            scores[b, t, choice[0]] = 3.0
            if len(choice) > 1:
                scores[b, t, choice[1]] = 2.0
    width = max(len(ref) for ref, _ in _ROWS) + 1
    target = torch.tensor([ref + [EOS] + [PAD] * (width - len(ref) - 1) for ref, _ in _ROWS])  # tokens, EOS, pads
    src = torch.full((B, 3), 4)
    sample = {"net_input": {"src_tokens": src, "src_lengths": torch.full((B,), 3),
                            "prev_output_tokens": torch.full((B, width), EOS)}, "target": target}
    return _Scripted(scores), sample


def test_greedy_decode_forbid_eos_never_emits_eos_and_runs_every_step():
    model, sample = _scripted_batch()
    net = sample["net_input"]
    pred = greedy_decode(model, net["src_tokens"], net["src_lengths"], 4, EOS, forbid_eos=True)
    assert model.calls == 4 and pred.shape == (len(_ROWS), 4)  # no early stop, though every row "wants" EOS
    assert not bool(pred.eq(EOS).any())
    assert pred.tolist() == [[5, 6, 4, 4], [5, 6, 7, 4], [5, 6, 4, 4], [4, 5, 4, 4], [4, 4, 4, 4], [7, 5, 4, 4],
                             [4, 5, 7, 4]]  # the 2nd choice wherever EOS comes first
    model.calls = 0
    plain = greedy_decode(model, net["src_tokens"], net["src_lengths"], 6, EOS)
    assert model.calls == 4  # every row has emitted EOS by step 4: stops, fills with EOS
    assert plain.tolist()[1] == [5, 6, EOS, EOS, EOS, EOS] and plain.tolist()[4] == [EOS] * 6


def test_oracle_length_verdicts_differ_from_plain_exact_match():
    """`batch_exact_match(oracle=True)`: EOS forbidden, max ref_len steps decoded, each row's first ref_len tokens
    compared (what follows them does not count); the plain verdict also needs EOS right after them."""
    model, sample = _scripted_batch()
    assert batch_exact_match(model, sample, PAD, EOS).tolist() == _PLAIN
    model.calls = 0
    assert batch_exact_match(model, sample, PAD, EOS, oracle=True).tolist() == _ORACLE
    assert model.calls == max(len(ref) for ref, _ in _ROWS)  # exactly the longest reference's length


def _slow_greedy(model, src, ref_len, oracle):
    """One sentence (no padding), the full forward pass at every step on its own previous outputs; oracle: EOS
    masked, ref_len tokens; else until EOS or ref_len + 1 tokens. -> the hypothesis (without EOS)."""
    out = [EOS]
    for _ in range(ref_len if oracle else ref_len + 1):
        logits = model(src[None], torch.tensor([src.numel()]), torch.tensor([out]))[0][0, -1]
        if oracle:
            logits[EOS] = float("-inf")
        out.append(int(logits.argmax()))
        if out[-1] == EOS:
            return out[1:-1]
    return out[1:]


def test_oracle_and_plain_verdicts_equal_slow_decoding_on_a_tiny_transformer():
    """A tiny rel_transformer (its decoder reads its own outputs), a left-padded batch: both verdicts of
    `batch_exact_match` equal a per-sentence decoding with a full forward pass at every step. EOS is raised until
    plain greedy stops early on a quarter of the rows; references: plain greedy's output where it stops after 1-4
    tokens, else the first 1-4 tokens of the EOS-forbidden decoding, or those with one token changed."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = build("rel_transformer", src_words=5, tgt_words=4, encoder_embed_dim=16, decoder_embed_dim=16,
                  encoder_ffn_embed_dim=32, decoder_ffn_embed_dim=32).eval()
    B, S = 16, 5
    src = torch.randint(4, 9, (B, S), generator=g)
    src[:, -1] = EOS
    src[::3, :2] = PAD
    rows = [s[s.ne(PAD)] for s in src]
    V = len(model.decoder.dictionary)
    with torch.no_grad():
        for _ in range(40):
            if sum(len(_slow_greedy(model, r, 3, False)) < 4 for r in rows) >= B // 4:
                break
            _output_bias(model)[EOS] += 0.25
        refs = []
        for b, r in enumerate(rows):
            ref = _slow_greedy(model, r, 4, True)[: 1 + b % 4]
            stopped = _slow_greedy(model, r, 4, False)
            if 0 < len(stopped) < 5:  # greedy stops after 1-4 tokens: its own output (correct either way)
                ref = stopped
            elif b % 3 == 2:  # one wrong token
                i = int(torch.randint(0, len(ref), (1,), generator=g))
                ref[i] = 4 + (ref[i] - 4 + 1) % (V - 4)
            assert PAD not in ref
            refs.append(ref)
        T = max(map(len, refs)) + 1
        target = torch.tensor([ref + [EOS] + [PAD] * (T - len(ref) - 1) for ref in refs])
        prev = torch.cat([torch.full((B, 1), EOS), target[:, :-1]], 1).masked_fill(target.eq(PAD), PAD)
        sample = {"net_input": {"src_tokens": src, "src_lengths": src.ne(PAD).sum(1), "prev_output_tokens": prev},
                  "target": target}
        plain_hyps = [_slow_greedy(model, r, len(ref), False) for r, ref in zip(rows, refs)]
        plain = [hyp == ref for hyp, ref in zip(plain_hyps, refs)]
        oracle = [_slow_greedy(model, r, len(ref), True) == ref for r, ref in zip(rows, refs)]
        assert batch_exact_match(model, sample, PAD, EOS).tolist() == plain
        assert batch_exact_match(model, sample, PAD, EOS, oracle=True).tolist() == oracle
    # oracle-only matches where plain greedy stops before the reference's end (EOS forbidden is what makes them)
    # and where it runs past it (the cut-off at ref_len); oracle misses
    assert any(o and len(hyp) < len(ref) for o, hyp, ref in zip(oracle, plain_hyps, refs))
    assert any(o and len(hyp) > len(ref) for o, hyp, ref in zip(oracle, plain_hyps, refs))
    assert any(plain) and not all(oracle)


@pytest.mark.parametrize("arch", ["compgen_transformer", "syntactic_attention"])
def test_padding_is_never_predicted_as_fairseq_generate_never_selects_it(arch):
    """Where PAD scores highest, fairseq's SequenceGenerator (what `fairseq-compgen eval` runs) takes the next best
    token; the in-loop verdicts must do the same (found by the audit of 2026-11-29: they took PAD and called the row
    wrong). A model whose PAD output bias is raised predicts PAD at most steps: step-by-step greedy decoding equals
    fairseq's beam-1 hypotheses, and the one-pass verdict on those hypotheses as targets is right on every row."""
    from fairseq.sequence_generator import SequenceGenerator

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = build(arch, src_words=5, tgt_words=4).eval()
    B, S, steps = 16, 6, 8
    src = torch.randint(4, len(model.encoder.dictionary), (B, S), generator=g)
    lengths = src.ne(PAD).sum(1)
    with torch.no_grad():
        _output_bias(model)[PAD] += 50.0  # PAD first at every step of every row
        for _ in range(80):  # raise EOS until a quarter of the rows stop on their own (a random model rarely does)
            ours = greedy_decode(model, src, lengths, steps, EOS, pad=PAD)
            if int(ours.eq(EOS).any(1).sum()) >= B // 4:
                break
            _output_bias(model)[EOS] += 0.25
    net = {"src_tokens": src, "src_lengths": lengths}
    assert bool(greedy_decode(model, src, lengths, steps, EOS).eq(PAD).all())  # without the rule: PAD everywhere
    assert not bool(ours.eq(PAD).any())
    gen = SequenceGenerator([model], model.decoder.dictionary, beam_size=1, max_len_a=0, max_len_b=steps, min_len=0)
    hyps = gen.forward({"net_input": net})
    rows = []
    for b, h in enumerate(hyps):
        theirs = h[0]["tokens"].tolist()  # ends with EOS (forced at max length)
        mine = ours[b].tolist()
        mine = mine[: mine.index(EOS)] if EOS in mine else mine
        assert mine == theirs[:-1], (b, mine, theirs)
        if len(theirs) <= steps:  # stopped on its own (not at the length limit): the hypothesis as a reference
            rows.append((b, theirs))
    assert B // 4 <= len(rows) < B
    keep = torch.tensor([b for b, _ in rows])
    T = max(len(r) for _, r in rows)
    target = torch.tensor([r + [PAD] * (T - len(r)) for _, r in rows])  # [b, T] tokens, EOS, pads
    prev = torch.cat([torch.full((len(rows), 1), EOS), target[:, :-1]], 1).masked_fill(target.eq(PAD), PAD)
    sample = {"net_input": {"src_tokens": src[keep], "src_lengths": lengths[keep], "prev_output_tokens": prev},
              "target": target}
    assert greedy_match_teacher_forced(model, sample, PAD).all()
    assert batch_exact_match(model, sample, PAD, EOS).all()
