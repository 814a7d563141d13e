"""Exact match as Csordás et al. (2021, spec_000 §1) define it, against a direct per-row implementation."""
import random

import torch

from fairseq_compgen.tasks.greedy import exact_match_rows

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
