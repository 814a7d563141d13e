"""Greedy autoregressive decoding and exact-match accuracy as Csordás et al. (2021) evaluate.

Csordás et al. (2021), App. A and their code: a prediction is correct only if every token is correct *and* the predicted length (the
position of the first EOS) equals the reference length. Decoding stops at EOS; decoding more than
reference length + 1 steps cannot change the verdict, so that is the step budget.

Oracle length (Newman et al. 2020 "+EOS+Oracle", the authors' code's oracle accuracy): the EOS logit
is set to -inf and exactly the reference length is decoded; the first ref_len tokens are compared.

PAD is never predicted, as fairseq's SequenceGenerator (what `fairseq-compgen eval` runs) never selects it: where
PAD has the highest score, the next best token is taken.
"""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor


def without_pad(lprobs: Tensor, pad: Optional[int]) -> Tensor:
    """lprobs [..., V] with PAD's score -inf (a new tensor: the criterion's output may be shared); None: as it is."""
    if pad is None:
        return lprobs
    return lprobs.index_fill(-1, torch.tensor([pad], device=lprobs.device), float("-inf"))


@torch.no_grad()
def greedy_decode(model, src_tokens: Tensor, src_lengths: Tensor, max_steps: int, eos: int,
                  forbid_eos: bool = False, pad: Optional[int] = None) -> Tensor:
    """Returns [B, max_steps] predicted tokens (after the leading EOS the decoder starts from); `pad`: never
    predicted (fairseq's generator's rule; the task passes it).

    Rows are not cut at EOS here; callers compare with `exact_match_rows`. Stops early once every row
    has produced EOS (unless `forbid_eos`).
    """
    B = src_tokens.size(0)
    encoder_out = model.encoder(src_tokens, src_lengths=src_lengths)
    tokens = torch.full((B, 1), eos, dtype=torch.long, device=src_tokens.device)  # [B, 1]
    incremental_state = {}
    finished = torch.zeros(B, dtype=torch.bool, device=src_tokens.device)
    for _ in range(max_steps):
        out = model.decoder(tokens, encoder_out=encoder_out, incremental_state=incremental_state)
        lprobs = without_pad(model.get_normalized_probs((out[0][:, -1:, :], out[1]), log_probs=True)[:, -1, :],
                             pad)  # [B, V]
        if forbid_eos:
            lprobs[:, eos] = float("-inf")
        nxt = lprobs.argmax(-1)  # [B]
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
        finished |= nxt.eq(eos)
        if not forbid_eos and bool(finished.all()):
            break
    pred = tokens[:, 1:]
    if pred.size(1) < max_steps:  # pad with EOS so every row has max_steps columns
        pred = torch.cat([pred, pred.new_full((B, max_steps - pred.size(1)), eos)], dim=1)
    return pred


def exact_match_rows(pred: Tensor, target: Tensor, pad: int, eos: int, oracle: bool = False) -> Tensor:
    """pred [B, T1] from greedy_decode, target [B, T2] (fairseq target: tokens, EOS, then pads) -> bool [B].

    Normal: pred up to its first EOS must equal target up to its EOS (same tokens, same length).
    Oracle: the first ref_len predicted tokens must equal the reference tokens.
    """
    ref_len = (target.ne(pad) & target.ne(eos)).sum(1)  # [B]; targets are right-padded: tokens come first
    T = max(pred.size(1), target.size(1))
    pred_p = F.pad(pred, (0, T - pred.size(1)), value=pad)  # [B, T]
    targ_p = F.pad(target, (0, T - target.size(1)), value=pad)  # [B, T]
    in_ref = torch.arange(T, device=pred.device)[None, :] < ref_len[:, None]  # [B, T]
    same_tokens = ((pred_p == targ_p) | ~in_ref).all(1)  # the first ref_len tokens agree
    if oracle:
        return same_tokens
    is_eos = pred_p.eq(eos)
    hyp_len = torch.where(is_eos.any(1), is_eos.float().argmax(1), torch.full_like(ref_len, pred.size(1)))  # first EOS
    return same_tokens & hyp_len.eq(ref_len)


def batch_exact_match(model, sample, pad: int, eos: int, oracle: bool = False) -> Tensor:
    """Greedy exact match of one fairseq batch -> bool [B]."""
    target: Tensor = sample["target"]
    ref_len = (target.ne(pad) & target.ne(eos)).sum(1)
    steps = int(ref_len.max()) if oracle else int(ref_len.max()) + 1
    net = sample["net_input"]
    pred = greedy_decode(model, net["src_tokens"], net["src_lengths"], steps, eos, forbid_eos=oracle, pad=pad)
    return exact_match_rows(pred, target, pad, eos, oracle)


@torch.no_grad()
def greedy_match_teacher_forced(model, sample, pad: int, net_output=None) -> Tensor:
    """Greedy exact match of one fairseq batch from one teacher-forced pass -> bool [B] (see the module docstring).

    Equal to `batch_exact_match(model, sample, pad, eos)` without step-by-step decoding (the target's own EOS
    is what the prediction must match at the reference length). `net_output`: the model's
    output on `sample["net_input"]` if already computed.
    """
    target: Tensor = sample["target"]  # [B, T]: tokens, EOS, pads
    out = model(**sample["net_input"]) if net_output is None else net_output
    pred = without_pad(model.get_normalized_probs(out, log_probs=True), pad).argmax(-1)  # [B, T], first max on ties
    return (pred.eq(target) | target.eq(pad)).all(1)


@torch.no_grad()
def teacher_forced_exact_match(model, sample, pad: int, eos: int, net_output=None) -> Tensor:
    """The teacher-forced sequence accuracy of Ontañón et al.'s notebook (their Section 4's sequence-level accuracy) -> bool [B].

    One forward pass with the gold prefix; argmax at every position; after the first predicted EOS or PAD every
    later prediction is forced to PAD; the whole row must equal the target (tokens, EOS, pads). Equivalent to
    greedy exact match for a deterministic model, hence a cross-check of `accuracy`.
    """
    target: Tensor = sample["target"]  # [B, T]
    out = model(**sample["net_input"]) if net_output is None else net_output
    pred = out[0].argmax(-1)  # [B, T]
    ended = pred.eq(eos) | pred.eq(pad)
    after_end = (ended.long().cumsum(1) - ended.long()) > 0  # strictly after the first EOS/PAD
    pred = pred.masked_fill(after_end, pad)
    return pred.eq(target).all(1)
