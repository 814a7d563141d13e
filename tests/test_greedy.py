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
